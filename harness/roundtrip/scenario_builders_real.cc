// The builders of the real-model scenarios (kinds real_*, `roundtrip --real`): Megatron's own GPTModel and
// HybridModel of the worlds' small dimensions, at layouts that fit the world sizes.
#include <algorithm>

#include "harness/roundtrip/scenario_builders.h"

namespace ih {

ModelDumpSpec real_model(ModelKind model, std::string pattern, std::int64_t tp, std::int64_t pp) {
  ModelDumpSpec m;
  m.model = model;
  m.pattern = std::move(pattern);
  m.config = small_world_config();
  m.config.gdp_design = ModelDumpSpec{}.config.gdp_design;  // what a Megatron model saves (the gather design)
  m.sizes.tp = tp, m.sizes.pp = pp, m.sizes.etp = tp;
  return m;
}

Result<WorldScenario> with_real_models(WorldScenario s, const ModelDumpSpec& save, const ModelDumpSpec& load) {
  s.real_save = save, s.real_load = load;
  s.pattern = load.pattern;
  s.gated = save.config.gated_mlp;
  s.optimizer = save.optimizer;
  // The world of a real model is GTP x TP x CP x DP x PP (EP and ETP tile the same ranks); the layout shows
  // EP beside DP where it divides DP (then DP = EP x the expert grid's DP), so its rank count is the world's.
  const auto layout = [](const ModelDumpSpec& m) {
    const std::int64_t dp = data_parallel_size(m.sizes), ep = dp % m.sizes.ep == 0 ? m.sizes.ep : 1;
    return WorldLayout{m.sizes.tp, m.sizes.pp, ep, dp / ep, m.sizes.gtp, m.sizes.cp};
  };
  s.save = layout(save), s.load = layout(load);
  for (const ModelDumpSpec* m : {&save, &load})
    if (auto st = validate_model_dump(*m, 0); !st.ok()) return st.error().with_context("scenario '" + s.name + "'");
  return s;
}

namespace {

constexpr std::int64_t kGptLayers = 2;  // every GPTModel the scenarios save

/// The two real models of a scenario: what the save world builds and what the load world builds.
struct RealModels {
  ModelDumpSpec save, load;
};

/// Megatron's GPTModel (kGptLayers) at `save_tp` x `save_pp` and its HybridModel `pattern` at `load_tp` x `load_pp`.
RealModels gpt_to_hybrid(const std::string& pattern, std::int64_t save_tp, std::int64_t save_pp, std::int64_t load_tp,
                         std::int64_t load_pp) {
  RealModels m{real_model(ModelKind::gpt, "", save_tp, save_pp),
               real_model(ModelKind::hybrid, pattern, load_tp, load_pp)};
  m.save.layers = kGptLayers;
  return m;
}

/// Megatron's HybridModel M*-M*- saved at TP `save_tp` and loaded at TP `load_tp`.
RealModels hybrid_to_hybrid(std::int64_t save_tp, std::int64_t load_tp) {
  return {real_model(ModelKind::hybrid, "M*-M*-", save_tp, 1), real_model(ModelKind::hybrid, "M*-M*-", load_tp, 1)};
}

/// `m` with Megatron's optimizer of `kind`: the FP32Optimizer (the default) takes a round trip's float64
/// parameters; the DistributedOptimizer takes fp32 ones, whose oracle values the plan keeps below 2^24
/// (OracleDtype::float32). The Float16 optimizer's bf16 parameters cannot hold them.
RealModels with_optimizer(RealModels m, OptimizerKind kind = OptimizerKind::fp32) {
  for (ModelDumpSpec* side : {&m.save, &m.load}) side->optimizer = true, side->optimizer_kind = kind;
  return m;
}

/// Both models with SwiGLU, tied embeddings and LayerNorm.
RealModels swiglu_tied_layer_norm(RealModels m) {
  for (ModelDumpSpec* side : {&m.save, &m.load})
    side->config.gated_mlp = true, side->config.tied_embeddings = true, side->config.layer_norm = true;
  return m;
}

/// Both models with GatedDeltaProduct mixers at the pattern's M layers.
RealModels with_gdp_mixers(RealModels m) {
  m.save.config.ssm_mixer = m.load.config.ssm_mixer = std::string(mixer_word(GtpMixer::gdp));
  return m;
}

Result<WorldScenario> laid_out(WorldScenario s, const RealModels& m) {
  return with_real_models(std::move(s), m.save, m.load);
}

/// The MoE family: 4 experts at EP = min(save ranks, 4), ETP 1, into *E*E at TP = ETP = ranks / EP' (EP' =
/// min(load ranks, 4) / 2 or 1), without biases (Megatron: "Bias in Moe is only supported when ETP==1").
RealModels moe_models(WorldSizes sizes) {
  const std::int64_t save_ep = std::min<std::int64_t>(sizes.save, 4);
  const std::int64_t load_ep = std::max<std::int64_t>(1, std::min<std::int64_t>(sizes.load, 4) / 2);
  RealModels m = gpt_to_hybrid("*E*E", sizes.save / save_ep, 1, sizes.load / load_ep, 1);
  m.save.sizes.ep = save_ep, m.load.sizes.ep = load_ep;
  for (ModelDumpSpec* side : {&m.save, &m.load}) side->config.num_experts = 4, side->config.add_bias = false;
  return m;
}

/// The GPT -> hybrid *-*- family at TP 1, saved at GTP = save ranks and loaded at GTP = load ranks (pad alignment
/// `pad`, SwiGLU when `swiglu`): every linear GTP-wrapped, no Mamba layer (a fresh in_proj under GTP is finding B).
RealModels gpt_gtp_models(WorldSizes sizes, bool swiglu, std::int64_t pad) {
  RealModels m = gpt_to_hybrid("*-*-", 1, 1, 1, 1);
  m.save.sizes.gtp = sizes.save, m.load.sizes.gtp = sizes.load;
  m.save.config.gated_mlp = m.load.config.gated_mlp = swiglu;
  m.save.config.pad_alignment = m.load.config.pad_alignment = pad;
  return m;
}

/// The hybrid M*-M*- at TP 1 saved at GTP = save ranks and loaded at GTP = load ranks (p = 16).
RealModels hybrid_gtp_models(WorldSizes sizes) {
  RealModels m = hybrid_to_hybrid(1, 1);
  m.save.sizes.gtp = sizes.save, m.load.sizes.gtp = sizes.load;
  return m;
}

/// The hybrid M*-M*- at TP 1 x GTP 2 x DP = ranks / 2 on both sides (p = 16): each GTP shard has DP replicas,
/// of which exactly one is main (spec: one main replica per chunk).
RealModels hybrid_gtp_dp_models(WorldSizes sizes) {
  RealModels m = hybrid_to_hybrid(1, 1);
  m.save.sizes.gtp = m.load.sizes.gtp = 2;
  m.save.sizes.dp = sizes.save / 2, m.load.sizes.dp = sizes.load / 2;
  return m;
}

/// Both models at CP 2 x TP = ranks / 2.
RealModels at_context_parallel_2(RealModels m, WorldSizes sizes) {
  m.save.sizes.cp = m.load.sizes.cp = 2;
  m.save.sizes.tp = m.save.sizes.etp = sizes.save / 2, m.load.sizes.tp = m.load.sizes.etp = sizes.load / 2;
  return m;
}

}  // namespace

namespace builders {

Result<WorldScenario> real_gpt_hybrid_tp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), gpt_to_hybrid("M*-M*-", sizes.save, 1, sizes.load, 1));
}

