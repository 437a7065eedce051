// The reference's sharded state dict of one rank of a whole model (`interop-harness model dump`,
// docs/cli.md): a GPTModel or HybridModel configuration and a parallel layout, the global rank
// decomposed the way Megatron's parallel_state orders ranks, the synthetic state dict of that rank.
#pragma once

#include <cstdint>
#include <string>

#include "models/synthetic_model.h"

namespace ih {

enum class ModelKind { gpt, hybrid };

/// Which of Megatron's optimizers `--optimizer` dumps: the DistributedOptimizer (fully_reshardable),
/// Float16OptimizerWithFloat16Params over Adam (bf16 parameters, fp32 main copies), the path GTP uses, or
/// FP32Optimizer over Adam (training without --bf16/--fp16 and without a distributed optimizer: the
/// parameters are the main copies, so only Adam's moments; the real round trips' optimizer, since it
/// takes the float64 parameters the oracle needs).
enum class OptimizerKind { distributed, float16, fp32 };
/// "distributed", "float16" or "fp32": the adapter's optimizer_kind and the CLI's --optimizer-kind.
const char* to_string(OptimizerKind kind);

/// One `model dump` configuration: the model, its dimensions and the layout's sizes (ranks unset).
struct ModelDumpSpec {
  ModelKind model = ModelKind::gpt;
  std::string pattern = "M*-M*-";  // hybrid only
  std::int64_t layers = 2;         // gpt only: transformer layers (attention + MLP each)
  /// The snapshot saves a GDP in_proj under GTP by gathering it (spec 4.5, the baseline design), and
  /// GTP-wraps every parallel linear.
  ModelConfig config = {.gdp_design = GtpSaveDesign::gather, .gtp_linears = true};
  RankLayout sizes;                                           // tp, pp, ep, etp, gtp sizes
  bool optimizer = false;                                     // the optimizer's states too
  OptimizerKind optimizer_kind = OptimizerKind::distributed;  // which optimizer (with `optimizer`)
};

/// Data-parallel size of the layout: the least multiple of `sizes.dp` that lets EP x ETP tile TP x DP (Megatron
/// requires tp x dp to be a multiple of ep x etp).
std::int64_t data_parallel_size(const RankLayout& sizes);
/// Ranks of the world: gtp x tp x cp x dp x pp.
std::int64_t world_size(const RankLayout& sizes);
/// The coordinates of global `rank` in Megatron's order: rank = t + T*(g + G*(c + C*(d + D*p))) (its default
/// tp-cp-ep-dp-pp with the GTP axis injected after tp, `_inject_gtp_remat_axis`); dp_rank is the DP x CP rank
/// c + C*d, the one dense replica ids take (the CP ranks hold the same parameters). Within a
/// pipeline stage, the expert grid orders etp, ep, then expert-dp over the same ranks (Megatron's
/// expert order; its expert GTP size is 1 here).
Result<RankLayout> rank_layout(const RankLayout& sizes, std::int64_t rank);

/// Checks the whole configuration: dimensions divisible by the layout, a valid pattern, layers
/// divisible by pp, a rank inside the world. invalid_argument names the first problem.
Status validate_model_dump(const ModelDumpSpec& spec, std::int64_t rank);

/// The reference's flat state dict of `rank` (model entries, then the optimizer's when asked).
Result<StateDict> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank);

}  // namespace ih
