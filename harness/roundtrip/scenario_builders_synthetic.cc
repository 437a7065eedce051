// The builders of the scenarios on the reference's synthetic state dicts (kind gpt_hybrid) and of the GDP
// in_proj under GTP (kind gdp_gtp), and what every builder shares.
#include <algorithm>

#include "harness/roundtrip/scenario_builders.h"
#include "seam/error_kinds.h"

namespace ih {

ModelConfig small_world_config() {
  ModelConfig c;
  c.hidden = 64;
  c.num_attention_heads = 8;
  c.num_query_groups = 8;
  c.kv_channels = 8;
  c.ffn_hidden = 128;
  c.moe_ffn_hidden = 64;
  c.add_bias = true;
  c.vocab = 256;
  c.mamba_heads = 8;
  c.mamba_head_dim = 8;
  c.mamba_groups = 8;
  c.mamba_state = 8;
  return c;
}

Error cannot_lay_out(const std::string& name, WorldSizes sizes, const std::string& why) {
  return Error{seam_kind::unsupported, "scenario '" + name + "' cannot be laid out on " + std::to_string(sizes.save) +
                                           " save / " + std::to_string(sizes.load) + " load ranks: " + why};
}

bool power_of_two_upto8(std::int64_t n) { return n == 1 || n == 2 || n == 4 || n == 8; }

namespace {

/// The GDP in_proj's GTP world of n ranks at pad alignment p: 1 or 2 ranks are all GTP; 4 ranks are
/// TP 2 x GTP 2, or GTP 4 when `all_gtp` (the repadding scenarios: three all-padding ranks).
Result<GtpWorld> gdp_gtp_world(const std::string& name, WorldSizes sizes, std::int64_t n, std::int64_t p, bool all_gtp,
                               GtpSaveDesign design) {
  if (n == 1) return GtpWorld{1, 1, p, design};
  if (n == 2) return GtpWorld{1, 2, p, design};
  if (n == 4) return all_gtp ? GtpWorld{1, 4, p, design} : GtpWorld{2, 2, p, design};
  return cannot_lay_out(name, sizes, "GTP worlds of 1, 2 or 4 ranks (TP <= 2 for 2 heads)");
}

/// How each side of a GDP in_proj scenario saves (and loads), and at which pad alignment.
struct GtpSides {
  GtpSaveDesign save_design = GtpSaveDesign::gather, load_design = GtpSaveDesign::gather;
  std::int64_t save_pad = 16, load_pad = 16;
  bool all_gtp = false;  // 4 ranks are GTP 4 (three all-padding ranks), not TP 2 x GTP 2
};

// d_inner 8, ngroups x d_state 4, 2 heads, one Householder: D = 28 / T TP-local rows; with p = 16 and G = 2
// the aligned block is 32 rows, so at T = 2 (D = 14 < p x G) GTP rank 1 holds only padding, at T = 1 (D = 28)
// its shard ends in 4 pad rows.
Result<WorldScenario> gdp_in_proj(WorldScenario s, WorldSizes sizes, const GtpSides& sides) {
  IH_TRY_ASSIGN(sw, gdp_gtp_world(s.name, sizes, sizes.save, sides.save_pad, sides.all_gtp, sides.save_design));
  IH_TRY_ASSIGN(lw, gdp_gtp_world(s.name, sizes, sizes.load, sides.load_pad, sides.all_gtp, sides.load_design));
  s.gtp_save = sw, s.gtp_load = lw;
  s.save.tp = sw.ranks(), s.load.tp = lw.ranks();  // world sizes (rank = t * G + g)
  return s;
}

}  // namespace

namespace builders {

Result<WorldScenario> gpt_hybrid_tp(WorldScenario s, WorldSizes sizes) {
  s.gated = s.optimizer = true;
  s.save.tp = sizes.save, s.load.tp = sizes.load;
  return s;
}

Result<WorldScenario> gpt_hybrid_tp_pp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2) return cannot_lay_out(s.name, sizes, "the save world needs PP=2");
  s.pattern = "M*-M*-M*-M*-";
  s.optimizer = true;
  s.save.tp = sizes.save / 2, s.save.pp = 2, s.load.tp = sizes.load;
  return s;
}

