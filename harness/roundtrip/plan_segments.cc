#include "harness/roundtrip/plan_segments.h"

#include <algorithm>
#include <fstream>

#include "models/checked_math.h"
#include "models/flat_state.h"

namespace ih {

using json::Json;

Json segment_json(const Segment& s, std::int64_t key_id) {
  return Json::array({s.begin, s.rows, key_id, s.global_shape, s.global_offset, s.prepend});
}

Segment whole_tensor(const ShardedTensor& t) {
  return {0, t.local_shape.empty() ? 1 : t.local_shape[0], t.key, t.global_shape, t.global_offset, t.prepend_axis_num};
}

namespace {

/// The segments of a built tensor's row blocks over its factory's data (zero blocks map nothing).
std::vector<Segment> row_block_segments(const ShardedTensor& t) {
  std::vector<Segment> out;
  std::int64_t pos = 0;
  for (const RowBlock& b : t.data->blocks) {
    if (!b.is_zero()) {
      Segment s{b.first_row, b.rows, t.key, t.global_shape, t.global_offset, t.prepend_axis_num};
      s.global_offset[static_cast<std::size_t>(t.prepend_axis_num)] += pos;
      out.push_back(std::move(s));
    }
    pos += b.rows;
  }
  return out;
}

}  // namespace

Result<std::vector<Segment>> factory_segments(const ShardedTensorFactory& f) {
  IH_TRY_ASSIGN(built, f.build());
  std::vector<Segment> out;
  std::int64_t next_row = 0;
  for (const FlatEntry& e : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t) continue;
    if (!f.data) {
      const std::int64_t rows = t->local_shape.empty() ? 1 : t->local_shape[0];
      out.push_back({next_row, rows, t->key, t->global_shape, t->global_offset, t->prepend_axis_num});
      next_row += rows;
      continue;
    }
    if (!t->data) return make_error(seam_kind::harness_error, "factory '" + f.key + "' built a tensor without data");
    for (Segment& s : row_block_segments(*t)) out.push_back(std::move(s));
  }
  return out;
}

Result<bool> factory_is_main(const ShardedTensorFactory& f) {
  if (f.data) return f.replica_id.is_main();
  IH_TRY_ASSIGN(built, f.build());
  for (const FlatEntry& e : flatten(built))
    if (const auto* t = std::get_if<ShardedTensor>(&e.entry); t && !t->is_main_replica()) return false;
  return true;
}

Result<Shape> factory_local_shape(const ShardedTensorFactory& f) {
  if (f.data) return f.data->shape;
  IH_TRY_ASSIGN(built, f.build());
  Shape shape;
  for (const FlatEntry& e : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t) continue;
    if (shape.empty()) {
      shape = t->local_shape;
    } else if (t->local_shape.size() != shape.size() ||
               !std::equal(shape.begin() + 1, shape.end(), t->local_shape.begin() + 1)) {
      return make_error(seam_kind::harness_error, "factory '" + f.key + "': built tensors of different row shapes");
    } else {
      shape[0] += t->local_shape[0];
    }
  }
  return shape;
}

std::vector<Segment> window(const std::vector<Segment>& segs, std::int64_t first, std::int64_t rows) {
  std::vector<Segment> out;
  for (const Segment& seg : segs) {
    const std::int64_t lo = std::max(seg.begin, first), hi = std::min(seg.begin + seg.rows, first + rows);
    if (lo >= hi) continue;
    Segment w = seg;
    w.begin = lo - first;
    w.rows = hi - lo;
    w.global_offset[static_cast<std::size_t>(seg.prepend)] += lo - seg.begin;
    out.push_back(std::move(w));
  }
  return out;
}

Segment retargeted_segment(const Segment& pre, const Segment& post) {
  Segment out = pre;
  out.key = post.key;
  out.prepend = post.prepend;
  const auto keep = static_cast<std::ptrdiff_t>(post.prepend), skip = static_cast<std::ptrdiff_t>(pre.prepend);
  out.global_shape.assign(post.global_shape.begin(), post.global_shape.begin() + keep);
  out.global_shape.insert(out.global_shape.end(), pre.global_shape.begin() + skip, pre.global_shape.end());
  out.global_offset.assign(post.global_offset.begin(), post.global_offset.begin() + keep);
  out.global_offset.insert(out.global_offset.end(), pre.global_offset.begin() + skip, pre.global_offset.end());
  return out;
}

