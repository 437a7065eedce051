#include "harness/cli/real_roundtrips.h"

#include <stdlib.h>

#include <filesystem>
#include <map>
#include <memory>

#include "harness/megatron/megatron_implementation.h"
#include "harness/process/run_scope.h"
#include "harness/roundtrip/world_run.h"

namespace ih::cli {

std::vector<std::string> gate_real_scenarios() {
  std::vector<std::string> names = real_world_scenario_names();
  for (const std::string& name : real_finding_scenario_names()) names.push_back(name);
  return names;
}
// One direction in the gate (each costs a pair of worlds, minutes on 2 cores, in every Megatron gate and
// per real-tier mutant); 2 -> 4 runs in ctest roundtrip_real_2_to_4 and with roundtrip --real.
std::vector<std::pair<std::int64_t, std::int64_t>> gate_real_directions() { return {{4, 2}}; }

namespace {

/// The runs of one gate: batches by direction, and the unmutated describer when there is a mutant.
struct RealRoundTrips {
  TargetSpec spec;
  std::ostream* progress = nullptr;
  std::unique_ptr<MegatronImplementation> clean;
  std::map<std::pair<std::int64_t, std::int64_t>, Result<std::map<std::string, gate::RealRoundTripResult>>> batches;

  /// An adapter of its own, unmutated, with a reply limit a loaded machine's model builds fit (the target's
  /// 60 s ran out at load average ~360 while it described a pipeline stage).
  Result<Implementation*> describer() {
    if (!clean) {
      MegatronOptions options = megatron_options(spec);
      options.mutant.reset();
      options.reply_timeout = std::chrono::seconds(300);
      IH_TRY_ASSIGN(started, MegatronImplementation::start(options));
      clean = std::move(started);
    }
    return clean.get();
  }

  Result<std::map<std::string, gate::RealRoundTripResult>> run_batch(std::int64_t a, std::int64_t b) {
    IH_TRY_ASSIGN(describe, describer());
    std::vector<WorldScenario> all;
    for (const std::string& name : gate_real_scenarios()) {
      IH_TRY_ASSIGN(s, make_world_scenario(name, a, b));
      all.push_back(std::move(s));
    }
    BuildableRealScenarios split = buildable_real_scenarios(
        std::move(all),
        [describe](const ModelDumpSpec& m, std::int64_t rank) { return describe->model_state_dict(m, rank); });
    std::map<std::string, gate::RealRoundTripResult> out_map;
    for (const auto& [name, why] : split.not_run) out_map[name] = {Outcome::not_run, 0, 0, {why}};
    for (const ScenarioOutcome& s : split.undescribed) out_map[s.name] = {s.outcome, 0, 0, s.problems};
    if (split.runnable.empty()) return out_map;
    std::string dir = temp_dir() + "/interop-harness-real-XXXXXX";
    if (!mkdtemp(dir.data())) return make_error(seam_kind::harness_error, "cannot create a temporary directory");
    WorldRunOptions o;
    o.python = default_megatron_python();
    o.megatron_path = spec.megatron_path;
    o.mutant = spec.mutant;
    o.work = dir;
    // One world runs every scenario of a direction (the training path imports megatron.training too): on
    // a loaded 2-core machine 300 s was seen to run out, on a quiet one a world takes 40-90 s.
    o.world_timeout_s = 900;
    o.real_entries = split.describe;
    std::ostream& out = *progress;
    o.progress = [&out](const std::string& line) {
      if (line.rfind("  [", 0) != 0) out << "INFO: real round trips: " << line << "\n" << std::flush;
    };
    auto report = run_world_roundtrips(split.runnable, o);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    if (!report.ok()) return report.error();
    for (const ScenarioOutcome& s : report->scenarios)
      out_map[s.name] = {s.outcome, s.elements_verified, s.wrong_elements, s.problems, s.refused_in};
    for (const std::string& fault : report->faults)
      for (auto& [name, r] : out_map)
        if (r.outcome != Outcome::passed && r.outcome != Outcome::not_run) r.problems.push_back(fault);
    return out_map;
  }
};

}  // namespace

gate::RealRoundTripRunner real_roundtrip_runner(const TargetSpec& spec, std::ostream& progress) {
  auto runs = std::make_shared<RealRoundTrips>();
  runs->spec = spec;
  runs->progress = &progress;
  return [runs](Implementation&, const std::string& scenario, std::int64_t a,
                std::int64_t b) -> Result<gate::RealRoundTripResult> {
    auto it = runs->batches.find({a, b});
    if (it == runs->batches.end()) it = runs->batches.emplace(std::pair{a, b}, runs->run_batch(a, b)).first;
    if (!it->second.ok()) return it->second.error();
    const auto found = it->second->find(scenario);
    if (found == it->second->end())
      return make_error(seam_kind::harness_error, "the real round-trip batch has no outcome for " + scenario);
    return found->second;
  };
}

}  // namespace ih::cli