Result<WorldScenario> real_gpt_hybrid_swiglu_tied(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), swiglu_tied_layer_norm(gpt_to_hybrid("*-M*-M", sizes.save, 1, sizes.load, 1)));
}

Result<WorldScenario> real_gpt_hybrid_pp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need PP=2");
  return laid_out(std::move(s), gpt_to_hybrid("M*-|M*-", sizes.save / 2, 2, sizes.load / 2, 2));
}

Result<WorldScenario> real_gpt_hybrid_moe(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), moe_models(sizes));
}

Result<WorldScenario> real_gpt_hybrid_moe_fp32_optimizer(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), with_optimizer(moe_models(sizes)));
}

// EP = min(ranks, 4) at TP 1, so DP = ranks: each DP rank holds a slice of the dense states. With their biases
// (ETP 1): 64-element tensors end buckets off the 128-element grid, so they are padded.
Result<WorldScenario> real_gpt_hybrid_moe_distributed_optimizer(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2)
    return cannot_lay_out(s.name, sizes, "both worlds need EP >= 2 (one optimizer chain shape)");
  RealModels m = with_optimizer(gpt_to_hybrid("*E*E", 1, 1, 1, 1), OptimizerKind::distributed);
  m.save.sizes.ep = std::min<std::int64_t>(sizes.save, 4), m.load.sizes.ep = std::min<std::int64_t>(sizes.load, 4);
  m.save.config.num_experts = m.load.config.num_experts = 4;
  return laid_out(std::move(s), m);
}

Result<WorldScenario> real_gpt_hybrid_optimizer(WorldScenario s, WorldSizes sizes) {
  RealModels m = with_optimizer(gpt_to_hybrid("M*-M*-", sizes.save, 1, sizes.load, 1));
  m.save.config.gated_mlp = m.load.config.gated_mlp = true;
  return laid_out(std::move(s), m);
}

