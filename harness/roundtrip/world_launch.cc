#include "harness/roundtrip/world_launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/process/child_run.h"
#include "harness/process/work_folder.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

/// Megatron's imports get their own clock (StartupClock): the same allowance as the adapter's
/// start-up (docs/adapter-protocol.md), seen exceeded by 300 s worlds beside a gate on CI's 2 cores.
constexpr std::int64_t kWorldStartupAllowanceS = 420;

std::optional<Json> read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed.ok()) return std::nullopt;
  return std::move(parsed).value();
}

/// A port the kernel calls free now.
Result<int> probe_free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return make_error(seam_kind::harness_error, "socket() failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return make_error(seam_kind::harness_error, "cannot find a free port");
  }
  const int port = ntohs(addr.sin_port);
  close(fd);
  return port;
}

/// A free TCP port on 127.0.0.1 for torch.distributed's rendezvous (MASTER_PORT), never one this process handed out
/// before: the save and load worlds start together (world_handshake.h), and the kernel may give a port closed a
/// moment ago to the next probe, so two worlds' ranks would meet in one store.
Result<int> free_port() {
  static std::mutex handed_lock;
  static std::set<int> handed;
  for (int attempt = 0; attempt < 64; ++attempt) {
    IH_TRY_ASSIGN(port, probe_free_port());
    const std::lock_guard<std::mutex> hold(handed_lock);
    if (handed.insert(port).second) return port;
  }
  return make_error(seam_kind::harness_error, "cannot find a free port not handed out before");
}

/// Kills the rank processes a world left behind (by the pids they reported), never by name.
void kill_ranks(const std::vector<RankState>& ranks) {
  for (const RankState& st : ranks) {
    if (!st.has_status) continue;
    const auto pid = st.status.value("pid", std::int64_t{0});
    if (pid > 1 && pid != getpid()) kill(static_cast<pid_t>(pid), SIGKILL);
  }
}

/// True when rank 0 could not listen on MASTER_PORT: another process took the free port between
/// the harness's probe and the rank's bind. The world is started again on a new port.
bool port_taken(const WorldOutcome& w) {
  for (const RankState& st : w.ranks) {
    if (!st.has_result) continue;
    const std::string text = st.result.dump();
    if (text.find("EADDRINUSE") != std::string::npos || text.find("address already in use") != std::string::npos)
      return true;
  }
  return false;
}

/// The mpirun command line of one world on `port`, its Open MPI session files under `session_folder`.
std::vector<std::string> world_command(const std::string& phase, std::int64_t ranks, int port,
                                       const fs::path& session_folder, const WorldRunOptions& o) {
  const std::string script = std::string(IH_SOURCE_DIR_PATH) + "/harness/megatron/adapter/roundtrip_world.py";
  std::vector<std::string> cmd = mpirun_launcher(ranks, session_folder);
  cmd.insert(cmd.end(),
             {"-x", "MASTER_ADDR=127.0.0.1", "-x", "MASTER_PORT=" + std::to_string(port), "-x", "GLOO_SOCKET_IFNAME=lo",
              "-x", "OMP_NUM_THREADS=1", "-x", "PYTHONUNBUFFERED=1", "-x", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1",
              o.python, script, "--work", o.work.string(), "--phase", phase, "--timeout",
              // Twice the world's: the harness's own timeout must fire first, so a hung rank is
              // named as hung instead of its peer failing in a collective (seen under load).
              std::to_string(std::max<std::int64_t>(10, o.world_timeout_s * 2))});
  std::vector<std::string> exported;  // mpirun's own options, before the program
  for (const std::string& variable : o.environment) exported.insert(exported.end(), {"-x", variable});
  cmd.insert(std::find(cmd.begin(), cmd.end(), o.python), exported.begin(), exported.end());
  const auto& tree = phase == "load" && o.load_megatron_path ? o.load_megatron_path : o.megatron_path;
  if (tree) cmd.insert(cmd.end(), {"--megatron-path", *tree});
  // Both worlds: the worker plants a mutant in the world of its phase (most bugs are the loading run's).
  if (o.mutant) cmd.insert(cmd.end(), {"--mutant", *o.mutant});
  if (o.fault && o.fault->kind != WorldFault::Kind::truncate) cmd.insert(cmd.end(), {"--fault", o.fault->text()});
  if (o.no_cpu_patches) cmd.push_back("--no-cpu-patches");
  return cmd;
}

/// The ranks of a timed-out world that did not finish: the laggards (the fewest stage changes) "hung", the
/// others "waiting".
std::vector<std::string> unfinished_ranks(const std::vector<RankState>& ranks) {
  const auto finished = [](const RankState& st) { return st.has_status && st.status.value("stage", "") == "done"; };
  const auto step = [](const RankState& st) { return st.has_status ? st.status.value("step", std::int64_t{0}) : -1; };
  std::int64_t least = INT64_MAX;
  for (const RankState& st : ranks)
    if (!finished(st)) least = std::min(least, step(st));
  std::vector<std::string> out;
  for (std::size_t r = 0; r < ranks.size(); ++r)
    if (!finished(ranks[r]))
      out.push_back((step(ranks[r]) == least ? "hung " : "waiting ") +
                    describe_rank(static_cast<std::int64_t>(r), ranks[r]));
  return out;
}

