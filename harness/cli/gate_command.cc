// `interop-harness gate` and `repro`: the checks against a target (with a base: the change first), and the
// one-command replay of a single failing check or property case.
#include <algorithm>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <set>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/gate_base.h"
#include "harness/cli/gate_checks.h"
#include "harness/cli/gate_coverage.h"
#include "harness/cli/output_places.h"
#include "harness/gate/gate.h"
#include "harness/install/data_dir.h"
#include "harness/report/gate_report.h"
#include "harness/targets/targets.h"
#include "models/text.h"
#include "mutants/mutant_implementation.h"
#include "properties/suite.h"
#include "seam/reference_implementation.h"

namespace ih::cli {
namespace {

struct GateOptions : TargetOptions, BaseFlags {
  bool require_all = false, json = false, list_mutants = false, coverage = false, require_changed_lines_run = false;
  std::optional<std::string> allow_not_run, report, base_megatron_path, checks_from;
};

const std::vector<Flag<GateOptions>> kGateFlags = [] {
  using G = GateOptions;
  std::vector<Flag<G>> flags = target_flags<G>();
  flags.insert(
      flags.end(),
      {{"seed", &G::seed, "RapidCheck seed of the property checks (default 1)", 0,
        std::numeric_limits<std::int64_t>::max()},
       property_cases_flag<G>(),
       model_dumps_flag<G>(),
       {"require-all", &G::require_all, "a check that does not run fails the gate (CI)"},
       {"allow-not-run", &G::allow_not_run,
        "with --require-all: comma-separated parts of a check name or NOT RUN reason"},
       {"report", &G::report, "write junit.xml, report.json and summary.md into this folder"},
       {"json", &G::json, "print the JSON report on stdout (progress goes to stderr)"},
       {"list-mutants", &G::list_mutants, "list the target's planted mutants with their bug classes"},
       {"base-megatron-path", &G::base_megatron_path,
        "megatron: gate this Megatron-LM tree too, as the base of the change, and print the change first; every "
        "real scenario also runs saved by BASE, loaded by NEW and saved by NEW, loaded by BASE (group "
        "real-roundtrip-cross); coverage is on and the change's lines no check ran are reported"},
       {"base-ref", &G::base_ref,
        "megatron: the base is this revision of the --megatron-path git checkout (a temporary worktree)"},
       {"base-without-mutant", &G::base_without_mutant,
        "the base is the same target without --mutant (the change is the planted mutant; without one, none)"},
       {"base-cache", &G::base_cache,
        "where a base's verdicts are cached by its tree's content hash (default "
        "~/.cache/interop-harness/gate-base)"},
       {"no-base-cache", &G::no_base_cache, "gate the base again, neither reading nor writing the cache"},
       {"coverage", &G::coverage,
        "megatron: record which lines of the --megatron-path tree every check ran (coverage.py); report the "
        "checkpoint path's functions never run (with --report: DIR/coverage/)"},
       {"require-changed-lines-run", &G::require_changed_lines_run,
        "with --base-megatron-path: a changed line no check ran fails the gate"},
       {"checks-from", &G::checks_from,
        "internal (mutate): run only the checks this file names, one name (gate/<group>/<name>) a line"}});
  return flags;
}();

struct ReproOptions : GivenFlags {
  std::optional<std::string> megatron_path;
};

const std::vector<Flag<ReproOptions>> kReproFlags = {
    {"megatron-path", &ReproOptions::megatron_path,
     "replay a megatron token against this Megatron-LM checkout (the token's path is a hint)"}};

/// With --require-all, a check that did not run is a failure unless its name is allowed.
void require_all(std::vector<gate::CheckResult>& results, const std::string& allowed) {
  const auto parts = allowed.empty() ? std::vector<std::string>{} : split(allowed, ',');
  for (gate::CheckResult& r : results) {
    if (r.answer.outcome != Outcome::not_run) continue;
    bool allow = false;
    for (const std::string& part : parts)
      allow = allow || (!part.empty() && (r.token.check.find(part) != std::string::npos ||
                                          r.answer.detail.find(part) != std::string::npos));
    if (allow) continue;
    r.answer.outcome = Outcome::failed;
    r.answer.detail = "--require-all: did not run (" + r.answer.detail + ")";
    r.never_ran = true;
  }
}

/// `--list-mutants`: one line per mutant, or with --json {"mutants": [{"name", "bug_class", "description"}]}.
int list_mutants(const TargetSpec& spec, bool as_json) {
  json::Json listed_json{{"mutants", json::Json::array()}};
  const auto add = [&](const std::string& name, const json::Json& bug_class, const std::string& bug_class_text,
                       const std::string& description) {
    if (as_json)
      listed_json["mutants"].push_back({{"name", name}, {"bug_class", bug_class}, {"description", description}});
    else
      std::cout << name << "\t" << bug_class_text << "\t" << description << "\n";
  };
  if (spec.target == TargetKind::reference) {
    for (const MutantInfo& m : mutant_catalogue()) add(m.name, m.bug_class, m.bug_class, m.description);
  } else {
    auto listed = list_megatron_mutants(spec);
    if (!listed.ok()) return report_error(listed.error());
    for (const MegatronMutant& m : *listed) add(m.name, m.bug_class, json::dump(m.bug_class), m.description);
  }
  if (as_json) std::cout << json::dump(listed_json) << "\n";
  return kExitOk;
}

/// The check names the file `list` holds (one a line: names hold commas); none without a list. An unreadable
/// list is invalid_argument.
Result<SelectedChecks> check_list(const std::optional<std::string>& list) {
  if (!list) return SelectedChecks();
  std::ifstream in(*list);
  if (!in) return make_error(ErrorKind::invalid_argument, "--checks-from " + *list + ": cannot be read");
  std::set<std::string> names;
  for (std::string name; std::getline(in, name);)
    if (!name.empty()) names.insert(name);
  return SelectedChecks(std::move(names));
}

/// The checks named in `wanted`, in the gate's order; a name of no check is invalid_argument (a stale list must not
/// pass by running nothing).
Result<std::vector<gate::Check>> only_named_checks(std::vector<gate::Check> checks, std::set<std::string> wanted) {
  std::vector<gate::Check> kept;
  for (gate::Check& check : checks)
    if (wanted.erase(check.check_name())) kept.push_back(std::move(check));
  if (!wanted.empty())
    return make_error(ErrorKind::invalid_argument, "--checks-from: no gate check is called '" + *wanted.begin() + "'");
  return kept;
}

std::vector<Outcome> outcomes_of(const std::vector<gate::CheckResult>& results) {
  std::vector<Outcome> out;
  for (const auto& r : results) out.push_back(r.answer.outcome);
  return out;
}

}  // namespace

namespace {

/// One side of a gate run: its target (kept for the report's pictures), run header and results.
struct SideRun {
  std::unique_ptr<Implementation> target;
  report::GateRun run;
  std::vector<gate::CheckResult> results;
};

/// A side whose Megatron does not import (its own module raised): gate/megatron/imports FAILED with why, every check
/// NOT RUN, a verdict on Megatron (exit 1), not on the harness.
SideRun side_without_target(const TargetSpec& spec, const Budget& budget, const GateOptions& args,
                            const std::vector<gate::Check>& checks, const std::string& why, std::ostream& progress) {
  report::GateRun run{
      "megatron at " + spec.megatron_path.value_or("the installed megatron-core") + " (does not import)",
      budget.seed,
      budget.property_cases,
      args.require_all,
      0,
      {}};
  progress << "INFO: gate target " << run.target << "\nINFO: megatron: imports ... FAILED: " << why << "\n";
  auto results = gate::results_without_target(checks, base_token(spec, budget, args), why);
  if (run.require_all) require_all(results, args.allow_not_run.value_or(""));
  run.exit_code = exit_code_of(outcomes_of(results));
  return SideRun{std::make_unique<ReferenceImplementation>(), std::move(run), std::move(results)};
}

/// Runs the gate's checks against `spec`, its target line and budget first. Bad checks are invalid_argument; a
/// target that cannot start keeps its own kind, but one whose Megatron does not import is judged (above).
Result<SideRun> run_side(const TargetSpec& spec, const GateOptions& args, const gate::KnownFindings& known,
                         std::ostream& progress, bool name_coverage_contexts = false) {
  const Budget budget = budget_of(args, spec);
  IH_TRY_ASSIGN(selected, check_list(args.checks_from));
  constexpr RealRoundTripBatch kBatch = RealRoundTripBatch::by_direction;
  auto checks =
      all_checks(budget, spec.target != TargetKind::reference, real_roundtrip_runner(spec, progress, kBatch, selected),
                 cross_runners_of(spec, progress, kBatch, selected));  // NEW's side only
  if (checks.ok() && selected) checks = only_named_checks(std::move(*checks), *selected);
  if (!checks.ok()) return Error{ErrorKind::invalid_argument, checks.error().message};
  auto started = make_target(spec);
  if (!started.ok() && started.error().kind == seam_kind::does_not_import)
    return side_without_target(spec, budget, args, *checks, started.error().message, progress);
  if (!started.ok()) return started.error();
  std::unique_ptr<Implementation> target = std::move(*started);
  report::GateRun run{describe_target(*target, spec), budget.seed, budget.property_cases, args.require_all, 0, {}};
  progress << "INFO: gate target " << run.target << "\n"
           << "INFO: seed " << run.seed << ", " << run.property_cases << " cases per property, " << checks->size()
           << " checks" << (run.require_all ? ", every check required to run" : "") << "\n";
  ReproToken base = base_token(spec, budget, args);
  add_target_identity(base, *target);
  auto results =
      gate::run_checks(*target, *checks, base, known, progress,
                       name_coverage_contexts ? name_coverage_context : std::function<void(const gate::Check&)>());
  for (gate::CheckResult& r : results)  // a cross-version check replays across the same base tree
    if (r.group == gate::kRealRoundTripCrossGroup) add_base_tree(r.token, spec);
  if (run.require_all) require_all(results, args.allow_not_run.value_or(""));
  run.exit_code = exit_code_of(outcomes_of(results));
  return SideRun{std::move(target), std::move(run), std::move(results)};
}

/// Reads a side's coverage once every Megatron process of it ended (its adapter stopped); a failing check's picture
/// then asks a fresh adapter, and a report without pictures asks nothing.
Status finish_side_coverage(const GateCoverage& coverage, const TargetSpec& spec, const GateOptions& args,
                            SideRun& side, std::ostream& progress) {
  side.target.reset();
  IH_TRY_STATUS(finish_gate_coverage(coverage, side.run, progress));
  if (args.report && report::draws_pictures(side.results)) {
    IH_TRY_ASSIGN(target, make_target(spec));
    side.target = std::move(target);
  } else {
    side.target = std::make_unique<ReferenceImplementation>();
  }
  return Ok{};
}

/// The gate options that change a base's checks or their verdicts (its cache key): the token's options without
/// the tree's path, and --require-all with what it allows.
std::string base_cache_options(const GateOptions& args, const TargetSpec& base) {
  ReproToken token = base_token(base, budget_of(args, base), args);
  token.options.erase("megatron-path");
  if (args.require_all) token.options["require-all"] = args.allow_not_run.value_or("");
  return to_string(token);
}

/// The base's verdicts (nullopt without one), gated first in this process or read from the cache.
Result<std::optional<BaseVerdicts>> gate_base_of(const BasePlan* plan, const GateOptions& args,
                                                 const gate::KnownFindings& known, std::ostream& progress) {
  if (!plan) return std::optional<BaseVerdicts>();
  const GateSideRunner run = [&](const TargetSpec& spec, std::ostream& out) -> Result<BaseVerdicts> {
    IH_TRY_ASSIGN(side, run_side(spec, args, known, out));
    return BaseVerdicts{side.run.target, side.run.exit_code, std::move(side.results), "", false};
  };
  IH_TRY_ASSIGN(base, base_verdicts(*plan, args, budget_of(args, plan->spec).corpus,
                                    base_cache_options(args, plan->spec), run, progress));
  progress << "INFO: base: " << gate::verdict_line(base.exit_code, base.results) << "\nINFO: gating the change\n";
  return std::optional<BaseVerdicts>(std::move(base));
}

/// The reports and the console's end of a run: the change first (with a base), the table, the REPRO lines, the
/// verdict line.
int finish_gate(const GateOptions& args, SideRun& side, std::ostream& progress) {
  const report::GateRun& run = side.run;
  // A report that cannot be written still leaves the console verdict below; the exit says it was lost.
  const Status written =
      args.report ? report::write_gate_reports(*args.report, run, side.results, *side.target) : Status(Ok{});
  progress << "\n";
  if (run.base) progress << gate::change_section(run.base->target, run.base->delta) << "\n";
  progress << gate::summary_table(side.results);
  for (const gate::CheckResult& r : side.results)
    if (gate::has_repro(r) && r.answer.outcome != Outcome::known_finding)
      progress << "REPRO: interop-harness repro " << to_string(r.token) << "\n";
  progress << report::verdict_line(run, side.results) << "\n";
  if (args.json) std::cout << report::gate_json(run, side.results);
  if (!written.ok()) return report_error(written.error(), kExitHarnessError);
  return run.exit_code;
}

}  // namespace

int gate_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv,
                                 "interop-harness gate [--target reference|megatron] [--megatron-path DIR] [--mutant "
                                 "M] [--candidate shard-split] [--fix to_state_dict_order] [--report DIR] "
                                 "[--base-megatron-path DIR | --base-ref REF | --base-without-mutant]",
                                 kGateFlags, exit_code);
  if (!args) return exit_code;
  auto spec = spec_of(*args);
  if (!spec.ok()) return report_error(spec.error(), kExitBadInput);
  spec->base_megatron_path = args->base_megatron_path;
  if (args->list_mutants) return list_mutants(*spec, args->json);
  // The properties' seed and budget are the gate's flags (its tokens carry them); RC_PARAMS's other settings apply.
  if (const auto rc = props::rc_params(); !rc.ok()) return report_error(rc.error(), kExitBadInput);
  auto plan = base_plan_of(*spec, *args);  // a bad base is refused before anything runs
  if (!plan.ok()) return report_error(plan.error(), kExitBadInput);
  // The report folder is checked (and cleared of an earlier run's files) before the checks run.
  if (args->report) {
    const Status ready = prepare_output_folder("report", *args->report, report::is_gate_report_file);
    if (!ready.ok()) return report_error(ready.error(), kExitBadInput);
  }
  std::ostream& progress = args->json ? std::cerr : std::cout;
  // A --base-ref worktree lives until the gate ends: NEW's cross-version round trips and changed lines read it.
  std::unique_ptr<BaseWorktree> worktree;
  if (*plan) {
    auto made = check_out_base(**plan, progress);
    if (!made.ok()) return report_error(made.error());
    worktree = std::move(*made);
  }
  // Cross-version tokens carry the base tree by its absolute path (validated in the plan, or the worktree's).
  if (*plan && (spec->base_megatron_path || (*plan)->commit)) spec->base_megatron_path = (*plan)->spec.megatron_path;
  const auto measured = plan_gate_coverage(args->coverage, args->require_changed_lines_run, *spec, args->report);
  if (!measured.ok()) return report_error(measured.error(), kExitBadInput);
  auto known = gate::load_known_findings(budget_of(*args, *spec).corpus);
  if (!known.ok()) return report_error(known.error(), kExitBadInput);
  auto base = gate_base_of(plan->has_value() ? &**plan : nullptr, *args, *known, progress);
  if (!base.ok()) return report_error(base.error());
  if (*measured) start_gate_coverage(**measured);
  auto side = run_side(*spec, *args, *known, progress, measured->has_value());
  if (!side.ok()) return report_error(side.error());
  if (*base) {
    const BaseVerdicts& b = **base;
    const auto delta = gate::gate_delta(b.results, side->results);
    side->run.base =
        report::BaseRun{b.target, b.exit_code, gate::verdict_counts(b.results), b.tree_hash, b.from_cache, delta};
    side->run.exit_code = gate::exit_with_delta(side->run.exit_code, delta);
  }
  if (*measured)
    if (const Status read = finish_side_coverage(**measured, *spec, *args, *side, progress); !read.ok())
      return report_error(read.error());
  return finish_gate(*args, *side, progress);
}

