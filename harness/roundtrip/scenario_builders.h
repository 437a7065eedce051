// The builders of the scenario table (scenario_table.cc), one per row, and what they share: each lays out its
// scenario on the two world sizes. A builder is handed the scenario with its row's name, kind, load path and
// description and the worlds' small model already set; it sets the layouts, the flags and (kinds real_*) the
// two real models, or says why the sizes cannot hold the scenario (unsupported).
#pragma once

#include <cstdint>
#include <string>

#include "harness/roundtrip/world_scenario.h"
#include "models/result.h"

namespace ih {

/// The ranks of the two worlds of a round trip.
struct WorldSizes {
  std::int64_t save = 1, load = 1;
};

/// Lays out a row's scenario on `sizes` (see the file comment).
using ScenarioBuilder = Result<WorldScenario> (*)(WorldScenario s, WorldSizes sizes);

/// Small dimensions (hidden 64, 8 heads and query groups, 4 experts' FFN 64) that divide by TP up to
/// 8, so a round trip takes seconds.
ModelConfig small_world_config();

/// unsupported: scenario `name` cannot be laid out on `sizes`, because `why`.
Error cannot_lay_out(const std::string& name, WorldSizes sizes, const std::string& why);

/// Whether n is a world size of the small model (1, 2, 4 or 8).
bool power_of_two_upto8(std::int64_t n);

/// A real model of the worlds' small dimensions at TP x PP (the layout's other sizes 1).
ModelDumpSpec real_model(ModelKind model, std::string pattern, std::int64_t tp, std::int64_t pp);

/// Fills in the scenario's layouts from its real models (for the plan's text and the world sizes) and
/// checks both models: a configuration the reference refuses is not laid out.
Result<WorldScenario> with_real_models(WorldScenario s, const ModelDumpSpec& save, const ModelDumpSpec& load);

namespace builders {

// GPT -> hybrid on the reference's synthetic state dicts (kind gpt_hybrid).
Result<WorldScenario> gpt_hybrid_tp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gpt_hybrid_tp_pp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gpt_hybrid_pp_tp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gpt_hybrid_moe_ep(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> dp_replicas(WorldScenario s, WorldSizes sizes);

// The GDP in_proj under GTP (kind gdp_gtp).
Result<WorldScenario> gdp_in_proj_gtp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gdp_in_proj_gtp_repad(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gdp_in_proj_gtp_local(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gdp_in_proj_shard_split(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gdp_in_proj_gather_to_shard_split(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> gdp_in_proj_shard_split_to_gather(WorldScenario s, WorldSizes sizes);

// Megatron's own models (kinds real_*).
Result<WorldScenario> real_gpt_hybrid_tp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_swiglu_tied(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_pp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_moe(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_moe_fp32_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_moe_distributed_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_distributed_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_training(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_training_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_training_pp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_gtp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_gtp_swiglu(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_gtp_p32(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_tp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gdp_tp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_optimizer(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gtp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gdp_gtp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gtp_dp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gdp_gtp_dp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_dp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_cp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_gpt_hybrid_cp(WorldScenario s, WorldSizes sizes);
Result<WorldScenario> real_hybrid_hybrid_gtp_tp2(WorldScenario s, WorldSizes sizes);

}  // namespace builders
}  // namespace ih
