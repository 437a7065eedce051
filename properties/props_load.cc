// Saves and loads through the checkpoint model: cross-GTP loads of in_proj (4.7 invariant 6), the
// to_state_dict ordering (6.11), and GPT saved at layout A loaded by a hybrid run at layout B.
#include "models/checkpoint_model.h"
#include "properties/gtp_world.h"
#include "properties/load_world.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

/// What rank (t, g) of `load` must hold after loading: the TP-local rows it covers, in provenance
/// terms of the save (shard storages or the gathered buffer), then zero pad rows.
Result<TensorValue> expected_rows(const GtpCrossCase& c, const GtpPadding& saved, const GtpPadding& loaded,
                                  std::int64_t t, std::int64_t g) {
  std::vector<TensorValue> parts{TensorValue::zeros({0, c.save.cols}, c.save.dtype)};
  const std::int64_t begin = g * loaded.shard_rows, end = begin + loaded.real_rows(g);
  for (std::int64_t x = begin; x < end;) {
    if (c.save.design == GtpSaveDesign::gather) {
      parts.push_back(TensorValue::of_storage((std::uint64_t{1} << 32) + t, {saved.rows, c.save.cols}, c.save.dtype)
                          .row_view(x, end));
      break;
    }
    const std::int64_t src = x / saved.shard_rows, stop = std::min(end, (src + 1) * saved.shard_rows);
    const auto shard =
        TensorValue::of_storage(shard_storage(t, src, c.save.gtp), {saved.shard_rows, c.save.cols}, c.save.dtype);
    parts.push_back(shard.row_view(x - src * saved.shard_rows, stop - src * saved.shard_rows));
    x = stop;
  }
  parts.push_back(TensorValue::zeros({loaded.shard_rows - (end - begin), c.save.cols}, c.save.dtype));
  return TensorValue::concat_rows(parts);
}

Result<Checkpoint> save_gtp(Implementation& impl, const GtpCase& c, bool with_neighbours) {
  std::vector<StateNode> trees;
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      IH_TRY_ASSIGN(params, rank_params(c, t, g));
      trees.push_back(gtp_rank_tree(seam_factory(impl, c.design, params), t * c.gtp + g, with_neighbours));
    }
  return save_checkpoint(trees);
}

Verdict cross_gtp_load(Implementation& impl, const GtpCrossCase& c) {
  IH_VERDICT_ASSIGN(checkpoint, save_gtp(impl, c.save, false));
  GtpCase load = c.save;
  load.gtp = c.load_gtp, load.pad_alignment = c.load_pad_alignment, load.design = GtpSaveDesign::shard_split;
  IH_VERDICT_ASSIGN(saved, padding_of(c.save));
  IH_VERDICT_ASSIGN(loaded_pad, padding_of(load));
  for (std::int64_t t = 0; t < load.tp; ++t)
    for (std::int64_t g = 0; g < load.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(load, t, g));
      params.shard =
          TensorValue::of_storage((std::uint64_t{1} << 48) + t * load.gtp + g, params.shard->shape, load.dtype);
      const StateNode request(StateDict{{std::string("w"), StateNode(seam_factory(impl, load.design, params))}});
      IH_VERDICT_ASSIGN(result, impl.load_state(checkpoint, request, LoadOrder::serialization_load));
      const auto* got = result.find(std::string("w")) ? result.find(std::string("w"))->leaf_if<TensorValue>() : nullptr;
      IH_VERDICT_ASSIGN(want, expected_rows(c, saved, loaded_pad, t, g));
      if (!got || got->shape != want.shape || got->dtype != want.dtype || canonical(*got) != canonical(want))
        return "load rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ") got " +
               (got ? show_tensor(*got) : std::string("no tensor")) + ", expected " + show_tensor(want);
    }
  return "";
}

Verdict load_orders_agree(Implementation& impl, const GtpCase& c) {
  IH_VERDICT_ASSIGN(checkpoint, save_gtp(impl, c, true));
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(c, t, g));
      const StateNode request = gtp_rank_tree(seam_factory(impl, c.design, params), t * c.gtp + g, true);
      IH_VERDICT_ASSIGN(load, impl.load_state(checkpoint, request, LoadOrder::serialization_load));
      auto fixed = impl.load_state(checkpoint, request, LoadOrder::to_state_dict_fixed);
      if (!fixed.ok() || *fixed != load)
        return typed_verdict(fixed.ok() ? "to_state_dict_differs" : "to_state_dict_failed",
                             "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + "): to_state_dict " +
                                 (fixed.ok() ? std::string("gives another tree") : "fails: " + fixed.error().message) +
                                 " than serialization.load");
    }
  return "";
}

}  // namespace

std::vector<Property> load_properties() {
  GtpCase review{"gdp", {10, 3, 2, 3}, 2, 2, 16, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase pr{"gdp", {10'240, 5'120, 80, 3}, 1, 64, 32, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase tiny{"gdp", {1, 1, 1, 1}, 1, 8, 16, 2, "float32", GtpSaveDesign::shard_split, 0};
  const WorldGen<GtpCase> split_config = [](const WorldCapacity& capacity) {
    return genGtpConfig(GtpSaveDesign::shard_split, capacity);
  };
  GtpCase gather = review;
  gather.design = GtpSaveDesign::gather;
  return {
      make_world_property<GtpCrossCase>(
          "gtp_cross_load", "load",
          "save at GTP G1 (either design), load at G2: real rows exact, pad rows zero (4.7.6)", genGtpCross,
          cross_gtp_load,
          {{"review_g2_to_g1", GtpCrossCase{review, 1, 0}},
           {"gather_g2_to_g4", GtpCrossCase{gather, 4, 32}},
           {"pr_g64_to_g8", GtpCrossCase{pr, 8, 16}}}),
      make_world_property<GtpCase>(
          "load_orders_agree", "load",
          "to_state_dict (fixed order) and serialization.load give identical trees (3.8, 6.11)", split_config,
          load_orders_agree, {{"all_padding_rank", tiny}, {"pr_rank63_all_padding", pr}}),
      gpt_to_hybrid_load_property(),
  };
}

}  // namespace ih::props