Result<GatheredShard> gathered_shard(GtpFactoryParams params) {
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  params.shard = TensorValue::of_storage(1, {padding.shard_rows, params.cols});
  IH_TRY_ASSIGN(factory, make_gtp_factory(GtpSaveDesign::gather, params));
  IH_TRY_ASSIGN(gathered, factory_segments(factory));
  GatheredShard out;
  out.shard = window(gathered, params.gtp_rank * padding.shard_rows, padding.shard_rows);
  out.gathered = std::move(gathered);
  out.shard_shape = {padding.shard_rows, params.cols};
  out.factory = std::move(factory);
  return out;
}

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    auto m = checked_mul(n, d, "tensor size");
    n = m.ok() ? *m : INT64_MAX;
  }
  return n;
}

std::string offset_text(const Shape& offset) {
  std::string s;
  for (std::size_t i = 0; i < offset.size(); ++i) s += (i ? "," : "") + std::to_string(offset[i]);
  return s;
}

std::string oracle_object_text(const ShardedObject& object) {
  return "oracle-object|" + object.key + "|" + offset_text(object.global_offset);
}

bool carries_value(const ShardedObject& object) {
  return object.data && std::holds_alternative<CarriedValue>(*object.data);
}

// Walks the local block's elements (small models: at most a few hundred thousand).
std::int64_t mark_covered(std::vector<char>& bits, const Json& segment, const Shape& local) {
  const Shape gshape = segment[3].get<Shape>(), goff = segment[4].get<Shape>();
  const std::int64_t p = segment[5].get<std::int64_t>(), rows = segment[1].get<std::int64_t>();
  const std::int64_t inner = local.empty() ? 1 : numel(Shape(local.begin() + 1, local.end()));
  std::int64_t walked = 0;
  for (std::int64_t row = 0; row < rows; ++row)
    for (std::int64_t k = 0; k < inner; ++k, ++walked) {
      std::int64_t rem = k, lin = 0;
      Shape g = goff;
      if (!local.empty()) {
        g[static_cast<std::size_t>(p)] += row;
        for (std::size_t d = local.size(); d-- > 1;) {
          g[static_cast<std::size_t>(p) + d] += rem % local[d];
          rem /= local[d];
        }
      }
      for (std::size_t d = 0; d < gshape.size(); ++d) lin = lin * gshape[d] + g[d];
      if (lin >= 0 && lin < static_cast<std::int64_t>(bits.size())) bits[static_cast<std::size_t>(lin)] = 1;
    }
  return walked;
}

namespace {

/// The error of a chunk with several main replicas (`ranks`), typed by whose description it is.
Error several_main_replicas(const Chunk& chunk, const std::vector<std::int64_t>& ranks, DescribedBy described_by) {
  std::string where;
  for (std::int64_t r : ranks) where += (where.empty() ? "" : ", ") + std::to_string(r);
  const std::string what = std::to_string(ranks.size()) + " main replicas of " + chunk.first + " at [" +
                           offset_text(chunk.second) + "] (save ranks " + where + ")";
  if (described_by == DescribedBy::reference) return make_error(seam_kind::harness_error, "plan bug: " + what);
  return make_error(seam_kind::description_disagrees,
                    "Megatron's sharded state dict describes " + what + "; the reference lays out exactly one");
}

}  // namespace

Result<Json> expected_writers_json(const std::map<Chunk, std::vector<std::int64_t>>& main_replicas,
                                   const std::map<Chunk, std::set<std::int64_t>>* holders, DescribedBy described_by) {
  Json out = Json::array();
  for (const auto& [chunk, ranks] : main_replicas) {
    if (ranks.size() != 1) return several_main_replicas(chunk, ranks, described_by);
    Json writer = Json::array({chunk.first, chunk.second, ranks[0]});
    if (holders) writer.push_back(holders->at(chunk));
    out.push_back(std::move(writer));
  }
  return out;
}

Status write_plan_file(const std::filesystem::path& path, const Json& value) {
  std::ofstream out(path, std::ios::binary);
  out << json::dump(value) << "\n";
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

Status create_plan_dir(const std::filesystem::path& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());
  return Ok{};
}

Status write_catalogue(const std::filesystem::path& dir, const Catalogue& c) {
  const Json oracle{{"key_shift", c.encoding.key_shift}, {"dtype", std::string(to_string(c.encoding.dtype))}};
  return write_plan_file(dir / "catalogue.json", Json{{"oracle", oracle},
                                                      {"keys", c.keys},
                                                      {"fresh_keys", c.fresh_keys},
                                                      {"aliases", c.aliases},
                                                      {"writers", c.writers},
                                                      {"saved_plain", c.saved_plain},
                                                      {"uncovered_elements", c.uncovered_elements},
                                                      {"spread_writes", c.spread_writes}});
}

}  // namespace ih
