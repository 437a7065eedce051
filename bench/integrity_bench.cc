// Exact integrity on boxes vs a dense element-bitmap checker, on the PR's production GDP model:
// 72 layers, TP = 8, G = 64, p = 32, TP-local in_proj 61,760 x 10,240 (d_inner_l 10,240,
// group_state_l 5,120, nheads_l 80, M = 3; spec 4.8). Plain timing; link against libih_models.a.
//   integrity_bench [--layers N] [--dense-layers N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <string>

#include "models/gtp_layout.h"
#include "models/integrity.h"
#include "models/split_factory.h"

// Allocation tracking: current and peak live bytes of the whole process.
namespace {
std::size_t g_live = 0, g_peak = 0;
void* track_alloc(std::size_t n) {
  auto* p = static_cast<std::size_t*>(std::malloc(n + 16));
  if (!p) throw std::bad_alloc();
  *p = n;
  g_live += n;
  if (g_live > g_peak) g_peak = g_live;
  return reinterpret_cast<char*>(p) + 16;
}
void track_free(void* q) {
  if (!q) return;
  auto* p = reinterpret_cast<std::size_t*>(static_cast<char*>(q) - 16);
  g_live -= *p;
  std::free(p);
}
}  // namespace
void* operator new(std::size_t n) { return track_alloc(n); }
void* operator new[](std::size_t n) { return track_alloc(n); }
void operator delete(void* p) noexcept { track_free(p); }
void operator delete[](void* p) noexcept { track_free(p); }
void operator delete(void* p, std::size_t) noexcept { track_free(p); }
void operator delete[](void* p, std::size_t) noexcept { track_free(p); }