Result<WorldScenario> real_gpt_hybrid_distributed_optimizer(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s),
                  with_optimizer(gpt_to_hybrid("M*-M*-", sizes.save, 1, sizes.load, 1), OptimizerKind::distributed));
}

Result<WorldScenario> real_gpt_hybrid_training(WorldScenario s, WorldSizes sizes) {
  s.saved_by_older_megatron = true;
  return laid_out(std::move(s), gpt_to_hybrid("*-M*-M", sizes.save, 1, sizes.load, 1));
}

Result<WorldScenario> real_gpt_hybrid_training_optimizer(WorldScenario s, WorldSizes sizes) {
  s.saved_by_older_megatron = true;
  return laid_out(std::move(s), with_optimizer(gpt_to_hybrid("*-M*-M", sizes.save, 1, sizes.load, 1)));
}

Result<WorldScenario> real_gpt_hybrid_training_pp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need PP=2");
  return laid_out(std::move(s), swiglu_tied_layer_norm(gpt_to_hybrid("*-M|*-M", sizes.save / 2, 2, sizes.load / 2, 2)));
}

Result<WorldScenario> real_gpt_hybrid_gtp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), gpt_gtp_models(sizes, false, 16));
}

// fc1's rows [W; V] are taken from the reference (finding S).
Result<WorldScenario> real_gpt_hybrid_gtp_swiglu(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), gpt_gtp_models(sizes, true, 16));
}

// The 64-row linears padded to 128 rows at GTP 4, planned from the reference.
Result<WorldScenario> real_gpt_hybrid_gtp_p32(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), gpt_gtp_models(sizes, false, 32));
}

Result<WorldScenario> real_hybrid_hybrid_tp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), hybrid_to_hybrid(sizes.save, sizes.load));
}

Result<WorldScenario> real_hybrid_hybrid_gdp_tp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), with_gdp_mixers(hybrid_to_hybrid(sizes.save, sizes.load)));
}

Result<WorldScenario> real_hybrid_hybrid_optimizer(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), with_optimizer(hybrid_to_hybrid(sizes.save, sizes.load)));
}

Result<WorldScenario> real_hybrid_hybrid_gtp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), hybrid_gtp_models(sizes));
}

Result<WorldScenario> real_hybrid_hybrid_gdp_gtp(WorldScenario s, WorldSizes sizes) {
  return laid_out(std::move(s), with_gdp_mixers(hybrid_gtp_models(sizes)));
}

Result<WorldScenario> real_hybrid_hybrid_gtp_dp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need GTP 2");
  return laid_out(std::move(s), hybrid_gtp_dp_models(sizes));
}

Result<WorldScenario> real_hybrid_hybrid_gdp_gtp_dp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need GTP 2");
  return laid_out(std::move(s), with_gdp_mixers(hybrid_gtp_dp_models(sizes)));
}

Result<WorldScenario> real_hybrid_hybrid_dp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need DP 2");
  RealModels m = hybrid_to_hybrid(sizes.save / 2, sizes.load / 2);
  m.save.sizes.dp = m.load.sizes.dp = 2;
  m.save.sizes.etp = m.save.sizes.tp, m.load.sizes.etp = m.load.sizes.tp;
  return laid_out(std::move(s), m);
}

// No attention layer: Megatron's local DotProductAttention refuses CP > 1 (TEDotProductAttention needs CUDA).
Result<WorldScenario> real_hybrid_hybrid_cp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need CP 2");
  RealModels m{real_model(ModelKind::hybrid, "M-M-", 1, 1), real_model(ModelKind::hybrid, "M-M-", 1, 1)};
  return laid_out(std::move(s), at_context_parallel_2(std::move(m), sizes));
}

// With attention: NOT RUN where the factory's local spec cannot build CP > 1 (the adapter says why).
Result<WorldScenario> real_gpt_hybrid_cp(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need CP 2");
  return laid_out(std::move(s), at_context_parallel_2(gpt_to_hybrid("M*-M*-", 1, 1, 1, 1), sizes));
}

// TP 2 x GTP = ranks / 2 at p = 32: the attention's linear_qkv (96 rows per TP rank) is padded to 128 under GTP 2.
Result<WorldScenario> real_hybrid_hybrid_gtp_tp2(WorldScenario s, WorldSizes sizes) {
  if (sizes.save < 2 || sizes.load < 2) return cannot_lay_out(s.name, sizes, "both worlds need TP 2");
  RealModels m = hybrid_to_hybrid(2, 2);
  m.save.sizes.gtp = sizes.save / 2, m.load.sizes.gtp = sizes.load / 2;
  m.save.config.pad_alignment = m.load.config.pad_alignment = 32;
  return laid_out(std::move(s), m);
}

}  // namespace builders
}  // namespace ih
