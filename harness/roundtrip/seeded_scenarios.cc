#include "harness/roundtrip/seeded_scenarios.h"

#include <functional>
#include <random>
#include <vector>

#include "harness/roundtrip/scenario_builders.h"
#include "models/gpt_layer_maps.h"
#include "properties/world_draw.h"

namespace ih {
namespace {

/// The pattern of a real hybrid model drawn for `gpt_layers` GPT layers: an attention + MLP pair per layer with
/// Mamba layers between, split by pipes into `load_pp` stages that each hold at least one layer.
std::string drawn_real_pattern(std::int64_t gpt_layers, std::int64_t load_pp,
                               const std::function<std::int64_t(std::int64_t)>& pick) {
  std::vector<std::string> units;
  for (std::int64_t i = 0; i < gpt_layers; ++i) {
    if (pick(2) == 0) units.push_back("M");
    units.push_back("*-");
  }
  if (pick(2) == 0) units.push_back("M");
  if (load_pp == 2 && units.size() < 2) units.push_back("M");
  std::string pattern;
  const std::size_t cut =
      load_pp == 2 ? 1 + static_cast<std::size_t>(pick(static_cast<std::int64_t>(units.size()) - 1)) : units.size();
  for (std::size_t i = 0; i < units.size(); ++i) pattern += (i == cut ? "|" : "") + units[i];
  return pattern;
}

}  // namespace

Result<WorldScenario> seeded_real_world_scenario(std::uint64_t seed, std::int64_t a, std::int64_t b) {
  if (!power_of_two_upto8(a) || !power_of_two_upto8(b))
    return make_error(ErrorKind::invalid_argument, "save and load ranks must be 1, 2, 4 or 8");
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  const std::int64_t save_pp = a >= 2 && pick(3) == 0 ? 2 : 1, load_pp = b >= 2 && pick(3) == 0 ? 2 : 1;
  const std::int64_t gpt_layers = save_pp * (1 + pick(2));
  const std::string pattern = drawn_real_pattern(gpt_layers, load_pp, pick);
  ModelDumpSpec save = real_model(ModelKind::gpt, "", a / save_pp, save_pp),
                load = real_model(ModelKind::hybrid, pattern, b / load_pp, load_pp);
  save.layers = gpt_layers;
  const bool gated = pick(2) == 0, tied = pick(2) == 0, layer_norm = pick(3) == 0;
  for (ModelDumpSpec* m : {&save, &load})
    m->config.gated_mlp = gated, m->config.tied_embeddings = tied, m->config.layer_norm = layer_norm;
  WorldScenario s;
  s.name = "real_seed_" + std::to_string(seed);
  s.kind = ScenarioKind::real_gpt_hybrid;
  s.config = small_world_config();
  s.description = "drawn from seed " + std::to_string(seed) + ": Megatron's GPTModel (" + std::to_string(gpt_layers) +
                  " layers) -> HybridModel " + pattern + (gated ? ", SwiGLU" : "") + (tied ? ", tied" : "") +
                  (layer_norm ? ", LayerNorm" : ", RMSNorm");
  return with_real_models(s, save, load);
}

Result<WorldScenario> custom_world_scenario(const std::string& pattern, const WorldLayout& save,
                                            const WorldLayout& load, bool gated, bool optimizer) {
  auto maps = gpt_compatible_layer_maps(pattern);
  if (!maps.ok()) return maps.error().with_context("pattern '" + pattern + "'");
  for (const WorldLayout* w : {&save, &load})
    if (w->tp < 1 || w->pp < 1 || w->ep != 1 || w->dp != 1)
      return make_error(ErrorKind::invalid_argument, "TP and PP sizes must be at least 1 (no EP or DP here)");
  if (maps->num_gpt_layers % save.pp != 0)
    return make_error(ErrorKind::invalid_argument, "the GPT model has " + std::to_string(maps->num_gpt_layers) +
                                                       " layers, not divisible by --save-pp " +
                                                       std::to_string(save.pp));
  WorldScenario s;
  s.name = kCustomScenarioName;
  s.config = small_world_config();
  s.pattern = pattern;
  s.gated = gated, s.optimizer = optimizer;
  s.save = save, s.load = load;
  s.description = "GPT -> hybrid " + pattern + " from the command line" + (gated ? ", SwiGLU" : "") +
                  (optimizer ? ", optimizer states" : "");
  return s;
}

Result<WorldScenario> seeded_world_scenario(std::uint64_t seed, std::int64_t a, std::int64_t b) {
  IH_TRY_ASSIGN(drawn, props::draw_world_load_case(seed, a, b));
  WorldScenario s;
  s.name = "seed_" + std::to_string(seed);
  s.config = small_world_config();
  s.pattern = drawn.pattern;
  if (drawn.num_experts > 0) s.config.num_experts = drawn.num_experts;
  s.gated = drawn.gated;
  s.optimizer = drawn.optimizer;
  const auto layout = [](const props::WorldSplit& w) { return WorldLayout{w.tp, w.pp, w.ep, w.dp}; };
  s.save = layout(drawn.save);
  s.load = layout(drawn.load);
  s.description = "drawn from seed " + std::to_string(seed) + " by the property generators: pattern " + s.pattern +
                  (s.gated ? ", SwiGLU" : "") + (s.optimizer ? ", optimizer states" : "") +
                  (drawn.num_experts > 0 ? ", " + std::to_string(drawn.num_experts) + " experts" : "");
  return s;
}

}  // namespace ih