namespace {

/// Replays one gate check (not a property case) named by `token`.
int replay_gate_check(const ReproToken& token, const std::optional<std::string>& megatron_path) {
  const auto replayed = replay_target_of(token, megatron_path, std::cout);
  if (!replayed.ok()) return report_error(replayed.error(), kExitBadInput);
  const TargetSpec& spec = *replayed;
  Budget budget;
  const auto seed = parse_int(token.option("seed").value_or("1"));
  const auto cases = parse_int(token.option("cases").value_or(spec.target == TargetKind::reference ? "25" : "5"));
  const auto dumps = parse_int(token.option("model-dumps").value_or(std::to_string(gate::kGeneratedModelDumps)));
  if (!seed.ok() || !cases.ok() || !dumps.ok() || *seed < 0 || *cases < 1 || *cases > kMaxPropertyCases || *dumps < 0 ||
      *dumps > kMaxModelDumps)
    return report_error(make_error(ErrorKind::invalid_argument, "token has a bad seed, cases or model-dumps option"),
                        kExitBadInput);
  budget.seed = static_cast<std::uint64_t>(*seed), budget.property_cases = *cases, budget.model_dumps = *dumps;
  budget.corpus = token.option("corpus").value_or(install::corpus_dir().string());
  auto checks = all_checks(budget, spec.target != TargetKind::reference,
                           real_roundtrip_runner(spec, std::cout, RealRoundTripBatch::by_scenario),
                           cross_runners_of(spec, std::cout, RealRoundTripBatch::by_scenario));
  if (!checks.ok()) return report_error(checks.error(), kExitBadInput);
  const auto found =
      std::find_if(checks->begin(), checks->end(), [&](const gate::Check& c) { return c.check_name() == token.check; });
  if (found == checks->end())
    return report_error(make_error(ErrorKind::invalid_argument,
                                   "stale token: no gate check is called '" + token.check + "' (renamed or removed)"),
                        kExitBadInput);
  auto target = make_target(spec);
  if (!target.ok()) return report_error(target.error());
  auto known = gate::load_known_findings(budget.corpus);
  if (!known.ok()) return report_error(known.error(), kExitBadInput);
  std::cout << "target:   " << describe_target(**target, spec) << "\n";
  warn_if_other_megatron(token, **target, std::cout);
  const auto results = gate::run_checks(**target, {*found}, token, *known, std::cout);
  std::cout << gate::summary_table(results);
  return exit_code_of(outcomes_of(results));
}

}  // namespace

int replay_token(const ReproToken& token, const std::optional<std::string>& megatron_path) {
  if (token.check.rfind("property/", 0) == 0) return property_repro_command(token, megatron_path);
  return replay_gate_check(token, megatron_path);
}

int repro_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(
      argv, "interop-harness repro TOKEN [--megatron-path DIR]   (TOKEN as printed after REPRO: by a failing check)",
      kReproFlags, exit_code, {1, 1});
  if (!args) return exit_code;
  auto token = token_argument(args->positionals[0]);
  if (!token.ok()) return report_error(token.error(), kExitBadInput);
  return replay_token(*token, args->megatron_path);
}

}  // namespace ih::cli
