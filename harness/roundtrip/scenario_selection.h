// Which scenarios one `roundtrip` command runs: one named scenario, every scenario `--all` runs at the world sizes
// (the real ones with --real, the shard-split ones with --candidate shard-split), or one drawn from a seed.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "harness/megatron/candidates.h"
#include "harness/roundtrip/scenario_table.h"

namespace ih {

/// What a command asks to run, its words parsed.
struct ScenarioRequest {
  enum class Mode { named, all, seed };
  Mode mode = Mode::all;
  std::string name;        // Mode::named
  std::uint64_t seed = 0;  // Mode::seed
  bool real = false;       // Megatron's own models (`--real`)
  Candidate candidate = Candidate::none;
  WorldSizes sizes;
};

/// The scenarios a request runs, and the `--all` ones it does not (printed "NOT RUN <name>: <why>").
struct ScenarioSelection {
  std::vector<WorldScenario> scenarios;
  std::vector<std::string> not_run;  // "name: why"
};

/// The scenarios of `request`, laid out on its sizes (possibly none: no `--all` scenario fits them). Errors: a
/// named scenario of the other family (real or not), unknown, or that cannot be laid out; a shard-split one
/// without the candidate (unsupported); bad sizes or a seed that draws nothing (invalid_argument).
Result<ScenarioSelection> select_scenarios(const ScenarioRequest& request);

}  // namespace ih