Result<WorldScenario> gpt_hybrid_pp_tp(WorldScenario s, WorldSizes sizes) {
  if (sizes.load < 2) return cannot_lay_out(s.name, sizes, "the load world needs PP=2");
  s.pattern = "M*-M*-M*-M*-";
  s.gated = true;
  s.save.tp = sizes.save, s.load.tp = sizes.load / 2, s.load.pp = 2;
  return s;
}

Result<WorldScenario> gpt_hybrid_moe_ep(WorldScenario s, WorldSizes sizes) {
  s.pattern = "M*EM*E";
  s.config.num_experts = 4;
  s.optimizer = true;
  const std::int64_t save_ep = std::min<std::int64_t>(sizes.save, 4), load_ep = std::min<std::int64_t>(sizes.load, 4);
  s.save.ep = save_ep, s.save.tp = sizes.save / save_ep, s.load.ep = load_ep, s.load.tp = sizes.load / load_ep;
  return s;
}

Result<WorldScenario> dp_replicas(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need DP=2");
  s.optimizer = true;
  s.save.dp = 2, s.save.tp = sizes.save / 2, s.load.dp = 2, s.load.tp = sizes.load / 2;
  return s;
}

Result<WorldScenario> gdp_in_proj_gtp(WorldScenario s, WorldSizes sizes) {
  return gdp_in_proj(std::move(s), sizes, {});
}

// Saved at p = 16 and loaded at p = 32 with all ranks in GTP (4 ranks: G = 4, 3 all-padding).
Result<WorldScenario> gdp_in_proj_gtp_repad(WorldScenario s, WorldSizes sizes) {
  return gdp_in_proj(std::move(s), sizes, {.load_pad = 32, .all_gtp = true});
}

// The other load ordering: a local checkpoint (MCoreTensorAwareStateDict) reloaded through
// to_state_dict, which reads back only the layout it saved (Megatron asserts otherwise).
Result<WorldScenario> gdp_in_proj_gtp_local(WorldScenario s, WorldSizes sizes) {
  s.load_order = LoadOrder::to_state_dict_baseline;
  if (sizes.save != sizes.load)
    return cannot_lay_out(s.name, sizes, "a local checkpoint reloads only the layout it saved (A = B)");
  if (sizes.save == 1) return cannot_lay_out(s.name, sizes, "GTP needs 2 or 4 ranks");
  if (sizes.save > 4) return cannot_lay_out(s.name, sizes, "GTP worlds of 2 or 4 ranks (TP <= 2 for 2 heads)");
  s.gtp_save = s.gtp_load = sizes.save == 2 ? GtpWorld{1, 2, 16} : GtpWorld{2, 2, 16};
  s.save.tp = s.load.tp = sizes.save;
  return s;
}

// The shard-split design (spec 4.7) on the same in_proj: saved and loaded across a GTP x TP change (rows < p x
// G: all-padding GTP ranks keep only a placeholder), and cross-loads with the gather design in both directions,
// the gather -> shard-split one also across a padding change (p 16 -> 32).
Result<WorldScenario> gdp_in_proj_shard_split(WorldScenario s, WorldSizes sizes) {
  return gdp_in_proj(std::move(s), sizes,
                     {.save_design = GtpSaveDesign::shard_split, .load_design = GtpSaveDesign::shard_split});
}

Result<WorldScenario> gdp_in_proj_gather_to_shard_split(WorldScenario s, WorldSizes sizes) {
  return gdp_in_proj(std::move(s), sizes, {.load_design = GtpSaveDesign::shard_split, .load_pad = 32, .all_gtp = true});
}

Result<WorldScenario> gdp_in_proj_shard_split_to_gather(WorldScenario s, WorldSizes sizes) {
  return gdp_in_proj(std::move(s), sizes, {.save_design = GtpSaveDesign::shard_split});
}

}  // namespace builders
}  // namespace ih
