// Runs world-size round trips (docs/roundtrip.md, "Worlds"): writes the C++ plan of every scenario,
// launches the save world and then the load world with Open MPI's mpirun (each rank a Megatron
// worker, harness/megatron/adapter/roundtrip_world.py), builds the LibTorch verifier on first use
// and checks every loaded element with it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/roundtrip/world_plan.h"

namespace ih {

struct WorldRunOptions {
  std::string device = "cpu";         // cpu (gloo) or cuda (NCCL)
  std::optional<std::string> mutant;  // applied in the load world's Megatron
  std::optional<std::string> fault;   // kill_save:R, hang_load:R (workers) or truncate (harness)
  std::string python;                 // the venv python
  std::optional<std::string> megatron_path;
  std::int64_t world_timeout_s = 300;  // per world (save, load) and for the verifier
  std::filesystem::path work;          // plan, checkpoints, loaded files
  bool no_cpu_patches = false;
  std::function<void(const std::string&)> progress = [](const std::string&) {};
};

struct ScenarioOutcome {
  std::string name, description, save_layout, load_layout, device;
  std::int64_t save_ranks = 0, load_ranks = 0;
  bool ok = false;
  std::int64_t elements_verified = 0, wrong_elements = 0, peak_bytes_per_rank = 0;
  double save_seconds = 0, load_seconds = 0;
  nlohmann::ordered_json details = nlohmann::ordered_json::object();  // verifier, memory, throughput
  std::vector<std::string> problems;                                  // named wrong elements, errors
};

struct WorldRunReport {
  std::vector<ScenarioOutcome> scenarios;
  std::vector<std::string> not_run;  // "name: reason" (never passed)
  bool timed_out = false;            // a world or the verifier hit its timeout
  bool harness_fault = false;        // a worker failed outside Megatron, a file was unreadable, ...
  std::vector<std::string> faults;   // what went wrong outside the checks
  int exit_code() const;             // 0 pass, 1 a scenario failed, 3 harness fault, 4 timeout
};

/// The verifier executable, built on first use under a lock (cmake --build <build dir> --target
/// ih_roundtrip_verifier); an error says why it cannot be (no venv torch: "not run").
Result<std::filesystem::path> ensure_roundtrip_verifier(const std::function<void(const std::string&)>& progress);

Result<WorldRunReport> run_world_roundtrips(const std::vector<WorldScenario>& scenarios,
                                            const WorldRunOptions& options);

}  // namespace ih
