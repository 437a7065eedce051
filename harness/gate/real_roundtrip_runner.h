// What the gate's real tier asks of the command that owns the round-trip worlds (the gate cannot start worlds
// itself): a runner that saves and loads one real scenario in one direction, and what it saw. harness/targets
// makes the runner; gate_real_roundtrips.cc judges its results.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "seam/implementation.h"
#include "seam/outcome.h"

namespace ih::gate {

/// One real round trip as the command's runner saw it (its scenario outcome and verifier counts).
struct RealRoundTripResult {
  Outcome outcome = Outcome::failed;
  std::int64_t elements_verified = 0, wrong_elements = 0;
  std::int64_t stored_wrong = 0;      // stored elements not where the reference's layout puts them
  std::vector<std::string> problems;  // the named wrong elements and errors, first one first
  std::string refused_in;             // the Megatron function a refusal raised in (ScenarioOutcome::refused_in)
};
/// The real tier's check of `scenario` saved by `save_ranks` and loaded by `load_ranks`: its group and its name
/// (a world that runs several scenarios names each one's check, e.g. for coverage contexts).
inline constexpr const char* kRealRoundTripGroup = "real-roundtrips";
inline std::string real_roundtrip_check(const std::string& scenario, std::int64_t save_ranks, std::int64_t load_ranks) {
  return scenario + "_" + std::to_string(save_ranks) + "_to_" + std::to_string(load_ranks);
}
/// The cross-version check of the same scenario (a base is given): saved by BASE and loaded by NEW, or the reverse.
inline constexpr const char* kRealRoundTripCrossGroup = "real-roundtrip-cross";
inline std::string real_roundtrip_cross_check(bool base_to_new, const std::string& scenario, std::int64_t save_ranks,
                                              std::int64_t load_ranks) {
  return (base_to_new ? "base-to-new_" : "new-to-base_") + real_roundtrip_check(scenario, save_ranks, load_ranks);
}

/// Runs real scenario `scenario` saved by `save_ranks` and loaded by `load_ranks` with `target`'s
/// Megatron (or reads it from the batch it already ran); handed in by the command that owns the worlds.
using RealRoundTripRunner = std::function<Result<RealRoundTripResult>(
    Implementation& target, const std::string& scenario, std::int64_t save_ranks, std::int64_t load_ranks)>;

}  // namespace ih::gate
