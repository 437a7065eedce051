// The gate's real round trips (group real-roundtrips): harness/roundtrip's session for the target's Megatron,
// one batch of worlds per direction (or per scenario, for a replayed token), each scenario's outcome handed to
// its check.
#include <map>
#include <memory>
#include <optional>
#include <tuple>

#include "harness/coverage/coverage_context.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/roundtrip/roundtrip_session.h"
#include "harness/targets/targets.h"

namespace ih {
namespace {

using Outcomes = std::map<std::string, gate::RealRoundTripResult>;

/// One direction in the gate (each costs a pair of worlds, minutes on 2 cores, in every Megatron gate and
/// per real-tier mutant); 2 -> 4 runs in ctest roundtrip_real_2_to_4 and with roundtrip --real.
constexpr std::pair<std::int64_t, std::int64_t> kGateDirections[] = {{4, 2}};

/// The session options of a gate's batch: the target's Megatron and mutant, a described plan.
/// `check`: the name of each scenario's check, `{scenario}` in place of the scenario: with coverage on, each rank
/// records each scenario under its own check (one world runs a whole direction).
RoundTripSessionOptions session_options(const TargetSpec& spec, const std::filesystem::path& work,
                                        const std::string& check, std::ostream& progress) {
  RoundTripSessionOptions o;
  o.worlds.environment = coverage::rank_environment(check);
  o.worlds.python = default_megatron_python();
  o.worlds.megatron_path = spec.megatron_path;
  o.worlds.mutant = spec.mutant;
  o.worlds.work = work;
  // One world runs every scenario of a direction (the training path imports megatron.training too): on
  // a loaded 2-core machine 300 s was seen to run out, on a quiet one a world takes 40-90 s.
  o.worlds.world_timeout_s = 900;
  o.worlds.progress = [&progress](const std::string& line) {
    if (line.rfind("  [", 0) != 0) progress << "INFO: real round trips: " << line << "\n" << std::flush;
  };
  o.find_snapshot = false;  // the target's Megatron, as given
  // A reply limit a loaded machine's model builds fit (the target's 60 s ran out at load average ~360 while it
  // described a pipeline stage).
  o.start_describer = [spec](const std::optional<std::string>& checkout) {
    TargetSpec describer = spec;
    describer.megatron_path = checkout;
    return start_megatron_describer(describer, std::nullopt, std::chrono::seconds(300));
  };
  return o;
}

/// Each scenario's result of a session's report; a fault of the run stands beside every scenario without a pass.
Outcomes outcomes_of(const WorldRunReport& report) {
  Outcomes out;
  for (const auto& [name, why] : report.not_run) out[name] = {Outcome::not_run, 0, 0, 0, {why}};
  for (const ScenarioOutcome& s : report.scenarios)
    out[s.name] = {s.outcome, s.elements_verified, s.wrong_elements, s.stored_wrong, s.problems, s.refused_in};
  for (const std::string& fault : report.faults)
    for (auto& [name, r] : out)
      if (r.outcome != Outcome::passed && r.outcome != Outcome::not_run) r.problems.push_back(fault);
  return out;
}

/// The session options of a cross-version batch: saved by one tree, loaded by the other, no mutant.
RoundTripSessionOptions cross_options(const TargetSpec& spec, CrossVersion cross, const std::filesystem::path& work,
                                      const std::string& check, std::ostream& progress) {
  TargetSpec plain = spec;
  plain.mutant.reset();
  RoundTripSessionOptions o = session_options(plain, work, check, progress);
  const bool base_first = cross == CrossVersion::base_to_new;
  o.worlds.megatron_path = base_first ? spec.base_megatron_path : spec.megatron_path;
  o.load_megatron_path = base_first ? spec.megatron_path : spec.base_megatron_path;
  return o;
}

/// The gate check's name of a scenario's round trip in this direction (`{scenario}`: the pattern coverage names).
std::string check_of(const std::string& scenario, std::int64_t a, std::int64_t b, std::optional<CrossVersion> cross) {
  return cross ? gate_check_name(gate::kRealRoundTripCrossGroup,
                                 gate::real_roundtrip_cross_check(*cross == CrossVersion::base_to_new, scenario, a, b))
               : gate_check_name(gate::kRealRoundTripGroup, gate::real_roundtrip_check(scenario, a, b));
}

Result<Outcomes> run_batch(const TargetSpec& spec, const std::vector<std::string>& names, std::int64_t a,
                           std::int64_t b, std::ostream& progress, std::optional<CrossVersion> cross) {
  if (cross && (!spec.megatron_path || !spec.base_megatron_path))
    return make_error(seam_kind::harness_error, "a cross-version round trip needs both Megatron-LM trees");
  std::vector<WorldScenario> scenarios;
  for (const std::string& name : names) {
    IH_TRY_ASSIGN(s, make_world_scenario(name, a, b));
    scenarios.push_back(std::move(s));
  }
  IH_TRY_ASSIGN(work, WorkFolder::make(std::nullopt, "interop-harness-real"));
  const std::string check = check_of("{scenario}", a, b, cross);
  IH_TRY_ASSIGN(report, run_roundtrip_session(std::move(scenarios),
                                              cross ? cross_options(spec, *cross, work.path(), check, progress)
                                                    : session_options(spec, work.path(), check, progress)));
  return outcomes_of(report);
}

/// The batches one runner ran, by (save ranks, load ranks, scenario: empty for a whole direction).
struct RealRoundTrips {
  TargetSpec spec;
  std::ostream* progress = nullptr;
  RealRoundTripBatch batch = RealRoundTripBatch::by_direction;
  std::optional<CrossVersion> cross;
  SelectedChecks selected;
  std::map<std::tuple<std::int64_t, std::int64_t, std::string>, Result<Outcomes>> batches;

