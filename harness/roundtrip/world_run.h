// Runs world-size round trips (docs/roundtrip.md, "Worlds"): writes the C++ plan of every scenario,
// launches the save world and then the load world with Open MPI's mpirun (each rank a Megatron
// worker, harness/megatron/adapter/roundtrip_world.py; world_launch.h), builds the LibTorch verifier on
// first use and checks every loaded element with it (roundtrip_verifier.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/roundtrip/world_plan.h"
#include "seam/outcome.h"

namespace ih {

/// A fault a test injects (docs/roundtrip.md, "Faults"): a save rank that kills itself mid-save, a
/// load rank that stops answering (both done by the workers), or the harness truncating a
/// checkpoint file before the load world starts.
struct WorldFault {
  enum class Kind { kill_save, hang_load, truncate };
  Kind kind = Kind::truncate;
  std::int64_t rank = 0;                // kill_save, hang_load: the world rank
  std::optional<std::string> scenario;  // kill_save, hang_load: only in this scenario (else every one)
  /// The --fault word, as parse_world_fault reads it and the workers take it: kill_save:R[:SCENARIO],
  /// hang_load:R[:SCENARIO], truncate.
  std::string text() const;
};
/// "kill_save", "hang_load", "truncate" (the one name table).
std::string_view to_string(WorldFault::Kind kind);
/// Parses a --fault word; anything else is invalid_argument naming the word and the known forms.
Result<WorldFault> parse_world_fault(std::string_view text);

struct WorldRunOptions {
  Device device = Device::cpu;
  std::optional<std::string> mutant;  // applied in the load world's Megatron
  std::optional<WorldFault> fault;
  std::string python;  // the venv python
  std::optional<std::string> megatron_path;
  /// The load world's Megatron when it is not the save world's (a cross-version round trip: saved by one tree,
  /// loaded by another); nullopt: `megatron_path` for both.
  std::optional<std::string> load_megatron_path;
  std::int64_t world_timeout_s = 300;  // per world (save, load) and for the verifier
  std::filesystem::path work;          // plan, checkpoints, loaded files
  bool no_cpu_patches = false;
  /// "NAME=VALUE" exported to every rank beside the world's own (mpirun -x), e.g. the coverage collection's.
  std::vector<std::string> environment;
  /// Real-model scenarios (`--real`): the Megatron target's description of each rank's model.
  RealModelEntries real_entries;
  /// Real-model scenarios planned in their own worlds instead (world_handshake.h): both worlds start together, each
  /// rank describes the model it builds and waits for the scenario's plan; `real_entries` is unused. The pair of
  /// worlds then runs under one clock of twice `world_timeout_s` (each world waits for the other).
  bool plan_in_worlds = false;
  std::function<void(const std::string&)> progress = [](const std::string&) {};
};

struct ScenarioOutcome {
  std::string name, description, save_layout, load_layout;
  Device device = Device::cpu;
  std::int64_t save_ranks = 0, load_ranks = 0;
  /// passed: every element verified; failed: wrong elements, Megatron raised, a rank died, a damaged
  /// checkpoint, Megatron's description of a real model is not the reference's; not_run: Megatron cannot run here (a
  /// CUDA-type error); harness_error: a worker failed outside Megatron or nothing could be verified; timeout: its world
  /// or the verifier timed out.
  Outcome outcome = Outcome::failed;
  bool ok() const { return outcome == Outcome::passed; }
  std::int64_t elements_verified = 0, wrong_elements = 0, peak_bytes_per_rank = 0;
  std::int64_t stored_wrong = 0;  // stored elements not where the reference's layout puts them (a real scenario)
  double save_seconds = 0, load_seconds = 0;
  nlohmann::ordered_json details = nlohmann::ordered_json::object();  // verifier, memory, throughput
  std::vector<std::string> problems;                                  // named wrong elements, errors
  /// Where Megatron refused the scenario (a save or load that raised in Megatron's own code): the function of
  /// its deepest Megatron frame; empty otherwise.
  std::string refused_in;
};

struct WorldRunReport {
  std::vector<ScenarioOutcome> scenarios;
  std::vector<std::pair<std::string, std::string>> not_run;  // name, why (never passed)
  bool timed_out = false;                                    // a world or the verifier hit its timeout
  bool harness_fault = false;                                // mpirun could not start a world, ...
  std::vector<std::string> faults;                           // what went wrong outside the checks
  /// The run's outcomes: each scenario's, plus timeout and harness_error for the run-level faults.
  std::vector<Outcome> outcomes() const;
  /// The shared exit-code table (seam/outcome.h): harness error 3 before timeout 4 before a failed
  /// scenario 1; 5 when every scenario was not run; else 0.
  int exit_code() const { return exit_code_of(outcomes()); }
  /// Adds another run's scenarios, not-run scenarios and faults to this one's.
  void merge(WorldRunReport other);
};

/// Plans one scenario into its folder under `o.work` (write_world_scenario with `entries`) and says so in the
/// progress: nullopt, or the outcome it ends with when it cannot be planned (it then runs in no world): failed where
/// Megatron describes its real model otherwise than the reference lays it out, else a harness error.
std::optional<ScenarioOutcome> plan_world_scenario(const WorldScenario& s, const WorldRunOptions& o,
                                                   const RealModelEntries& entries);

/// Runs one pair of worlds on `scenarios` (all of the same world sizes): writes each one's plan, builds the
/// verifier on first use, launches the save world, then the load world on what was saved completely (again on the
/// scenarios a failing rank left unstarted), and verifies what every load rank loaded. A scenario that cannot be
/// planned runs in no world and has its own outcome: failed where Megatron describes its real model otherwise than
/// the reference lays it out (seam_kind::description_disagrees, the difference named), else a harness error; the
/// other scenarios still run to their own verdicts.
Result<WorldRunReport> run_world_roundtrips(const std::vector<WorldScenario>& scenarios,
                                            const WorldRunOptions& options);

}  // namespace ih
