// A real save/load round trip through Megatron's dist_checkpointing (docs/roundtrip.md): the C++
// side writes, per rank, the GPT sharded state dict at the save layout and the hybrid one at the
// load layout (factories travel as recipes), then runs harness/megatron/adapter/roundtrip.py,
// which saves with real CPU data, loads into the retargeted hybrid dict and checks every element.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "models/result.h"
#include "models/synthetic_model.h"

namespace ih {

struct RoundtripScenario {
  std::string pattern = "M*-M*-";
  std::int64_t save_tp = 2, save_pp = 1;  // the GPT run that saves
  std::int64_t load_tp = 1, load_pp = 1;  // the hybrid run that loads
  bool gated = false;                     // SwiGLU fc1: a ShardedTensorFactory on both sides
  bool optimizer = false;                 // model-space distributed-optimizer entries (exp_avg, ...)
  ModelConfig config = small_config();

  /// Small dimensions (hidden 64) that divide by TP up to 8, so a round trip takes seconds.
  static ModelConfig small_config();
  std::int64_t save_ranks() const { return save_tp * save_pp; }
  std::int64_t load_ranks() const { return load_tp * load_pp; }
};

/// Checks the scenario (pattern has GPT layer maps, the layer count divides by save_pp, TP sizes
/// divide the dimensions) and writes into `dir`: plan.json, save_rank_<r>.json, load_rank_<r>.json
/// (rank r = pp_rank * tp + tp_rank). Returns the GPT layer count.
Result<std::int64_t> write_roundtrip_inputs(const RoundtripScenario& scenario, const std::filesystem::path& dir);

}  // namespace ih
