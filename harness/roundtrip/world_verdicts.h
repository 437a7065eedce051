// What a round trip's worlds did to one scenario, read off what their ranks reported (world_launch.h): whether
// the save world saved it completely, whether the load ranks loaded (or at least dumped) it, the measurements of
// both worlds, and each failure's outcome and problem line.
#pragma once

#include <cstdint>
#include <string>

#include "harness/roundtrip/world_launch.h"

namespace ih {

/// A scenario's outcome before anything ran: which scenario, its layouts and world sizes.
ScenarioOutcome outcome_before_running(const WorldScenario& s);

/// Whether every save rank saved scenario `name` (a rank records ok only after the barrier that follows the
/// save: all ranks ok means every rank's files and the metadata were written); if not, `r` says why (ranks that
/// died, the first worker error, the world's timeout or exit) and that the checkpoint is never loaded.
bool judge_save(const std::string& name, const WorldOutcome& save, const WorldRunOptions& o, ScenarioOutcome& r);

/// The measurements of scenario `name` in both worlds: seconds, memory, throughput, the peak bytes per rank
/// (RSS, or on CUDA the allocator's reserved bytes).
void record_measurements(const std::string& name, const WorldOutcome& save, const WorldOutcome& load, Device device,
                         ScenarioOutcome& r);

/// What the load world left to verify of a scenario.
enum class LoadVerdict {
  nothing,             // a rank did not load it (r says why): nothing half-loaded is verified
  loaded,              // every rank loaded it
  refused_after_dump,  // every rank dumped what Megatron loaded, then Megatron refused it (a finding either way)
};
LoadVerdict judge_load(const std::string& name, const WorldOutcome& load, ScenarioOutcome& r);

}  // namespace ih