  const Result<Outcomes>& batch_of(const std::string& scenario, std::int64_t a, std::int64_t b) {
    const bool whole = batch == RealRoundTripBatch::by_direction;
    const auto key = std::make_tuple(a, b, whole ? std::string() : scenario);
    auto it = batches.find(key);
    if (it == batches.end())
      it = batches
               .emplace(key, run_batch(spec, whole ? direction_scenarios(a, b, cross, selected) : std::vector{scenario},
                                       a, b, *progress, cross))
               .first;
    return it->second;
  }
};

}  // namespace

std::vector<std::string> gate_real_scenarios() { return gate_real_scenario_names(); }

std::vector<std::string> gate_cross_scenarios() { return real_world_scenario_names(); }

std::vector<std::pair<std::int64_t, std::int64_t>> gate_real_directions() {
  return {std::begin(kGateDirections), std::end(kGateDirections)};
}

std::vector<std::string> direction_scenarios(std::int64_t save_ranks, std::int64_t load_ranks,
                                             std::optional<CrossVersion> cross, const SelectedChecks& selected) {
  std::vector<std::string> out;
  for (const std::string& s : cross ? gate_cross_scenarios() : gate_real_scenarios())
    if (!selected || selected->count(check_of(s, save_ranks, load_ranks, cross))) out.push_back(s);
  return out;
}

namespace {

gate::RealRoundTripRunner runner_of(std::shared_ptr<RealRoundTrips> runs) {
  return [runs](Implementation&, const std::string& scenario, std::int64_t a,
                std::int64_t b) -> Result<gate::RealRoundTripResult> {
    const Result<Outcomes>& outcomes = runs->batch_of(scenario, a, b);
    if (!outcomes.ok()) return outcomes.error();
    const auto found = outcomes->find(scenario);
    if (found == outcomes->end())
      return make_error(seam_kind::harness_error, "the real round-trip batch has no outcome for " + scenario);
    return found->second;
  };
}

}  // namespace

gate::RealRoundTripRunner real_roundtrip_runner(const TargetSpec& spec, std::ostream& progress,
                                                RealRoundTripBatch batch, SelectedChecks selected) {
  auto runs = std::make_shared<RealRoundTrips>();
  runs->spec = spec, runs->progress = &progress, runs->batch = batch, runs->selected = std::move(selected);
  return runner_of(std::move(runs));
}

gate::RealRoundTripRunner cross_version_runner(const TargetSpec& spec, std::ostream& progress, CrossVersion cross,
                                               RealRoundTripBatch batch, SelectedChecks selected) {
  auto runs = std::make_shared<RealRoundTrips>();
  runs->spec = spec, runs->progress = &progress, runs->cross = cross, runs->batch = batch;
  runs->selected = std::move(selected);
  return runner_of(std::move(runs));
}

}  // namespace ih
