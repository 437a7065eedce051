#include "harness/roundtrip/world_run.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/process/child_run.h"
#include "models/text.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif
#ifndef IH_BINARY_DIR_PATH
#define IH_BINARY_DIR_PATH "."
#endif

namespace ih {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

std::optional<Json> read_json_file(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed.ok()) return std::nullopt;
  return std::move(parsed).value();
}

Status write_json_file(const fs::path& path, const Json& value) {
  std::ofstream out(path, std::ios::binary);
  out << value.dump(1) << "\n";
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

/// A free TCP port on 127.0.0.1 for torch.distributed's rendezvous (MASTER_PORT).
Result<int> free_port() {
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

struct RankState {
  bool has_status = false;
  Json status;  // pid, stage, step, scenario, since
  bool has_result = false;
  Json result;  // scenarios: [...], error
};

std::vector<RankState> read_ranks(const fs::path& work, const std::string& phase, std::int64_t ranks) {
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

const Json* scenario_result(const RankState& rank, const std::string& name) {
  if (!rank.has_result || !rank.result.contains("scenarios")) return nullptr;
  for (const auto& s : rank.result["scenarios"])
    if (s.value("name", "") == name) return &s;
  return nullptr;
}

/// "rank 1 (pid 123): stage 'load: ...' (scenario x) for 42 s".
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

/// Kills the rank processes a world left behind (by the pids they reported), never by name.
void kill_ranks(const std::vector<RankState>& ranks) {
  for (const RankState& st : ranks) {
    if (!st.has_status) continue;
    const auto pid = st.status.value("pid", std::int64_t{0});
    if (pid > 1 && pid != getpid()) kill(static_cast<pid_t>(pid), SIGKILL);
  }
}

struct WorldOutcome {
  bool launched = false, timed_out = false, timed_out_starting = false;
  int exit_code = -1;
  double seconds = 0;
  std::string stderr_tail;
  std::vector<RankState> ranks;
  std::vector<std::string> hung;  // ranks named on a timeout
};

Result<WorldOutcome> run_world_once(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o);

/// Megatron's imports get their own clock (StartupClock): the same allowance as the adapter's
/// start-up (docs/adapter-protocol.md), seen exceeded by 300 s worlds beside a gate on CI's 2 cores.
constexpr std::int64_t kWorldStartupAllowanceS = 420;

/// "load world timed out after 300 s", or the start-up's own timeout.
std::string timeout_text(const std::string& phase, const WorldOutcome& w, const WorldRunOptions& o) {
  if (w.timed_out_starting)
    return phase + " world's start-up (importing Megatron) did not end within " +
           std::to_string(std::max(kWorldStartupAllowanceS, o.world_timeout_s)) + " s";
  return phase + " world timed out after " + std::to_string(o.world_timeout_s) + " s";
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

Result<WorldOutcome> run_world(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o) {
  for (int attempt = 1;; ++attempt) {
    IH_TRY_ASSIGN(w, run_world_once(phase, ranks, o));
    if (w.timed_out || w.exit_code == 0 || attempt == 3 || !port_taken(w)) return w;
    o.progress(phase + " world: MASTER_PORT was taken by another process; starting the world again on a new port");
  }
}

Result<WorldOutcome> run_world_once(const std::string& phase, std::int64_t ranks, const WorldRunOptions& o) {
  WorldOutcome w;
  IH_TRY_ASSIGN(port, free_port());
  const std::string script = std::string(IH_SOURCE_DIR_PATH) + "/harness/megatron/adapter/roundtrip_world.py";
  std::vector<std::string> cmd = {"mpirun"};
  if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
  cmd.insert(cmd.end(),
             {"--oversubscribe", "--bind-to", "none", "-np", std::to_string(ranks), "-x", "MASTER_ADDR=127.0.0.1", "-x",
              "MASTER_PORT=" + std::to_string(port), "-x", "GLOO_SOCKET_IFNAME=lo", "-x", "OMP_NUM_THREADS=1", "-x",
              "PYTHONUNBUFFERED=1", "-x", "TORCH_NCCL_ASYNC_ERROR_HANDLING=1", o.python, script, "--work",
              o.work.string(), "--phase", phase, "--timeout",
              // Twice the world's: the harness's own timeout must fire first, so a hung rank is
              // named as hung instead of its peer failing in a collective (seen under load).
              std::to_string(std::max<std::int64_t>(10, o.world_timeout_s * 2))});
  if (o.megatron_path) cmd.insert(cmd.end(), {"--megatron-path", *o.megatron_path});
  // Both worlds: the worker plants a mutant in the world of its phase (most bugs are the loading run's).
  if (o.mutant) cmd.insert(cmd.end(), {"--mutant", *o.mutant});
  if (o.fault && o.fault->kind != WorldFault::Kind::truncate) cmd.insert(cmd.end(), {"--fault", o.fault->text()});
  if (o.no_cpu_patches) cmd.push_back("--no-cpu-patches");
  std::error_code ec;
  fs::remove_all(o.work / "status", ec);
  fs::create_directories(o.work / "status", ec);
  fs::create_directories(o.work / "results", ec);
  for (std::int64_t r = 0; r < ranks; ++r)
    fs::remove(o.work / "results" / (phase + "_rank_" + std::to_string(r) + ".json"), ec);
  // Starting: a rank has not reported yet, or is still importing.
  const StartupClock startup{std::chrono::seconds(std::max(kWorldStartupAllowanceS, o.world_timeout_s)), [&] {
                               for (const RankState& st : read_ranks(o.work, phase, ranks))
                                 if (!st.has_status || st.status.value("stage", "") == "import") return true;
                               return false;
                             }};
  IH_TRY_ASSIGN(outcome, run_child(
                             cmd, std::chrono::seconds(o.world_timeout_s),
                             [&](const std::string& line) { o.progress("  [" + phase + "] " + line); }, startup));
  w.launched = true;
  w.timed_out = outcome.timed_out;
  w.timed_out_starting = outcome.timed_out_starting;
  w.exit_code = outcome.signaled ? 128 + outcome.signal : outcome.exit_code;
  w.seconds = outcome.seconds;
  w.stderr_tail = outcome.stderr_tail;
  w.ranks = read_ranks(o.work, phase, ranks);
  if (w.timed_out) {
    // The laggard: the fewest stage changes among the ranks that did not finish.
    std::int64_t least = INT64_MAX;
    for (const RankState& st : w.ranks)
      if (!st.has_status || st.status.value("stage", "") != "done")
        least = std::min(least, st.has_status ? st.status.value("step", std::int64_t{0}) : -1);
    for (std::int64_t r = 0; r < ranks; ++r) {
      const RankState& st = w.ranks[static_cast<std::size_t>(r)];
      if (st.has_status && st.status.value("stage", "") == "done") continue;
      const std::int64_t step = st.has_status ? st.status.value("step", std::int64_t{0}) : -1;
      w.hung.push_back((step == least ? "hung " : "waiting ") + describe_rank(r, st));
    }
  }
  kill_ranks(w.ranks);  // mpirun is gone; no rank may outlive it
  return w;
}

/// The slowest rank's `field` of this scenario ("seconds": its dist_checkpointing call; "scenario_seconds":
/// the whole scenario in the warm world).
double max_seconds(const std::vector<RankState>& ranks, const std::string& name, const std::string& field = "seconds") {
  double m = 0;
  for (const RankState& st : ranks)
    if (const Json* s = scenario_result(st, name); s && s->contains(field)) m = std::max(m, (*s)[field].get<double>());
  return m;
}

/// What a worker recorded when a scenario failed on it.
struct WorkerError {
  std::string text;      // "<kind>: rank <r>, stage '<stage>': <message> (at <Megatron frame>)"
  std::string kind;      // the worker's error kind (megatron_error, harness_error, cannot_run, ...)
  std::string function;  // the function of the deepest Megatron frame it raised in, or empty
};

/// The first error a rank recorded for this scenario (or for its start), with the rank.
std::optional<WorkerError> first_error(const std::vector<RankState>& ranks, const std::string& name) {
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    const Json* s = scenario_result(ranks[r], name);
    const Json* e = s && s->contains("error") ? &(*s)["error"] : nullptr;
    if (!e && ranks[r].has_result && ranks[r].result.contains("error")) e = &ranks[r].result["error"];
    if (!e) continue;
    WorkerError out;
    out.kind = e->value("kind", std::string("error"));
    out.text = out.kind + ": rank " + std::to_string(r) + ", stage '" + e->value("stage", std::string("?")) +
               "': " + e->value("message", std::string());
    if (e->contains("megatron_frame") && (*e)["megatron_frame"].is_string()) {
      const std::string frame = (*e)["megatron_frame"].get<std::string>();  // "<file>:<line> in <function>"
      out.text += " (at " + frame + ")";
      if (const auto at = frame.rfind(" in "); at != std::string::npos) out.function = frame.substr(at + 4);
    }
    return out;
  }
  return std::nullopt;
}

/// The outcome a worker's error kind gives its scenario: Megatron that cannot run here (a CUDA-type
/// error) is not run, a worker that failed outside Megatron a harness error, anything else a failure.
Outcome outcome_of_worker_error(const std::string& kind) {
  if (kind == "cannot_run") return Outcome::not_run;
  if (kind == "harness_error") return Outcome::harness_error;
  return Outcome::failed;
}

/// The failure a worker error gives its scenario: the problem line, the outcome and, for Megatron's own error,
/// the function it raised in.
void record_worker_error(ScenarioOutcome& r, const std::string& what, const WorkerError& err) {
  r.problems.push_back(what + " failed: " + err.text);
  r.outcome = outcome_of_worker_error(err.kind);
  if (err.kind == "megatron_error") r.refused_in = err.function;
}

/// Throughput of one phase: mean over ranks of bytes/second, and of memcpy_seconds / seconds.
Json throughput(const std::vector<RankState>& ranks, const std::string& name) {
  double rate = 0, ratio = 0, memcpy_rate = 0;
  std::int64_t n = 0, bytes = 0;
  for (const RankState& st : ranks) {
    const Json* s = scenario_result(st, name);
    if (!s || !s->contains("seconds") || !s->contains("bytes")) continue;
    const double secs = (*s)["seconds"].get<double>(), mc = s->value("memcpy_seconds", 0.0);
    const auto b = (*s)["bytes"].get<std::int64_t>();
    if (secs <= 0) continue;
    rate += static_cast<double>(b) / secs;
    if (mc > 0) ratio += mc / secs, memcpy_rate += static_cast<double>(b) / mc;
    bytes += b, ++n;
  }
  if (n == 0) return Json::object();
  return Json{{"bytes_total", bytes},
              {"bytes_per_second_per_rank", rate / static_cast<double>(n)},
              {"memcpy_bytes_per_second_per_rank", memcpy_rate / static_cast<double>(n)},
              {"ratio_to_memcpy", ratio / static_cast<double>(n)}};
}

Json memory(const std::vector<RankState>& ranks, const std::string& name) {
  Json out = Json::object();
  std::int64_t peak = 0, growth = 0;
  for (const RankState& st : ranks) {
    const Json* s = scenario_result(st, name);
    if (!s) continue;
    const auto hwm = s->value("peak_rss", std::int64_t{0}), before = s->value("rss_before", std::int64_t{0});
    peak = std::max(peak, hwm);
    growth = std::max(growth, hwm - before);
    for (const char* f : {"cuda_max_allocated", "cuda_max_reserved"})
      if (s->contains(f)) out[f] = std::max(out.value(f, std::int64_t{0}), (*s)[f].get<std::int64_t>());
    if (s->contains("cuda_reserved_after_saves")) {
      const auto& v = (*s)["cuda_reserved_after_saves"];
      const std::int64_t g = v.back().get<std::int64_t>() - v.front().get<std::int64_t>();
      out["cuda_reserved_growth_3_saves"] = std::max(out.value("cuda_reserved_growth_3_saves", std::int64_t{0}), g);
    }
    if (s->contains("peak_reset") && !(*s)["peak_reset"].get<bool>()) out["peak_rss_includes_startup"] = true;
  }
  out["peak_rss_bytes"] = peak;
  out["peak_rss_growth_bytes"] = growth;
  return out;
}

/// Fault "truncate": cut the largest data file of the checkpoint to half (a torn write).
std::optional<std::string> truncate_checkpoint(const fs::path& ckpt) {
  std::error_code ec;
  fs::path biggest;
  std::uintmax_t size = 0;
  for (const auto& f : fs::directory_iterator(ckpt, ec))
    if (f.path().extension() == ".distcp" && f.file_size(ec) > size) size = f.file_size(ec), biggest = f.path();
  if (biggest.empty()) return std::nullopt;
  fs::resize_file(biggest, size / 2, ec);
  if (ec) return std::nullopt;
  return biggest.filename().string() + " truncated from " + std::to_string(size) + " to " + std::to_string(size / 2) +
         " bytes";
}

}  // namespace

namespace {

constexpr std::pair<WorldFault::Kind, std::string_view> kFaultNames[] = {{WorldFault::Kind::kill_save, "kill_save"},
                                                                         {WorldFault::Kind::hang_load, "hang_load"},
                                                                         {WorldFault::Kind::truncate, "truncate"}};

}  // namespace

std::string_view to_string(WorldFault::Kind kind) {
  for (const auto& [k, name] : kFaultNames)
    if (k == kind) return name;
  return "?";
}

std::string WorldFault::text() const {
  std::string out(to_string(kind));
  if (kind == Kind::truncate) return out;
  out += ":" + std::to_string(rank);
  return scenario ? out + ":" + *scenario : out;
}

Result<WorldFault> parse_world_fault(std::string_view text) {
  const auto bad = [&] {
    return make_error(ErrorKind::invalid_argument, "--fault '" + std::string(text) +
                                                       "': expected kill_save:R[:SCENARIO], hang_load:R[:SCENARIO] "
                                                       "or truncate (R a rank number)");
  };
  std::vector<std::string> parts;
  for (std::size_t begin = 0;;) {
    const std::size_t colon = text.find(':', begin);
    parts.emplace_back(text.substr(begin, colon == std::string_view::npos ? std::string_view::npos : colon - begin));
    if (colon == std::string_view::npos) break;
    begin = colon + 1;
  }
  const auto named = std::find_if(std::begin(kFaultNames), std::end(kFaultNames),
                                  [&](const auto& entry) { return entry.second == parts[0]; });
  if (named == std::end(kFaultNames)) return bad();
  WorldFault fault;
  fault.kind = named->first;
  if (fault.kind == WorldFault::Kind::truncate) {
    if (parts.size() != 1) return bad();
    return fault;
  }
  if (parts.size() < 2 || parts.size() > 3 || (parts.size() == 3 && parts[2].empty())) return bad();
  auto rank = parse_int(parts[1]);
  if (!rank.ok() || *rank < 0) return bad();
  fault.rank = *rank;
  if (parts.size() == 3) fault.scenario = parts[2];
  return fault;
}

std::vector<Outcome> WorldRunReport::outcomes() const {
  std::vector<Outcome> out;
  if (timed_out) out.push_back(Outcome::timeout);
  if (harness_fault) out.push_back(Outcome::harness_error);
  for (const auto& s : scenarios) out.push_back(s.outcome);
  return out;
}

namespace {

// What the last configure found (harness/CMakeLists.txt writes it): "configured <torch>" or "missing: <why>".
std::string verifier_status(const fs::path& build) {
  std::ifstream in(build / "roundtrip-verifier.txt");
  std::string line;
  std::getline(in, line);
  return in ? line : "missing: " + (build / "roundtrip-verifier.txt").string() + " is absent (configure the build)";
}

// A scenario's outcome before anything ran: which scenario, its layouts and world sizes.
ScenarioOutcome outcome_before_running(const WorldScenario& s) {
  ScenarioOutcome r;
  r.name = s.name, r.description = s.description, r.save_layout = s.layout_text(true),
  r.load_layout = s.layout_text(false), r.save_ranks = s.save.ranks(), r.load_ranks = s.load.ranks();
  return r;
}

}  // namespace

Result<fs::path> ensure_roundtrip_verifier(const std::function<void(const std::string&)>& progress) {
  const fs::path build = IH_BINARY_DIR_PATH;
  const fs::path exe = build / "bin" / "ih_roundtrip_verifier";
  const fs::path lock_path = build / ".ih_roundtrip_verifier.lock";
  const int lock = open(lock_path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644);
  if (lock < 0) return make_error(seam_kind::harness_error, "cannot open the build lock " + lock_path.string());
  flock(lock, LOCK_EX);  // one build at a time (parallel ctest runs)
  const auto release = [&] {
    flock(lock, LOCK_UN);
    close(lock);
  };
  // A venv installed after this build was configured: configure again, which finds it.
  if (verifier_status(build).rfind("configured ", 0) != 0) {
    progress("looking for the Megatron venv's LibTorch again: cmake -S " + std::string(IH_SOURCE_DIR_PATH) + " -B " +
             build.string());
    auto configured = run_child({"cmake", "-S", IH_SOURCE_DIR_PATH, "-B", build.string()}, std::chrono::seconds(300),
                                [](const std::string&) {});
    if (!configured.ok() || configured->timed_out || configured->exit_code != 0) {
      release();
      return make_error(seam_kind::harness_error, "re-configuring " + build.string() + " failed" +
                                                      (configured.ok() ? ":\n" + configured->stderr_tail : ""));
    }
    const std::string status = verifier_status(build);
    if (status.rfind("configured ", 0) != 0) {
      release();
      return make_error(seam_kind::unsupported, "the LibTorch verifier cannot be built: " + status);
    }
  }
  if (!fs::exists(exe))
    progress("building the LibTorch verifier (first use, about a minute): cmake --build " + build.string() +
             " --target ih_roundtrip_verifier");
  auto outcome = run_child({"cmake", "--build", build.string(), "--target", "ih_roundtrip_verifier"},
                           std::chrono::seconds(1200), [](const std::string&) {});
  release();
  if (!outcome.ok()) return outcome.error();
  if (outcome->timed_out || outcome->exit_code != 0 || !fs::exists(exe))
    return make_error(seam_kind::harness_error, "building ih_roundtrip_verifier failed:\n" + outcome->stderr_tail);
  return exe;
}

BuildableRealScenarios buildable_real_scenarios(std::vector<WorldScenario> scenarios,
                                                const RealModelEntries& describe) {
  auto answers = std::make_shared<std::map<std::string, Result<std::vector<FlatEntry>>>>();
  BuildableRealScenarios out;
  out.describe = [describe, answers](const ModelDumpSpec& m, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    const std::string key = json::dump(json::model_dump_spec_to_json(m, rank));
    auto it = answers->find(key);
    if (it == answers->end()) it = answers->emplace(key, describe(m, rank)).first;
    return it->second;
  };
  for (WorldScenario& s : scenarios) {
    std::optional<Error> failure;  // the first rank the target could not describe
    for (const bool save_side : {true, false}) {
      const ModelDumpSpec& m = save_side ? s.real_save : s.real_load;
      const std::int64_t ranks = save_side ? s.save.ranks() : s.load.ranks();
      for (std::int64_t r = 0; r < ranks && !failure; ++r)
        if (auto probe = out.describe(m, r); !probe.ok())
          failure = probe.error().with_context(std::string(save_side ? "save" : "load") + " rank " + std::to_string(r) +
                                               "'s real model");
    }
    if (!failure) {
      out.runnable.push_back(std::move(s));
    } else if (failure->kind == seam_kind::unsupported) {
      out.not_run.emplace_back(s.name, failure->message);
    } else {
      ScenarioOutcome r = outcome_before_running(s);
      r.outcome = outcome_of_error(failure->kind);
      r.problems.push_back("describing the models failed: " + std::string(to_string(failure->kind)) + ": " +
                           failure->message);
      out.undescribed.push_back(std::move(r));
    }
  }
  return out;
}

Result<WorldRunReport> run_world_roundtrips(const std::vector<WorldScenario>& scenarios, const WorldRunOptions& o) {
  WorldRunReport report;
  if (scenarios.empty()) return make_error(ErrorKind::invalid_argument, "no scenario to run");
  const std::int64_t save_ranks = scenarios[0].save.ranks(), load_ranks = scenarios[0].load.ranks();
  std::error_code ec;
  fs::create_directories(o.work, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + o.work.string() + ": " + ec.message());

  // 1. The plan and the oracle, from the C++ reference.
  std::vector<const WorldScenario*> planned;
  std::map<std::string, WorldPlanStats> stats;
  for (const WorldScenario& s : scenarios) {
    if (s.save.ranks() != save_ranks || s.load.ranks() != load_ranks)
      return make_error(ErrorKind::invalid_argument, "all scenarios of one run share the world sizes");
    const fs::path dir = o.work / scenario_dir(s.name);
    fs::remove_all(dir, ec);
    auto st = write_world_scenario(s, dir, o.real_entries);
    if (!st.ok()) return st.error();
    stats[s.name] = *st;
    planned.push_back(&s);
    o.progress(s.name + ": " + s.description + "; save " + s.layout_text(true) + ", load " + s.layout_text(false) +
               "; " + std::to_string(st->gpt_keys) + " keys saved, " + std::to_string(st->saved_elements) +
               " elements saved, " + std::to_string(st->expected_elements) + " expected on the load ranks");
  }
  IH_TRY_ASSIGN(plan, world_plan_json(planned, o.device));
  IH_TRY_STATUS(write_json_file(o.work / "plan.json", plan));

  // 2. The verifier (built on first use) before any world starts.
  IH_TRY_ASSIGN(verifier, ensure_roundtrip_verifier(o.progress));

  std::map<std::string, ScenarioOutcome> out;
  for (const WorldScenario& s : scenarios) {
    ScenarioOutcome& r = out[s.name] = outcome_before_running(s);
    r.device = o.device;
  }

  // 3. The save world.
  o.progress("save world: mpirun -np " + std::to_string(save_ranks) + " (" + (o.device == "cpu" ? "gloo" : "NCCL") +
             "; importing Megatron takes ~15 s per rank)");
  IH_TRY_ASSIGN(save, run_world("save", save_ranks, o));
  std::vector<std::string> loadable;
  for (const WorldScenario& s : scenarios) {
    ScenarioOutcome& r = out[s.name];
    bool complete = true;
    for (std::int64_t k = 0; k < save_ranks; ++k) {
      const Json* sr = scenario_result(save.ranks[static_cast<std::size_t>(k)], s.name);
      if (!sr || !sr->value("ok", false)) complete = false;
    }
    // A rank records ok only after the barrier that follows dist_checkpointing.save: all ranks ok
    // means every rank's files and the metadata were written. A killed rank never records it.
    r.save_seconds = max_seconds(save.ranks, s.name);
    r.details["scenario_seconds_save"] = max_seconds(save.ranks, s.name, "scenario_seconds");
    if (!complete) {
      // Ranks that neither finished nor recorded an error died (a signal, an OOM kill, mpirun).
      for (std::int64_t k = 0; k < save_ranks; ++k) {
        const RankState& st = save.ranks[static_cast<std::size_t>(k)];
        const Json* sr = scenario_result(st, s.name);
        const bool reported = sr && (sr->value("ok", false) || sr->contains("error"));
        if (!reported && !(st.has_result && st.result.contains("error")) && !save.timed_out && st.has_status &&
            st.status.value("scenario", Json()) == Json(s.name))
          r.problems.push_back("save rank " + std::to_string(k) + " died without a result (killed?) at " +
                               describe_rank(k, st) + "; world exit " + std::to_string(save.exit_code));
      }
      if (auto err = first_error(save.ranks, s.name)) {
        record_worker_error(r, "save", *err);
      } else if (save.timed_out) {
        r.problems.push_back(timeout_text("save", save, o));
        r.outcome = Outcome::timeout;
      } else {
        std::string who;
        for (std::int64_t k = 0; k < save_ranks; ++k) {
          const Json* sr = scenario_result(save.ranks[static_cast<std::size_t>(k)], s.name);
          if (!sr || !sr->value("ok", false))
            who += (who.empty() ? "" : "; ") + describe_rank(k, save.ranks[static_cast<std::size_t>(k)]);
        }
        r.problems.push_back("save world ended with exit " + std::to_string(save.exit_code) +
                             " before every rank saved " + "this scenario (" +
                             (who.empty() ? "a rank failed after saving" : who) + ")");
      }
      const bool has_metadata = fs::exists(o.work / scenario_dir(s.name) / "checkpoint" / ".metadata");
      r.problems.push_back(std::string("checkpoint NOT complete and never loaded (.metadata ") +
                           (has_metadata ? "present, but not every rank finished" : "absent") + ")");
      continue;
    }
    std::ofstream(o.work / scenario_dir(s.name) / "checkpoint.complete") << "saved by all " << save_ranks << " ranks\n";
    loadable.push_back(s.name);
  }
  if (save.timed_out) {
    report.timed_out = true;
    report.faults.push_back(timeout_text("save", save, o));
    for (const auto& h : save.hung) report.faults.push_back("  " + h);
  }
  if (save.exit_code == 127 || (save.exit_code != 0 && save.ranks.size() && !save.ranks[0].has_status))
    report.harness_fault = true, report.faults.push_back("mpirun could not start the save world:\n" + save.stderr_tail);

  // 4. Faults that damage a complete checkpoint, then the load world on what is loadable.
  if (o.fault && o.fault->kind == WorldFault::Kind::truncate && !loadable.empty()) {
    if (auto what = truncate_checkpoint(o.work / scenario_dir(loadable[0]) / "checkpoint"))
      o.progress("fault injected: " + loadable[0] + "/checkpoint/" + *what);
  }
  if (!loadable.empty()) {
    // A rank that fails a scenario ends its world (its peers may be left in a collective), so the
    // scenarios after it never start: the load world is started again on those, until every scenario
    // ran once or a world ran none of them.
    std::vector<WorldOutcome> loads;
    std::map<std::string, std::size_t> loaded_by;  // scenario -> the load world that ran it
    for (std::vector<std::string> pending = loadable; !pending.empty();) {
      std::vector<const WorldScenario*> to_load;
      for (const WorldScenario* s : planned)
        if (std::find(pending.begin(), pending.end(), s->name) != pending.end()) to_load.push_back(s);
      IH_TRY_ASSIGN(load_plan, world_plan_json(to_load, o.device));
      IH_TRY_STATUS(write_json_file(o.work / "plan.json", load_plan));
      o.progress("load world: mpirun -np " + std::to_string(load_ranks) + " on " + std::to_string(pending.size()) +
                 " complete checkpoint(s)" + (loads.empty() ? "" : ", those the last world ended before"));
      IH_TRY_ASSIGN(load, run_world("load", load_ranks, o));
      if (load.timed_out) {
        report.timed_out = true;
        report.faults.push_back(timeout_text("load", load, o));
        for (const auto& h : load.hung) report.faults.push_back("  " + h);
      }
      std::vector<std::string> not_started;
      for (const std::string& name : pending) {
        loaded_by[name] = loads.size();
        const bool started = std::any_of(load.ranks.begin(), load.ranks.end(),
                                         [&](const RankState& st) { return scenario_result(st, name) != nullptr; });
        if (!started) not_started.push_back(name);
      }
      loads.push_back(std::move(load));
      if (loads.back().timed_out || not_started.size() == pending.size()) break;
      pending = std::move(not_started);
    }
    for (const std::string& name : loadable) {
      const WorldOutcome& load = loads[loaded_by[name]];
      ScenarioOutcome& r = out[name];
      r.load_seconds = max_seconds(load.ranks, name);
      r.details["scenario_seconds_load"] = max_seconds(load.ranks, name, "scenario_seconds");
      // loaded: every rank finished the scenario; dumped: every rank wrote what Megatron loaded (a rank whose
      // optimizer then refused it, a DistributedOptimizer's load_state_dict, still has it verified).
      bool loaded = true, dumped = true;
      for (std::int64_t k = 0; k < load_ranks; ++k) {
        const Json* lr = scenario_result(load.ranks[static_cast<std::size_t>(k)], name);
        if (!lr || !lr->value("ok", false)) loaded = false;
        if (!lr || !lr->value("dumped", false)) dumped = false;
      }
      r.details["memory_save"] = memory(save.ranks, name);
      r.details["memory_load"] = memory(load.ranks, name);
      r.details["throughput_save"] = throughput(save.ranks, name);
      r.details["throughput_load"] = throughput(load.ranks, name);
      r.peak_bytes_per_rank = std::max(r.details["memory_save"].value("peak_rss_bytes", std::int64_t{0}),
                                       r.details["memory_load"].value("peak_rss_bytes", std::int64_t{0}));
      if (o.device != "cpu")
        r.peak_bytes_per_rank = std::max(r.details["memory_save"].value("cuda_max_reserved", std::int64_t{0}),
                                         r.details["memory_load"].value("cuda_max_reserved", std::int64_t{0}));
      bool refused_after_dump = false;
      if (!loaded) {
        if (auto err = first_error(load.ranks, name)) {
          record_worker_error(r, "load", *err);
          refused_after_dump = dumped && r.outcome == Outcome::failed;
        } else {
          r.problems.push_back(load.timed_out ? "load world timed out"
                                              : "load world ended (exit " + std::to_string(load.exit_code) +
                                                    ") before every rank loaded this scenario");
          if (load.timed_out) r.outcome = Outcome::timeout;
        }
        if (!refused_after_dump) continue;  // nothing half-loaded is verified
      }
      // 5. Every element, in C++ with LibTorch.
      const fs::path dir = o.work / scenario_dir(name);
      auto v =
          run_child({verifier.string(), "--dir", dir.string(), "--ranks", std::to_string(load_ranks), "--save-result",
                     (o.work / "results" / "save_rank_0.json").string(), "--scenario", name, "--show", "8"},
                    std::chrono::seconds(o.world_timeout_s), [&](const std::string& line) {
                      auto parsed = json::parse(line);
                      if (parsed.ok() && parsed->is_object()) r.details["verifier"] = *parsed;
                    });
      if (!v.ok()) return v.error();
      if (v->timed_out) {
        r.outcome = Outcome::timeout;
        r.problems.push_back("the verifier timed out");
        continue;
      }
      const Json& vr = r.details.contains("verifier") ? r.details["verifier"] : Json::object();
      r.elements_verified = vr.value("elements_verified", std::int64_t{0});
      r.wrong_elements = vr.value("wrong_elements", std::int64_t{0});
      if (vr.contains("first"))
        for (const auto& line : vr["first"]) r.problems.push_back(line.get<std::string>());
      const bool cannot_verify = vr.contains("error"), verifier_broke = !vr.contains("ok") && v->exit_code != 0;
      if (cannot_verify) r.problems.push_back("cannot verify: " + vr["error"].value("message", std::string()));
      if (verifier_broke)
        r.problems.push_back("the verifier failed (exit " + std::to_string(v->exit_code) + "): " + v->stderr_tail);
      if (cannot_verify || verifier_broke)
        r.outcome = Outcome::harness_error;
      else if (vr.value("ok", false) && v->exit_code == 0 && r.elements_verified > 0 && !refused_after_dump)
        r.outcome = Outcome::passed;
    }
  }
  for (const WorldScenario& s : scenarios) report.scenarios.push_back(std::move(out[s.name]));
  return report;
}

}  // namespace ih
