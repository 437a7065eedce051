// The reference's sharded state dict of one rank of a whole model (`interop-harness model dump`,
// docs/cli.md): a GPTModel or HybridModel configuration and a parallel layout, the global rank
// decomposed the way Megatron's parallel_state orders ranks, the synthetic state dict of that rank.
#pragma once

#include <cstdint>
#include <string>

#include "models/synthetic_model.h"

namespace ih {

enum class ModelKind { gpt, hybrid };

/// One `model dump` configuration: the model, its dimensions and the layout's sizes (ranks unset).
struct ModelDumpSpec {
  ModelKind model = ModelKind::gpt;
  std::string pattern = "M*-M*-";  // hybrid only
  std::int64_t layers = 2;         // gpt only: transformer layers (attention + MLP each)
  ModelConfig config;
  RankLayout sizes;        // tp, pp, ep, etp, gtp sizes
  bool optimizer = false;  // the distributed optimizer's states too
};

/// Data-parallel size of the layout: the least that lets EP x ETP tile TP x DP (Megatron requires
/// tp x dp to be a multiple of ep x etp).
std::int64_t data_parallel_size(const RankLayout& sizes);
/// Ranks of the world: gtp x tp x dp x pp.
std::int64_t world_size(const RankLayout& sizes);
/// The coordinates of global `rank`: rank = g + G*(t + T*(d + D*p)) (GTP innermost, as in the
/// harness's GTP worlds; tp-dp-pp as Megatron's default order with CP 1). Within a pipeline stage,
/// the expert grid orders etp, ep, then expert-dp over the same ranks (Megatron's expert order).
Result<RankLayout> rank_layout(const RankLayout& sizes, std::int64_t rank);

/// Checks the whole configuration: dimensions divisible by the layout, a valid pattern, layers
/// divisible by pp, a rank inside the world. invalid_argument names the first problem.
Status validate_model_dump(const ModelDumpSpec& spec, std::int64_t rank);

/// The reference's flat state dict of `rank` (model entries, then the optimizer's when asked).
Result<StateDict> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank);

}  // namespace ih
