// The round-trip scenarios outside the table: drawn from a seed (`roundtrip --seed S`, `--real --seed S`) or
// laid out on the command line (`roundtrip --target megatron --pattern P --save-tp ...`).
#pragma once

#include <cstdint>
#include <string>

#include "harness/roundtrip/world_scenario.h"

namespace ih {

/// The name of the scenario the command line lays out (custom_world_scenario).
inline constexpr const char* kCustomScenarioName = "gpt_hybrid_custom";
/// The scenario of `roundtrip --target megatron [--pattern P] [--save-tp ...]`: a GPT model saved at
/// `save` (TP x PP), the hybrid `pattern` retargeted and loaded at `load`. invalid_argument when the
/// pattern has no GPT layer maps or its GPT layers do not split over save.pp.
Result<WorldScenario> custom_world_scenario(const std::string& pattern, const WorldLayout& save,
                                            const WorldLayout& load, bool gated, bool optimizer);
/// A scenario drawn from `seed`: pattern, flags and factorizations of both worlds into TP x PP x EP
/// x DP, reproducible from the seed alone.
Result<WorldScenario> seeded_world_scenario(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks);

/// A real model scenario drawn from `seed` (`roundtrip --real --seed S`): pattern, gated/tied/norm and both
/// worlds' TP x PP x DP, reproducible from the seed alone.
Result<WorldScenario> seeded_real_world_scenario(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks);

}  // namespace ih
