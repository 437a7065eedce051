// The LibTorch verifier (verifier/verify_main.cc) from the harness's side: built on first use, then run on each
// loaded scenario, its JSON line turned into the scenario's counts, problems and outcome.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>

#include "harness/roundtrip/world_run.h"

namespace ih {

/// The verifier executable, built on first use under a lock (cmake --build <build dir> --target
/// ih_roundtrip_verifier); an error says why it cannot be (no venv torch: "not run").
Result<std::filesystem::path> ensure_roundtrip_verifier(const std::function<void(const std::string&)>& progress);

/// Checks every element scenario `name`'s `load_ranks` loaded: `r` gets the verifier's details, its counts and
/// named wrong elements, and its outcome (passed only when something was verified, all of it right, and Megatron
/// did not refuse the load after it was dumped; harness_error when the verifier could not verify or broke;
/// timeout). An error only when the verifier could not be started.
Status verify_scenario(const std::filesystem::path& verifier, const std::string& name, std::int64_t load_ranks,
                       const WorldRunOptions& o, bool refused_after_dump, ScenarioOutcome& r);

}  // namespace ih