Result<WorldOutcome> run_world_once(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o) {
  IH_TRY_ASSIGN(port, free_port());
  IH_TRY_ASSIGN(session_folder, WorkFolder::make(std::nullopt, "mpi-" + phase));
  const std::vector<std::string> cmd = world_command(phase, ranks, port, session_folder.path(), o);
  std::error_code ec;
  fs::create_directories(o.work / "status", ec);
  fs::create_directories(o.work / "results", ec);
  // This phase's files only: the other world may be running beside this one (world_handshake.h).
  for (std::int64_t r = 0; r < ranks; ++r)
    for (const char* folder : {"status", "results"})
      fs::remove(o.work / folder / (phase + "_rank_" + std::to_string(r) + ".json"), ec);
  // Starting: a rank has not reported yet, or is still importing.
  const StartupClock startup{std::chrono::seconds(std::max(kWorldStartupAllowanceS, o.world_timeout_s)), [&] {
                               for (const RankState& st : read_rank_states(o.work, phase, ranks))
                                 if (!st.has_status || st.status.value("stage", "") == "import") return true;
                               return false;
                             }};
  IH_TRY_ASSIGN(outcome, run_child(
                             cmd, std::chrono::seconds(o.world_timeout_s),
                             [&](const std::string& line) { o.progress("  [" + phase + "] " + line); }, startup));
  WorldOutcome w;
  w.launched = true;
  w.timed_out = outcome.timed_out;
  w.timed_out_starting = outcome.timed_out_starting;
  w.exit_code = outcome.signaled ? 128 + outcome.signal : outcome.exit_code;
  w.seconds = outcome.seconds;
  w.stderr_tail = outcome.stderr_tail;
  w.ranks = read_rank_states(o.work, phase, ranks);
  if (w.timed_out) w.hung = unfinished_ranks(w.ranks);
  kill_ranks(w.ranks);  // mpirun is gone; no rank may outlive it
  return w;
}

}  // namespace

std::vector<std::string> mpirun_launcher(std::int64_t ranks, const fs::path& session_folder) {
  std::vector<std::string> cmd = {"mpirun"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(), {"--mca", "orte_tmpdir_base", session_folder.string(), "--oversubscribe", "--bind-to", "none",
                         "-np", std::to_string(ranks)});
  return cmd;
}

std::vector<RankState> read_rank_states(const fs::path& work, const std::string& phase, std::int64_t ranks) {
  std::vector<RankState> out(static_cast<std::size_t>(ranks));
  for (std::int64_t r = 0; r < ranks; ++r) {
    const std::string base = phase + "_rank_" + std::to_string(r) + ".json";
    if (auto s = read_json_file(work / "status" / base))
      out[static_cast<std::size_t>(r)].has_status = true, out[static_cast<std::size_t>(r)].status = *s;
    if (auto s = read_json_file(work / "results" / base))
      out[static_cast<std::size_t>(r)].has_result = true, out[static_cast<std::size_t>(r)].result = *s;
  }
  return out;
}

Status write_json_atomically(const fs::path& path, const Json& value) {
  const fs::path temporary = path.string() + ".tmp";
  std::ofstream out(temporary, std::ios::binary);
  out << value.dump(1) << "\n";
  out.close();
  std::error_code ec;
  if (out) fs::rename(temporary, path, ec);
  if (!out || ec) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

const Json* scenario_result(const RankState& rank, const std::string& name) {
  if (!rank.has_result || !rank.result.contains("scenarios")) return nullptr;
  for (const auto& s : rank.result["scenarios"])
    if (s.value("name", "") == name) return &s;
  return nullptr;
}

std::string describe_rank(std::int64_t r, const RankState& st) {
  if (!st.has_status) return "rank " + std::to_string(r) + ": never reported a stage (did not start)";
  const double since = st.status.value("since", 0.0);
  const double now = static_cast<double>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count()) /
                     1000.0;
  std::ostringstream text;
  text << "rank " << r << " (pid " << st.status.value("pid", 0) << "): stage '"
       << st.status.value("stage", std::string("?")) << "'";
  if (st.status.contains("scenario") && st.status["scenario"].is_string())
    text << " of scenario " << st.status["scenario"].get<std::string>();
  text << " for " << static_cast<std::int64_t>(now - since) << " s";
  return text.str();
}

std::string timeout_text(const std::string& phase, const WorldOutcome& w, const WorldRunOptions& o) {
  if (w.timed_out_starting)
    return phase + " world's start-up (importing Megatron) did not end within " +
           std::to_string(std::max(kWorldStartupAllowanceS, o.world_timeout_s)) + " s";
  return phase + " world timed out after " + std::to_string(o.world_timeout_s) + " s";
}

Result<WorldOutcome> run_world(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o) {
  for (int attempt = 1;; ++attempt) {
    IH_TRY_ASSIGN(w, run_world_once(phase, ranks, o));
    if (w.timed_out || w.exit_code == 0 || attempt == 3 || !port_taken(w)) return w;
    o.progress(phase + " world: MASTER_PORT was taken by another process; starting the world again on a new port");
  }
}

}  // namespace ih
