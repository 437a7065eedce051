#include "harness/roundtrip/world_verdicts.h"

#include <algorithm>
#include <optional>

namespace ih {
namespace {

using Json = nlohmann::ordered_json;

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
/// error) or lacks what the scenario needs is not run, a worker that failed outside Megatron a harness error, anything
/// else a failure.
Outcome outcome_of_worker_error(const std::string& kind) {
  if (kind == "cannot_run" || kind == "unsupported") return Outcome::not_run;
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

/// Whether every rank of `world` reported scenario `name` with `field` true.
bool every_rank(const WorldOutcome& world, const std::string& name, const char* field) {
  return std::all_of(world.ranks.begin(), world.ranks.end(), [&](const RankState& st) {
    const Json* s = scenario_result(st, name);
    return s && s->value(field, false);
  });
}

/// Why the save world did not save the scenario completely (its problem lines and outcome).
void save_failure(const std::string& name, const WorldOutcome& save, const WorldRunOptions& o, ScenarioOutcome& r) {
  // Ranks that neither finished nor recorded an error died (a signal, an OOM kill, mpirun).
  for (std::size_t k = 0; k < save.ranks.size(); ++k) {
    const RankState& st = save.ranks[k];
    const Json* sr = scenario_result(st, name);
    const bool reported = sr && (sr->value("ok", false) || sr->contains("error"));
    if (!reported && !(st.has_result && st.result.contains("error")) && !save.timed_out && st.has_status &&
        st.status.value("scenario", Json()) == Json(name))
      r.problems.push_back("save rank " + std::to_string(k) + " died without a result (killed?) at " +
                           describe_rank(static_cast<std::int64_t>(k), st) + "; world exit " +
                           std::to_string(save.exit_code));
  }
  if (auto err = first_error(save.ranks, name)) {
    record_worker_error(r, "save", *err);
  } else if (save.timed_out) {
    r.problems.push_back(timeout_text("save", save, o));
    r.outcome = Outcome::timeout;
  } else if (std::none_of(save.ranks.begin(), save.ranks.end(), [](const RankState& st) { return st.has_status; })) {
    // No rank got as far as its first stage (no Python, no torch, mpirun refused): nothing of Megatron ran.
    r.problems.push_back("the save world ended with exit " + std::to_string(save.exit_code) +
                         " before any rank started: " + (save.stderr_tail.empty() ? "no stderr" : save.stderr_tail));
    r.outcome = Outcome::harness_error;
  } else {
    std::string who;
    for (std::size_t k = 0; k < save.ranks.size(); ++k) {
      const Json* sr = scenario_result(save.ranks[k], name);
      if (!sr || !sr->value("ok", false))
        who += (who.empty() ? "" : "; ") + describe_rank(static_cast<std::int64_t>(k), save.ranks[k]);
    }
    r.problems.push_back("save world ended with exit " + std::to_string(save.exit_code) + " before every rank saved " +
                         "this scenario (" + (who.empty() ? "a rank failed after saving" : who) + ")");
  }
}

}  // namespace

ScenarioOutcome outcome_before_running(const WorldScenario& s) {
  ScenarioOutcome r;
  r.name = s.name, r.description = s.description, r.save_layout = s.layout_text(true),
  r.load_layout = s.layout_text(false), r.save_ranks = s.save.ranks(), r.load_ranks = s.load.ranks();
  return r;
}

bool judge_save(const std::string& name, const WorldOutcome& save, const WorldRunOptions& o, ScenarioOutcome& r) {
  r.save_seconds = max_seconds(save.ranks, name);
  r.details["scenario_seconds_save"] = max_seconds(save.ranks, name, "scenario_seconds");
  if (every_rank(save, name, "ok")) return true;
  save_failure(name, save, o, r);
  const bool has_metadata = std::filesystem::exists(o.work / scenario_dir(name) / "checkpoint" / ".metadata");
  r.problems.push_back(std::string("checkpoint NOT complete and never loaded (.metadata ") +
                       (has_metadata ? "present, but not every rank finished" : "absent") + ")");
  return false;
}

void record_measurements(const std::string& name, const WorldOutcome& save, const WorldOutcome& load, Device device,
                         ScenarioOutcome& r) {
  r.load_seconds = max_seconds(load.ranks, name);
  r.details["scenario_seconds_load"] = max_seconds(load.ranks, name, "scenario_seconds");
  r.details["memory_save"] = memory(save.ranks, name);
  r.details["memory_load"] = memory(load.ranks, name);
  r.details["throughput_save"] = throughput(save.ranks, name);
  r.details["throughput_load"] = throughput(load.ranks, name);
  const char* peak = device == Device::cpu ? "peak_rss_bytes" : "cuda_max_reserved";
  r.peak_bytes_per_rank = std::max(r.details["memory_save"].value(peak, std::int64_t{0}),
                                   r.details["memory_load"].value(peak, std::int64_t{0}));
}

LoadVerdict judge_load(const std::string& name, const WorldOutcome& load, ScenarioOutcome& r) {
  // loaded: every rank finished the scenario; dumped: every rank wrote what Megatron loaded (a rank whose
  // optimizer then refused it, a DistributedOptimizer's load_state_dict, still has it verified).
  if (every_rank(load, name, "ok")) return LoadVerdict::loaded;
  if (auto err = first_error(load.ranks, name)) {
    record_worker_error(r, "load", *err);
    if (every_rank(load, name, "dumped") && r.outcome == Outcome::failed) return LoadVerdict::refused_after_dump;
    return LoadVerdict::nothing;
  }
  r.problems.push_back(load.timed_out ? "load world timed out"
                                      : "load world ended (exit " + std::to_string(load.exit_code) +
                                            ") before every rank loaded this scenario");
  if (load.timed_out) r.outcome = Outcome::timeout;
  return LoadVerdict::nothing;
}

}  // namespace ih
