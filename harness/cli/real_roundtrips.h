// The gate's real round trips (group real-roundtrips): the runner that starts the mpirun worlds for
// Megatron's own models, one batch per direction, and hands each scenario's outcome to its check.
#pragma once

#include <ostream>

#include "harness/gate/gate.h"
#include "harness/targets/targets.h"

namespace ih::cli {

/// The real scenarios the gate runs and the directions (save ranks, load ranks) it runs them in.
std::vector<std::string> gate_real_scenarios();
std::vector<std::pair<std::int64_t, std::int64_t>> gate_real_directions();

/// A runner for `spec`'s Megatron: the first scenario of a direction runs every gate scenario of it in one
/// pair of worlds (later ones read the batch). The plan's models are described by an unmutated adapter of the
/// same Megatron with a long reply limit (a mutant is Megatron's code in the load world only).
gate::RealRoundTripRunner real_roundtrip_runner(const TargetSpec& spec, std::ostream& progress);

}  // namespace ih::cli
