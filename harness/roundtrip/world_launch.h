// One world of a round trip (docs/roundtrip.md, "Worlds"): mpirun launches its ranks (each a Megatron worker,
// harness/megatron/adapter/roundtrip_world.py), and what each rank reported (its stage, its results per scenario)
// is read back from the work folder. A hung rank is named; no rank outlives its world.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "harness/roundtrip/world_run.h"

namespace ih {

/// What one rank of a world reported: its last stage (status/<phase>_rank_<r>.json) and its results.
struct RankState {
  bool has_status = false;
  nlohmann::ordered_json status;  // pid, stage, step, scenario, since
  bool has_result = false;
  nlohmann::ordered_json result;  // scenarios: [...], error
};

/// What each rank of the `phase` world under `work` reported so far (read while the world runs, or after it).
std::vector<RankState> read_rank_states(const std::filesystem::path& work, const std::string& phase,
                                        std::int64_t ranks);
/// Writes `value` to `path` whole (a temporary file renamed over it): a rank reading it sees the old or the new.
Status write_json_atomically(const std::filesystem::path& path, const nlohmann::ordered_json& value);

/// The rank's result of scenario `name`; nullptr when it recorded none.
const nlohmann::ordered_json* scenario_result(const RankState& rank, const std::string& name);
/// "rank 1 (pid 123): stage 'load: ...' (scenario x) for 42 s".
std::string describe_rank(std::int64_t r, const RankState& st);

/// `mpirun` and its own options for a world of `ranks` ranks on this machine, before the program: oversubscribed,
/// unbound, and Open MPI's session files under `session_folder`, a folder of this world's own. Two mpiruns started
/// together under one TMPDIR race to create the same ompi.<host>.<uid> folder and the loser stops in orte_init
/// ("A call to mkdir was unable to create the desired directory ... File exists", open-mpi/ompi#8510): seen on CI
/// when a round trip's save and load worlds start together.
std::vector<std::string> mpirun_launcher(std::int64_t ranks, const std::filesystem::path& session_folder);

/// How a world ended.
struct WorldOutcome {
  bool launched = false, timed_out = false, timed_out_starting = false;
  int exit_code = -1;
  double seconds = 0;
  std::string stderr_tail;
  std::vector<RankState> ranks;
  std::vector<std::string> hung;  // ranks named on a timeout
};

/// Launches the `phase` world ("save" or "load") of `ranks` ranks on the plan in `o.work` and waits for it (at
/// most `o.world_timeout_s`, Megatron's imports on their own clock); a world whose MASTER_PORT another process
/// took is started again on a new port.
Result<WorldOutcome> run_world(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o);
/// "load world timed out after 300 s", or the start-up's own timeout.
std::string timeout_text(const std::string& phase, const WorldOutcome& w, const WorldRunOptions& o);

}  // namespace ih
