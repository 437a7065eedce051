// One round-trip session (docs/roundtrip.md), what `interop-harness roundtrip` and the gate's real tier both run:
// describe (the real scenarios' worlds describe the models they build, world_handshake.h; a cross-version session
// or one with a mutant asks a Megatron adapter for each rank's model entries instead), plan, run the worlds,
// verify, report. The command line and the gate only choose the scenarios and the options, and print or judge
// the report.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "harness/process/work_folder.h"
#include "harness/roundtrip/world_run.h"
#include "seam/implementation.h"

namespace ih {

/// Starts an adapter of the Megatron at `checkout` (nullopt: the installed package) that describes real models
/// for the plans (its model_state_dict seam operation); harness/targets hands one in.
using DescriberStart =
    std::function<Result<std::unique_ptr<Implementation>>(const std::optional<std::string>& checkout)>;

struct RoundTripSessionOptions {
  /// How the worlds run: device, mutant, fault, python, timeout, progress, and the work folder, under which each
  /// group of scenarios gets its own (gpt/, gtp/, real/). The synthetic GPT -> hybrid scenarios run on
  /// `worlds.megatron_path` (nullopt: the installed megatron-core).
  WorldRunOptions worlds;
  /// Where the GDP/GTP and the real scenarios' Megatron comes from when `worlds.megatron_path` names none: the
  /// Megatron-LM snapshot of ci/megatron-snapshot.sh, extracted if need be (`roundtrip`; without it those
  /// scenarios are not run), or else the installed package as given (the gate: its target's Megatron).
  bool find_snapshot = true;
  /// The real scenarios' describer where their worlds do not describe them (a cross-version session, a mutant);
  /// unset there: a real scenario is a harness error.
  DescriberStart start_describer;
  /// A cross-version round trip: the real scenarios' load world imports this Megatron tree, their save world the
  /// session's (docs/roundtrip.md, "Cross-version round trips"). Both trees describe every rank's model; the plan
  /// is the save tree's, and where the load tree describes a model otherwise the scenario says so.
  std::optional<std::string> load_megatron_path;
};

/// Runs `scenarios` (all of the same world sizes), each group in its own pair of worlds on its own Megatron. The
/// real ones are planned from what each rank's model is described as (by its world's rank, or the describer): one
/// that cannot be described is not run (unsupported) or ends alone with its own outcome. The report holds the
/// scenarios' outcomes (those that ended before their worlds first) and the ones not run with the reason; every other
/// scenario's line is in the progress. Errors: harness_error when nothing could run (no Megatron-LM checkout for any
/// scenario) or the describer did not start, and a world run's own errors.
Result<WorldRunReport> run_roundtrip_session(std::vector<WorldScenario> scenarios,
                                             const RoundTripSessionOptions& options);

/// Real scenarios split by what the target can describe: every save and load rank of each is asked up front,
/// so one the target answers "unsupported" for (GDP mixers where Megatron has none) is not run, with the
/// reason; one whose description failed otherwise ends on its own (`undescribed`: failed when Megatron
/// raised describing its own model, which is a finding, no verdict when the harness broke or ran out of
/// time), and the rest run. `describe` keeps the target's answers for the plan, which asks again.
struct BuildableRealScenarios {
  std::vector<WorldScenario> runnable;
  std::vector<std::pair<std::string, std::string>> not_run;  // name, why
  std::vector<ScenarioOutcome> undescribed;
  RealModelEntries describe;
};
BuildableRealScenarios buildable_real_scenarios(std::vector<WorldScenario> scenarios, const RealModelEntries& describe);
/// The scenarios `split` ends before they run, into `report`: each one not run with its reason (`prefix` before
/// it), said in the progress, and each undescribed one's outcome.
void report_unbuildable(BuildableRealScenarios& split, const WorldRunOptions& o, WorldRunReport& report,
                        const std::string& prefix = "");

}  // namespace ih
