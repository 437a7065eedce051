#include "harness/megatron/gtp_checks.h"

#include <string>

#include "codec/json_codec.h"
#include "harness/megatron/megatron_implementation.h"
#include "seam/reference_implementation.h"

namespace ih::megatron {
namespace {

struct GatherCase {
  std::string name;
  SplitLayout layout;
  std::int64_t tp = 1, gtp = 1, pad = 0, cols = 2;
};

SplitLayout gdp_layout(std::int64_t d_inner, std::int64_t group_state, std::int64_t nheads, std::int64_t m) {
  SplitLayout out;
  out.sections.push_back(d_inner), out.names.push_back("z");
  for (std::int64_t i = 0; i < m; ++i) out.sections.push_back(d_inner), out.names.push_back("V" + std::to_string(i));
  for (std::int64_t i = 0; i < m; ++i)
    out.sections.push_back(group_state), out.names.push_back("K" + std::to_string(i));
  out.sections.push_back(group_state), out.names.push_back("Q");
  for (std::int64_t i = 0; i < m; ++i) out.sections.push_back(nheads), out.names.push_back("b" + std::to_string(i));
  out.sections.push_back(nheads), out.names.push_back("a");
  return out;
}

/// Review layout (D = 60) at TP2 x GTP2 with p = 16; the same at GTP4 with p = 32 (ranks 2 and 3
/// hold only padding, rows < p*G); no padding (p = 0, D divisible). GTP size 1 is left out: Megatron
/// does not wrap parameters for a one-rank GTP group (no padding, no gather) while the reference
/// pads (docs/megatron-findings.md, finding G1).
std::vector<GatherCase> cases() {
  return {{"review_tp2_g2_p16", gdp_layout(10, 3, 2, 3), 2, 2, 16, 2},
          {"review_tp1_g4_p32_all_padding", gdp_layout(10, 3, 2, 3), 1, 4, 32, 2},
          {"small_tp2_g2_p0", gdp_layout(4, 2, 1, 1), 2, 2, 0, 3}};
}

GtpFactoryParams params_of(const GatherCase& c, std::int64_t t, std::int64_t g) {
  GtpFactoryParams p;
  p.key = "decoder.layers.0.mixer.in_proj.weight";
  p.layout = c.layout;
  p.tp_size = c.tp, p.tp_rank = t, p.gtp_size = c.gtp, p.gtp_rank = g;
  p.pad_alignment = c.pad, p.cols = c.cols, p.dtype = "bfloat16";
  p.replica_id = ReplicaId::tuple({0, 0, g});  // gather: the GTP-inclusive dp_cp rank (DP = 1)
  const auto padding = gtp_padding_of(p);
  const std::int64_t rows = padding.ok() ? padding->shard_rows : 0;
  p.shard = TensorValue::of_storage(1 + static_cast<std::uint64_t>(t * c.gtp + g), {rows, c.cols}, p.dtype);
  p.gather_storage = (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(t);
  return p;
}

std::string where(const GatherCase& c, std::int64_t t, std::int64_t g) {
  return c.name + " rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ")";
}

std::string show(const Result<StateNode>& r) {
  if (!r.ok()) return "error " + std::string(to_string(r.error().kind)) + ": " + r.error().message;
  std::string out;
  visit_leaves(*r, [&](const std::string& path, const Leaf& leaf) {
    out += path + "=" + json::dump(json::leaf_to_json(leaf)) + " ";
  });
  return out;
}

std::string show(const Result<TensorValue>& r) {
  if (!r.ok()) return "error " + std::string(to_string(r.error().kind)) + ": " + r.error().message;
  return json::dump(json::leaf_to_json(Leaf(LocalNonpersistent{Payload(*r)}))["value"]);
}

std::string show(const Result<ShardedTensor>& r) {
  if (!r.ok()) return "error " + std::string(to_string(r.error().kind)) + ": " + r.error().message;
  return json::dump(json::leaf_to_json(Leaf(*r)));
}

/// Every rank: the target's build equals the reference's (keys, boxes, replica ids, data views).
Result<std::string> check_pieces(Implementation& target) {
  ReferenceImplementation reference;
  for (const GatherCase& c : cases())
    for (std::int64_t t = 0; t < c.tp; ++t)
      for (std::int64_t g = 0; g < c.gtp; ++g) {
        const GtpFactoryParams p = params_of(c, t, g);
        auto got = target.gtp_pieces(GtpSaveDesign::gather, p);
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = show(reference.gtp_pieces(GtpSaveDesign::gather, p)), got_text = show(got);
        if (got_text != want_text)
          return where(c, t, g) + "\n      reference: " + want_text + "\n      target:    " + got_text;
      }
  return std::string();
}

/// Every rank: merging the pieces' data back gives the reference's (R, C) shard: the rank's real
/// rows of the gathered tensor, then zero pad rows.
Result<std::string> check_merge(Implementation& target) {
  ReferenceImplementation reference;
  for (const GatherCase& c : cases())
    for (std::int64_t t = 0; t < c.tp; ++t)
      for (std::int64_t g = 0; g < c.gtp; ++g) {
        GtpFactoryParams p = params_of(c, t, g);
        IH_TRY_ASSIGN(built, reference.gtp_pieces(GtpSaveDesign::gather, p));
        StateList loaded;
        visit_leaves(built, [&](const std::string&, const Leaf& leaf) {
          if (const auto* st = std::get_if<ShardedTensor>(&leaf); st && st->data) loaded.emplace_back(*st->data);
        });
        p.shard.reset();  // load preprocessing strips the factory's data
        auto got = target.gtp_merge(GtpSaveDesign::gather, p, StateNode(loaded));
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = show(reference.gtp_merge(GtpSaveDesign::gather, p, StateNode(loaded))),
                          got_text = show(got);
        if (got_text != want_text)
          return where(c, t, g) + " merge\n      reference: " + want_text + "\n      target:    " + got_text;
      }
  return std::string();
}

/// Every rank: the GTP parameter's own entry (composite offset t*G + g, padded global shape,
/// allow_shape_mismatch with padding, the writer elected over the GTP-excluded DP group: (0, 0, 0)
/// at DP = 1, a view of the shard).
Result<std::string> check_param_entry(Implementation& target) {
  ReferenceImplementation reference;
  for (const GatherCase& c : cases())
    for (std::int64_t t = 0; t < c.tp; ++t)
      for (std::int64_t g = 0; g < c.gtp; ++g) {
        GtpFactoryParams p = params_of(c, t, g);
        p.replica_id = ReplicaId::tuple({0, 0, 0});
        auto got = target.gtp_param_entry(p);
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = show(reference.gtp_param_entry(p)), got_text = show(got);
        if (got_text != want_text)
          return where(c, t, g) + " parameter entry\n      reference: " + want_text + "\n      target:    " + got_text;
      }
  return std::string();
}

/// serialization.load with all-padding GTP ranks whose factory built one LNP (spec 3.8, 4.7): every
/// rank gets its real rows then zeros, the LNP's key and the common part back (Megatron only).
Result<std::string> check_all_padding_load(Implementation& target) {
  auto* megatron = dynamic_cast<MegatronImplementation*>(&target);
  if (!megatron)
    return unsupported(target.name(), "Megatron's serialization.load on a real checkpoint (Megatron targets only)");
  if (!megatron->supports(Operation::gtp_param_entry))
    return unsupported(target.name(), "GTP (no GTP in this Megatron)");
  const std::int64_t rows = 6, gtp = 4, shard_rows = 16, cols = 2;  // ranks 1-3 hold only padding
  IH_TRY_ASSIGN(result, megatron->all_padding_load(rows, gtp, shard_rows, cols));
  const json::Json ranks = result.value("ranks", json::Json::array());
  if (static_cast<std::int64_t>(ranks.size()) != gtp)
    return "expected " + std::to_string(gtp) + " ranks, got " + json::dump(result);
  for (std::int64_t g = 0; g < gtp; ++g) {
    const json::Json& r = ranks[static_cast<std::size_t>(g)];
    if (!r.value("ok", false))
      return "GTP rank " + std::to_string(g) + ": serialization.load failed: " + r.value("error", std::string("?"));
    json::Json want = json::Json::array();
    for (std::int64_t j = 0; j < shard_rows; ++j)
      want.push_back(g == 0 && j < rows ? json::Json::array({0, j}) : json::Json(nullptr));
    if (r["rows"] != want)
      return "GTP rank " + std::to_string(g) + ": loaded rows " + json::dump(r["rows"]) + ", expected " +
             json::dump(want);
    if (r["keys"] != json::Json::array({"iteration", "local", "mixer"}))
      return "GTP rank " + std::to_string(g) + ": loaded keys " + json::dump(r["keys"]);
  }
  return std::string();
}

}  // namespace

std::vector<gate::Check> gtp_gather_checks() {
  return {gate::Check::simple("gtp-gather", "gather_pieces", check_pieces),
          gate::Check::simple("gtp-gather", "gather_merge", check_merge),
          gate::Check::simple("gtp-gather", "gather_param_entry", check_param_entry),
          gate::Check::simple("gtp-gather", "all_padding_load", check_all_padding_load)};
}

}  // namespace ih::megatron
