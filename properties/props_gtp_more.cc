// More GTP properties: nothing leaks into the common tree (6.5), the parameter entry the optimizer
// keys on (4.7 invariant 7), and the integrity operation itself finding a dropped piece (6.10).
#include <set>

#include "models/checkpoint_model.h"
#include "properties/gtp_world.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

StateNode rank_tree(std::optional<ShardedTensorFactory> in_proj, const GtpFactoryParams& params) {
  StateDict mixer;
  if (in_proj) mixer.push_back({std::string("in_proj.weight"), StateNode(*in_proj)});
  auto a_log = ShardedTensor::from_rank_offsets("decoder.layers.0.mixer.A_log", {4}, {}, params.replica_id, 0,
                                                TensorValue::of_storage(99'999, {4}));
  mixer.push_back({std::string("A_log"), StateNode(a_log.value())});
  return StateNode(StateDict{{std::string("mixer"), StateNode(std::move(mixer))},
                             {std::string("iteration"), StateNode(PlainValue{"7"})}});
}

Verdict save_common_unchanged(Implementation& impl, const GtpCase& c) {
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(c, t, g));
      IH_VERDICT_ASSIGN(with, save_preprocess(rank_tree(seam_factory(impl, c.design, params), params)));
      IH_VERDICT_ASSIGN(without, save_preprocess(rank_tree(std::nullopt, params)));
      if (with.common != without.common)
        return "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) +
               "): the in_proj factory changed the save-preprocessed common tree";
    }
  return "";
}

Verdict param_entry_layout(Implementation& impl, const GtpCase& c) {
  IH_VERDICT_ASSIGN(pad, padding_of(c));
  GlobalMetadata metadata;
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(c, t, g));
      IH_VERDICT_ASSIGN(e, impl.gtp_param_entry(params));
      const std::int64_t R = pad.shard_rows;
      const bool ok = e.key == params.key && e.local_shape == Shape{R, c.cols} &&
                      e.global_shape == Shape{c.tp * c.gtp * R, c.cols} &&
                      e.global_offset == Shape{(t * c.gtp + g) * R, 0} && e.allow_shape_mismatch == (pad.pad > 0) &&
                      e.data && canonical(*e.data) == canonical(*params.shard);
      if (!ok)
        return "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + "): parameter entry global (" +
               std::to_string(e.global_shape[0]) + ", C) offset " + std::to_string(e.global_offset[0]) +
               ", expected the padded per-shard description (T*G*R = " + std::to_string(c.tp * c.gtp * R) + " rows)";
      metadata.tensors.push_back({t * c.gtp + g, e.without_data()});
    }
  const IntegrityReport report = check_integrity(metadata);
  return report.ok() ? "" : "parameter entries do not tile: " + report.problems.front().message;
}

Verdict integrity_finds_dropped_piece(Implementation& impl, const GtpCase& c) {
  IH_VERDICT_ASSIGN(ranks, build_all(impl, c));
  GlobalMetadata all;
  std::set<std::string> keys;
  for (const RankBuild& r : ranks)
    for (const ShardedTensor& p : r.pieces) {
      all.tensors.push_back({r.t * c.gtp + r.g, p.without_data()});
      keys.insert(p.key);
    }
  const std::vector<std::string> key_list(keys.begin(), keys.end());
  IH_VERDICT_ASSIGN(clean, impl.integrity(all, key_list));
  if (!clean.ok()) return "integrity rejects a valid layout: " + clean.problems.front().message;
  GlobalMetadata dropped = all;
  const std::size_t victim = c.drop % all.tensors.size();
  const std::string key = all.tensors[victim].tensor.key;
  dropped.tensors.erase(dropped.tensors.begin() + static_cast<std::ptrdiff_t>(victim));
  IH_VERDICT_ASSIGN(report, impl.integrity(dropped, key_list));
  for (const IntegrityProblem& p : report.problems)
    if (p.key == key && (p.kind == ProblemKind::hole || p.kind == ProblemKind::missing_key)) return "";
  return "integrity misses the hole left by dropping piece " + std::to_string(victim) + " of key " + key;
}

}  // namespace

std::vector<Property> gtp_layout_properties_more() {
  const WorldGen<GtpCase> gen = [](const WorldCapacity& capacity) {
    return genGtpConfig(GtpSaveDesign::shard_split, capacity);
  };
  GtpCase tiny{"gdp", {1, 1, 1, 1}, 2, 8, 16, 2, "float32", GtpSaveDesign::shard_split, 0};
  const std::map<std::string, GtpCase> spec = {{"tiny_all_padding", tiny}};
  return {
      make_world_property<GtpCase>("gtp_save_common_unchanged", "gtp",
                                   "the in_proj factory adds nothing to the save-preprocessed common tree (6.5)", gen,
                                   save_common_unchanged, spec),
      make_world_property<GtpCase>(
          "gtp_param_entry_layout", "gtp",
          "the parameter entry is the padded per-shard description, a view, tiling T*G*R rows (4.7.7)", gen,
          param_entry_layout),
      make_world_property<GtpCase>("integrity_finds_dropped_piece", "gtp",
                                   "the integrity op accepts all pieces and finds the hole of one dropped piece (6.10)",
                                   gen, integrity_finds_dropped_piece),
  };
}

}  // namespace ih::props