namespace {

using namespace ih;
constexpr std::int64_t kT = 8, kG = 64, kP = 32, kHidden = 10'240, kDInnerL = 10'240, kGroupStateL = 5'120,
                       kHeadsL = 80;

ShardedTensor entry(std::string key, Shape local, Shape global, Shape offset, ReplicaId replica, bool regular) {
  ShardedTensor t;
  t.key = std::move(key), t.dtype = "bfloat16", t.local_shape = std::move(local), t.global_shape = std::move(global);
  t.global_offset = std::move(offset), t.replica_id = std::move(replica);
  if (regular) t.axis_fragmentations = Shape(t.global_shape.size(), 1);  // only the kind matters here
  return t;
}

void add_layer(GlobalMetadata& meta, int layer) {
  const std::string prefix = "decoder.layers." + std::to_string(layer) + ".mixer.";
  const GdpDims dims{kDInnerL, kGroupStateL, kHeadsL, 3};
  const SplitLayout in_proj = gdp_in_proj_layout(dims).value(), conv = gdp_conv_layout(dims).value();
  const GtpPadding pad = gtp_padding(in_proj.total_rows().value(), kG, kP).value();
  const auto conv_starts = conv.starts();
  for (std::int64_t t = 0; t < kT; ++t)
    for (std::int64_t g = 0; g < kG; ++g) {
      const std::int64_t rank = t * kG + g;
      const ReplicaId main = ReplicaId::tuple({0, 0, 0}), peer = ReplicaId::tuple({0, g, 0});
      const std::vector<GtpPiece> plan = gtp_piece_plan(in_proj, pad, kT, t, g).value();
      for (const GtpPiece& p : plan)  // shard-split pieces
        meta.tensors.push_back({rank, entry(prefix + "in_proj.weight." + in_proj.names[p.section], {p.rows, kHidden},
                                            {p.global_rows, kHidden}, {p.global_row_offset, 0}, main, false)});
      for (std::size_t j = 0; j < conv.sections.size(); ++j)  // non-GTP split of conv1d, replicated over g
        meta.tensors.push_back({rank, entry(prefix + "conv1d.weight." + conv.names[j], {conv.sections[j], 1, 4},
                                            {kT * conv.sections[j], 1, 4}, {t * conv.sections[j], 0, 0}, peer, true)});
      meta.tensors.push_back(
          {rank, entry(prefix + "out_proj.weight", {kHidden / kG, kDInnerL},  // row-parallel + GTP axis 0
                       {kHidden, kT * kDInnerL}, {g * (kHidden / kG), t * kDInnerL}, main, true)});
      for (const char* name : {"A_log", "D", "dt_bias"})
        meta.tensors.push_back({rank, entry(prefix + name, {kHeadsL}, {kT * kHeadsL}, {t * kHeadsL}, peer, true)});
      meta.tensors.push_back(
          {rank, entry(prefix + "norm.weight", {kDInnerL}, {kT * kDInnerL}, {t * kDInnerL}, peer, true)});
    }
}

// Sets bits [begin, end); returns true if any was already set (an overlap).
bool set_bits(std::vector<std::uint64_t>& bits, std::uint64_t begin, std::uint64_t end) {
  bool overlap = false;
  for (std::uint64_t i = begin; i < end;) {
    if (i % 64 == 0 && end - i >= 64) {
      overlap |= bits[i / 64] != 0;
      bits[i / 64] = ~std::uint64_t{0};
      i += 64;
    } else {
      const std::uint64_t mask = std::uint64_t{1} << (i % 64);
      overlap |= (bits[i / 64] & mask) != 0;
      bits[i / 64] |= mask;
      ++i;
    }
  }
  return overlap;
}

// Dense checker: one bit per element of each key (allocated per key), rows of the last axis at a time.
std::size_t dense_check(const GlobalMetadata& meta, std::uint64_t& whole_bits) {
  std::map<std::string, std::vector<const ShardedTensor*>> keys;
  for (const RankedTensor& e : meta.tensors) keys[e.tensor.key].push_back(&e.tensor);
  std::size_t problems = 0;
  for (const auto& [key, entries] : keys) {
    const Shape& global = entries.front()->global_shape;
    std::uint64_t total = 1;
    for (std::int64_t s : global) total *= static_cast<std::uint64_t>(s);
    whole_bits += total;
    std::vector<std::uint64_t> bits((total + 63) / 64, 0);
    for (const ShardedTensor* t : entries) {
      if (!t->is_main_replica()) continue;
      const std::size_t n = global.size();
      std::vector<std::int64_t> idx(n - 1, 0);  // odometer over all axes but the last
      while (true) {
        std::uint64_t flat = 0;
        for (std::size_t a = 0; a + 1 < n; ++a) flat = flat * global[a] + (t->global_offset[a] + idx[a]);
        flat = flat * global[n - 1] + t->global_offset[n - 1];
        problems += set_bits(bits, flat, flat + t->local_shape[n - 1]);
        std::size_t a = n - 1;
        while (a > 0 && ++idx[a - 1] == t->local_shape[a - 1]) idx[--a] = 0;
        if (a == 0) break;
      }
    }
    std::uint64_t set = 0;
    for (std::uint64_t w : bits) set += __builtin_popcountll(w);
    problems += set != total;
  }
  return problems;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = arg(argc, argv, "--layers", 72), dense_layers = arg(argc, argv, "--dense-layers", layers);
  GlobalMetadata meta, dense_meta;
  for (int l = 0; l < layers; ++l) add_layer(meta, l);
  for (int l = 0; l < dense_layers; ++l) add_layer(dense_meta, l);
  std::printf("model: %d GDP layers, TP=%lld, G=%lld, p=%lld, %zu metadata entries (%.1f MiB live)\n", layers,
              (long long)kT, (long long)kG, (long long)kP, meta.tensors.size(), g_live / 1048576.0);

  std::size_t base = g_live;
  g_peak = g_live;
  auto start = std::chrono::steady_clock::now();
  const IntegrityReport report = check_integrity(meta);
  const double box_s = seconds_since(start);
  const double box_peak = (g_peak - base) / 1048576.0;
  std::printf("box integrity:   %.3f s, peak %.1f MiB above input, ok=%d (%zu problems)\n", box_s, box_peak,
              report.ok(), report.problems.size());

  base = g_live;
  g_peak = g_live;
  std::uint64_t whole_bits = 0;
  start = std::chrono::steady_clock::now();
  const std::size_t dense_problems = dense_check(dense_meta, whole_bits);
  const double dense_s = seconds_since(start);
  const double dense_peak = (g_peak - base) / 1048576.0;
  std::printf(
      "dense bitmap:    %.3f s on %d layers, peak %.1f MiB above input (one key's bitmap at a time), "
      "%zu problems\n",
      dense_s, dense_layers, dense_peak, dense_problems);
  const double whole_gib = dense_layers > 0 ? whole_bits / 8.0 / 1073741824.0 * layers / dense_layers : 0;
  std::printf("dense, all %d layers' keys at once, would need %.1f GiB of bitmap (> 8 GiB: so it goes key by key)\n",
              layers, whole_gib);
  const double scaled = dense_layers > 0 ? dense_s * layers / dense_layers : 0;
  std::printf("ratio dense/box: %.1fx (dense time scaled to %d layers: %.3f s)\n", scaled / box_s, layers, scaled);
  return report.ok() && dense_problems == 0 ? 0 : 1;
}
