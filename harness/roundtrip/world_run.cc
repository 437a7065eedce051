#include "harness/roundtrip/world_run.h"

#include <algorithm>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "harness/roundtrip/roundtrip_verifier.h"
#include "harness/roundtrip/stored_layout.h"
#include "harness/roundtrip/world_handshake.h"
#include "harness/roundtrip/world_launch.h"
#include "harness/roundtrip/world_verdicts.h"
#include "models/text.h"

namespace ih {
namespace {

using Json = nlohmann::ordered_json;
namespace fs = std::filesystem;

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

void WorldRunReport::merge(WorldRunReport other) {
  for (auto& s : other.scenarios) scenarios.push_back(std::move(s));
  for (auto& n : other.not_run) not_run.push_back(std::move(n));
  timed_out = timed_out || other.timed_out;
  harness_fault = harness_fault || other.harness_fault;
  for (auto& f : other.faults) faults.push_back(std::move(f));
}

namespace {

/// The outcome of a scenario that could not be planned: failed where Megatron's description of its real model is
/// not the reference's layout (a verdict on Megatron), else the error's own outcome (a plan bug: harness error).
ScenarioOutcome unplanned_outcome(const WorldScenario& s, const Error& why, Device device) {
  ScenarioOutcome r = outcome_before_running(s);
  r.device = device;
  r.outcome = outcome_of_error(why.kind);
  r.problems.push_back(why.kind == seam_kind::description_disagrees
                           ? "Megatron's description disagrees with the reference: " + why.message
                           : "planning failed: " + std::string(to_string(why.kind)) + ": " + why.message);
  return r;
}

Status same_world_sizes(const std::vector<WorldScenario>& scenarios) {
  for (const WorldScenario& s : scenarios)
    if (s.save.ranks() != scenarios[0].save.ranks() || s.load.ranks() != scenarios[0].load.ranks())
      return make_error(ErrorKind::invalid_argument, "all scenarios of one run share the world sizes");
  return Ok{};
}

/// 1. The plan and the oracle of every scenario, from the C++ reference, and the run's plan.json. A scenario that
/// cannot be planned is judged on its own in `unplanned` (unplanned_outcome) and runs in no world; the others do.
Result<std::vector<const WorldScenario*>> plan_scenarios(const std::vector<WorldScenario>& scenarios,
                                                         const WorldRunOptions& o,
                                                         std::vector<ScenarioOutcome>& unplanned) {
  IH_TRY_STATUS(same_world_sizes(scenarios));
  std::vector<const WorldScenario*> planned;
  for (const WorldScenario& s : scenarios) {
    std::error_code ec;
    fs::remove_all(o.work / scenario_dir(s.name), ec);
    if (auto failed = plan_world_scenario(s, o, o.real_entries))
      unplanned.push_back(std::move(*failed));
    else
      planned.push_back(&s);
  }
  IH_TRY_ASSIGN(plan, world_plan_json(planned, o.device));
  IH_TRY_STATUS(write_json_atomically(o.work / "plan.json", plan));
  return planned;
}

/// The save world's faults outside the checks: its timeout (with the ranks it named) and a world mpirun could not
/// start.
void record_save_faults(const WorldOutcome& save, const WorldRunOptions& o, WorldRunReport& report) {
  if (save.timed_out) {
    report.timed_out = true;
    report.faults.push_back(timeout_text("save", save, o));
    for (const auto& h : save.hung) report.faults.push_back("  " + h);
  }
  if (save.exit_code == 127 || (save.exit_code != 0 && save.ranks.size() && !save.ranks[0].has_status))
    report.harness_fault = true, report.faults.push_back("mpirun could not start the save world:\n" + save.stderr_tail);
}

/// The load worlds that ran the loadable scenarios, and which one ran each.
struct LoadWorlds {
  std::vector<WorldOutcome> worlds;
  std::map<std::string, std::size_t> loaded_by;  // scenario -> the load world that ran it
};

/// Whether some rank of `world` started scenario `name`.
bool started(const WorldOutcome& world, const std::string& name) {
  return std::any_of(world.ranks.begin(), world.ranks.end(),
                     [&](const RankState& st) { return scenario_result(st, name) != nullptr; });
}

/// 4. The load world on the loadable scenarios. A rank that fails a scenario ends its world (its peers may be left
/// in a collective), so the scenarios after it never start: the load world is started again on those, until every
/// scenario ran once or a world ran none of them.
Result<LoadWorlds> run_load_worlds(const std::vector<WorldScenario>& scenarios,
                                   const std::vector<std::string>& loadable, const WorldRunOptions& o,
                                   WorldRunReport& report) {
  LoadWorlds out;
  for (std::vector<std::string> pending = loadable; !pending.empty();) {
    std::vector<const WorldScenario*> to_load;
    for (const WorldScenario& s : scenarios)
      if (std::find(pending.begin(), pending.end(), s.name) != pending.end()) to_load.push_back(&s);
    IH_TRY_ASSIGN(load_plan, world_plan_json(to_load, o.device, o.plan_in_worlds));
    IH_TRY_STATUS(write_json_atomically(o.work / "plan.json", load_plan));
    o.progress("load world: mpirun -np " + std::to_string(scenarios[0].load.ranks()) + " on " +
               std::to_string(pending.size()) +
               (o.plan_in_worlds ? " scenario(s) as their checkpoints complete" : " complete checkpoint(s)") +
               (out.worlds.empty() ? "" : ", those the last world ended before"));
    IH_TRY_ASSIGN(load, run_world("load", scenarios[0].load.ranks(), o));
    if (load.timed_out) {
      report.timed_out = true;
      report.faults.push_back(timeout_text("load", load, o));
      for (const auto& h : load.hung) report.faults.push_back("  " + h);
    }
    std::vector<std::string> not_started;
    for (const std::string& name : pending) {
      out.loaded_by[name] = out.worlds.size();
      // A scenario skipped in the handshake is not run in any world (world_handshake.h).
      const bool skipped = o.plan_in_worlds && fs::exists(o.work / scenario_dir(name) / kSkipMarker);
      if (!started(load, name) && !skipped) not_started.push_back(name);
    }
    out.worlds.push_back(std::move(load));
    if (out.worlds.back().timed_out || not_started.size() == pending.size()) break;
    pending = std::move(not_started);
  }
  return out;
}

/// 5. Every element of each loaded scenario, in C++ with LibTorch.
Status judge_loads(const std::vector<std::string>& loadable, const WorldOutcome& save, const LoadWorlds& loads,
                   const fs::path& verifier, const WorldRunOptions& o, std::map<std::string, ScenarioOutcome>& out) {
  for (const std::string& name : loadable) {
    const WorldOutcome& load = loads.worlds[loads.loaded_by.at(name)];
    ScenarioOutcome& r = out[name];
    record_measurements(name, save, load, o.device, r);
    const LoadVerdict verdict = judge_load(name, load, r);
    if (verdict == LoadVerdict::nothing) continue;  // nothing half-loaded is verified
    IH_TRY_STATUS(verify_scenario(verifier, name, r.load_ranks, o, verdict == LoadVerdict::refused_after_dump, r));
  }
  return Ok{};
}

Result<Json> read_plan_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return make_error(seam_kind::harness_error, path.string() + " is missing");
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed.ok()) return make_error(seam_kind::harness_error, path.string() + ": " + parsed.error().message);
  return std::move(parsed).value();
}

/// 6. A real scenario's stored bytes, as the save world's rank 0 read them back with DCP's reader, against the
/// reference's layout (stored_layout.h): a wrong chunk fails the scenario, whatever its load said; bytes that were
/// not read back leave it no pass.
void judge_stored_bytes(const fs::path& dir, ScenarioOutcome& r) {
  auto catalogue = read_plan_json(dir / "catalogue.json");
  auto remaps = catalogue.ok() ? read_plan_json(dir / "stored_layout.json") : Result<Json>(catalogue.error());
  auto stored = remaps.ok() ? read_plan_json(dir / "stored_chunks.json") : Result<Json>(remaps.error());
  auto layout = stored.ok() ? stored_layout_from_json(*catalogue, *remaps) : Result<StoredLayout>(stored.error());
  auto chunks = layout.ok() ? stored_chunks_from_json(*stored) : Result<std::vector<ReadBackChunk>>(layout.error());
  if (!chunks.ok()) {
    r.problems.push_back("stored bytes not judged: " + chunks.error().message);
    if (r.outcome == Outcome::passed) r.outcome = Outcome::harness_error;
    return;
  }
  const StoredVerdict v = judge_stored_chunks(*chunks, *layout);
  r.details["stored_bytes"] = {{"chunks", v.chunks}, {"elements_checked", v.elements_checked}, {"wrong", v.wrong}};
  r.stored_wrong = v.wrong;
  if (v.wrong == 0) return;
  // The first line names the first wrong element: a gate check's detail is its scenario's first problem.
  for (std::size_t i = 0; i < v.first_wrong.size(); ++i)
    r.problems.push_back(i ? "stored: " + v.first_wrong[i]
                           : "stored bytes: " + std::to_string(v.wrong) + " of " + std::to_string(v.elements_checked) +
                                 " stored elements are not where the reference's layout puts them; " +
                                 v.first_wrong[0]);
  if (r.outcome == Outcome::passed) r.outcome = Outcome::failed;
}

/// What a pair of worlds did to the scenarios it ran: the save world, the load worlds, the complete checkpoints.
struct WorldsRun {
  WorldOutcome save;
  LoadWorlds loads;
  std::vector<std::string> loadable;
};

/// 5. and 6. What each scenario's load worlds loaded and, for a real one, its stored bytes: into the report in
/// the scenarios' order.
Status report_scenarios(const std::vector<const WorldScenario*>& scenarios, const WorldsRun& run,
                        const fs::path& verifier, const WorldRunOptions& o, std::map<std::string, ScenarioOutcome>& out,
                        WorldRunReport& report) {
  if (!run.loadable.empty()) IH_TRY_STATUS(judge_loads(run.loadable, run.save, run.loads, verifier, o, out));
  const auto loadable = [&](const std::string& name) {
    return std::find(run.loadable.begin(), run.loadable.end(), name) != run.loadable.end();
  };
  for (const WorldScenario* s : scenarios)
    if (s->is_real() && loadable(s->name)) judge_stored_bytes(o.work / scenario_dir(s->name), out[s->name]);
  for (const WorldScenario* s : scenarios) report.scenarios.push_back(std::move(out[s->name]));
  return Ok{};
}

/// The fault "truncate": the first complete checkpoint damaged before its load world reads it.
void inject_truncation(const std::string& name, const WorldRunOptions& o) {
  if (auto what = truncate_checkpoint(o.work / scenario_dir(name) / "checkpoint"))
    o.progress("fault injected: " + name + "/checkpoint/" + *what);
}

bool truncates(const WorldRunOptions& o) { return o.fault && o.fault->kind == WorldFault::Kind::truncate; }

/// 3. and 4. of a handshake run: the save world and the load worlds started together; beside them the handshake
/// plans each scenario as its ranks describe it, marks each checkpoint complete (the first one truncated under
/// that fault) and skips what a world that ended will never reach. `planned` gets the scenarios the worlds ran.
Result<WorldsRun> run_paired_worlds(const std::vector<WorldScenario>& scenarios, const WorldRunOptions& pair,
                                    std::vector<const WorldScenario*>& planned, WorldRunReport& report) {
  WorldHandshake handshake(scenarios, pair, report);
  IH_TRY_STATUS(handshake.start());
  const std::int64_t save_ranks = scenarios[0].save.ranks();
  pair.progress("save world: mpirun -np " + std::to_string(save_ranks) + " (" +
                (pair.device == Device::cpu ? "gloo" : "NCCL") +
                "), beside the load world; each rank describes the real model it builds, for its plan");
  auto save = std::async(std::launch::async, [&] { return run_world("save", save_ranks, pair); });
  std::vector<std::string> names;
  for (const WorldScenario& s : scenarios) names.push_back(s.name);
  WorldRunReport load_report;  // the load thread's own, merged after
  auto loads = std::async(std::launch::async, [&] { return run_load_worlds(scenarios, names, pair, load_report); });
  const auto ended = [](const auto& f) { return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready; };
  for (bool truncated = !truncates(pair);;) {
    const bool save_ended = ended(save), load_ended = ended(loads);  // before the ranks' files are read
    const auto saved = handshake.poll(read_rank_states(pair.work, "save", save_ranks), save_ended, load_ended);
    for (const std::string& name : saved) {
      if (!truncated) inject_truncation(name, pair), truncated = true;
      handshake.complete(name);
    }
    if (save_ended && load_ended && saved.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  IH_TRY_ASSIGN(save_world, save.get());
  IH_TRY_ASSIGN(load_worlds, loads.get());
  record_save_faults(save_world, pair, report);
  for (const WorldOutcome& load : load_worlds.worlds)  // a load world that died before any scenario: say how
    if (!load.timed_out && load.exit_code != 0 &&
        std::none_of(names.begin(), names.end(), [&](const std::string& n) { return started(load, n); }))
      report.faults.push_back("a load world ended (exit " + std::to_string(load.exit_code) +
                              ") before it started any scenario:\n" + load.stderr_tail);
  report.merge(std::move(load_report));
  planned = handshake.planned();
  return WorldsRun{std::move(save_world), std::move(load_worlds), handshake.loadable()};
}

/// A run whose real scenarios are planned in their own worlds (WorldRunOptions::plan_in_worlds).
Result<WorldRunReport> run_handshake_roundtrips(const std::vector<WorldScenario>& scenarios, const WorldRunOptions& o) {
  IH_TRY_STATUS(same_world_sizes(scenarios));
  for (const WorldScenario& s : scenarios)
    if (!s.is_real()) return make_error(ErrorKind::invalid_argument, s.name + " is no real scenario to plan in worlds");
  IH_TRY_ASSIGN(verifier, ensure_roundtrip_verifier(o.progress));
  WorldRunOptions pair = o;
  pair.world_timeout_s = 2 * o.world_timeout_s;  // one clock for the pair: each world waits for the other
  auto said = std::make_shared<std::mutex>();    // the worlds' lines come from their own threads
  pair.progress = [said, progress = o.progress](const std::string& line) {
    const std::lock_guard<std::mutex> lock(*said);
    progress(line);
  };
  WorldRunReport report;
  std::vector<const WorldScenario*> planned;
  IH_TRY_ASSIGN(run, run_paired_worlds(scenarios, pair, planned, report));
  std::map<std::string, ScenarioOutcome> out;
  for (const WorldScenario* s : planned) {
    (out[s->name] = outcome_before_running(*s)).device = o.device;
    (void)judge_save(s->name, run.save, pair, out[s->name]);  // the handshake marked the complete ones
  }
  IH_TRY_STATUS(report_scenarios(planned, run, verifier, o, out, report));
  return report;
}

}  // namespace

std::optional<ScenarioOutcome> plan_world_scenario(const WorldScenario& s, const WorldRunOptions& o,
                                                   const RealModelEntries& entries) {
  auto st = write_world_scenario(s, o.work / scenario_dir(s.name), entries);
  if (!st.ok()) {
    ScenarioOutcome r = unplanned_outcome(s, st.error(), o.device);
    o.progress(std::string(to_string(r.outcome)) + " " + s.name + ": " + r.problems[0]);
    return r;
  }
  o.progress(s.name + ": " + s.description + "; save " + s.layout_text(true) + ", load " + s.layout_text(false) + "; " +
             std::to_string(st->gpt_keys) + " keys saved, " + std::to_string(st->saved_elements) + " elements saved, " +
             std::to_string(st->expected_elements) + " expected on the load ranks");
  return std::nullopt;
}

Result<WorldRunReport> run_world_roundtrips(const std::vector<WorldScenario>& all, const WorldRunOptions& o) {
  if (all.empty()) return make_error(ErrorKind::invalid_argument, "no scenario to run");
  std::error_code ec;
  fs::create_directories(o.work, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + o.work.string() + ": " + ec.message());
  if (o.plan_in_worlds) return run_handshake_roundtrips(all, o);
  WorldRunReport report;
  IH_TRY_ASSIGN(planned, plan_scenarios(all, o, report.scenarios));
  if (planned.empty()) return report;  // every scenario judged at its plan
  std::vector<WorldScenario> scenarios;
  for (const WorldScenario* s : planned) scenarios.push_back(*s);
  // 2. The verifier (built on first use) before any world starts.
  IH_TRY_ASSIGN(verifier, ensure_roundtrip_verifier(o.progress));
  std::map<std::string, ScenarioOutcome> out;
  for (const WorldScenario& s : scenarios) (out[s.name] = outcome_before_running(s)).device = o.device;

  // 3. The save world.
  const std::int64_t save_ranks = scenarios[0].save.ranks();
  o.progress("save world: mpirun -np " + std::to_string(save_ranks) + " (" +
             (o.device == Device::cpu ? "gloo" : "NCCL") + "; importing Megatron takes ~15 s per rank)");
  WorldsRun run;
  IH_TRY_ASSIGN(save, run_world("save", save_ranks, o));
  run.save = std::move(save);
  for (const WorldScenario& s : scenarios) {
    if (!judge_save(s.name, run.save, o, out[s.name])) continue;
    std::ofstream(o.work / scenario_dir(s.name) / kCheckpointCompleteMarker)
        << "saved by all " << save_ranks << " ranks\n";
    run.loadable.push_back(s.name);
  }
  record_save_faults(run.save, o, report);

  // 4. Faults that damage a complete checkpoint, then the load world on what is loadable.
  if (truncates(o) && !run.loadable.empty()) inject_truncation(run.loadable[0], o);
  if (!run.loadable.empty()) {
    IH_TRY_ASSIGN(loads, run_load_worlds(scenarios, run.loadable, o, report));
    run.loads = std::move(loads);
  }
  std::vector<const WorldScenario*> ran;
  for (const WorldScenario& s : scenarios) ran.push_back(&s);
  IH_TRY_STATUS(report_scenarios(ran, run, verifier, o, out, report));
  return report;
}

}  // namespace ih
