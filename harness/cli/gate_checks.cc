#include "harness/cli/gate_checks.h"

#include "harness/install/data_dir.h"
#include "properties/suite.h"

namespace ih::cli {
namespace {

/// A failed property's typed violation: its kind (the property's typed_verdict kind, "failed" when
/// it gives none) and its case (`spec=<spec case>`, or `generated` for a generated case), which a
/// known finding's `violation:` lines match.
gate::Violation property_violation(const std::string& failure_kind, const std::string& which, std::string text) {
  return {failure_kind.empty() ? "failed" : failure_kind, which, std::move(text)};
}

/// Every property as a gate check: its spec cases first (the spec's worked examples; a failing one
/// is the case, with a spec= token), then the generated cases; a failure carries its shrunk case,
/// a token that replays it and its typed violation. A spec case without a verdict on this target
/// leaves the verdict to the generated cases.
std::vector<gate::Check> property_checks(const Budget& budget) {
  std::vector<gate::Check> out;
  for (const props::Property& property : props::all_properties())
    out.push_back(
        {"properties", property.name, [&property, budget](Implementation& target) {
           for (const auto& [fixture, unused] : property.fixtures) {
             const props::Replay spec_case = props::run_spec_case(target, property, fixture);
             if (spec_case.outcome != Outcome::failed) continue;
             const auto layout = property.fixture_layouts.find(fixture);
             gate::CheckAnswer answer{Outcome::failed, "spec case '" + fixture + "': " + spec_case.verdict,
                                      spec_case.printed_case, std::nullopt,
                                      layout == property.fixture_layouts.end()
                                          ? std::nullopt
                                          : std::optional<props::GtpCase>(layout->second)};
             answer.case_token = ReproToken{props::property_check_name(property.name), {{"spec", fixture}}};
             answer.violations = {property_violation(spec_case.failure_kind, "spec=" + fixture, answer.detail)};
             return answer;
           }
           const props::RunParams params{budget.seed, static_cast<int>(budget.property_cases), 100, {}};
           const props::PropertyRun run = property.run(target, params);
           gate::CheckAnswer answer{run.outcome, run.description, run.counterexample, std::nullopt, run.failing_layout};
           answer.note = run.note;
           // The property's own token, with its case when it failed: a known finding pins a property by
           // it, so a pin is matched when the property fails and reported STALE when it passes.
           ReproToken token{props::property_check_name(property.name), {}};
           if (run.outcome == Outcome::failed) {
             props::add_case_options(token, params, run);
             answer.violations = {property_violation(run.failure_kind, "generated", run.description)};
           }
           if (run.outcome == Outcome::failed || run.outcome == Outcome::passed) answer.case_token = token;
           return answer;
         }});
  return out;
}

}  // namespace

std::string corpus_of(const TargetOptions& options) { return options.corpus.value_or(install::corpus_dir().string()); }

Result<TargetSpec> spec_of(const TargetOptions& options) {
  return validated_target(options.target, options.mutant, options.megatron_path, options.candidate, options.fix);
}

Budget budget_of(const TargetOptions& options, const TargetSpec& spec) {
  const bool fewer = spec.target != TargetKind::reference && !options.has("property-cases");
  return {static_cast<std::uint64_t>(options.seed), fewer ? 5 : options.property_cases, options.model_dumps,
          corpus_of(options)};
}

/// Both cross-version runners of `spec` (none without a base tree).
CrossRunners cross_runners_of(const TargetSpec& spec, std::ostream& progress, RealRoundTripBatch batch,
                              const SelectedChecks& selected) {
  if (!spec.base_megatron_path) return {};
  return {cross_version_runner(spec, progress, CrossVersion::base_to_new, batch, selected),
          cross_version_runner(spec, progress, CrossVersion::new_to_base, batch, selected)};
}

Result<std::vector<gate::Check>> all_checks(const Budget& budget, bool differential,
                                            const gate::RealRoundTripRunner& real, const CrossRunners& cross) {
  IH_TRY_ASSIGN(checks, gate::pinned_layer_map_checks(budget.corpus));
  for (gate::Check& check : gate::retarget_scenario_checks()) checks.push_back(std::move(check));
  for (gate::Check& check : property_checks(budget)) checks.push_back(std::move(check));
  // Spec invariants Megatron is known to break (pinned in corpus/findings/), for every target.
  for (gate::Check& check : gate::spec_invariant_checks()) checks.push_back(std::move(check));
  // Real versus synthetic model dumps (issue 17): the reference against itself, or against the real model.
  for (gate::Check& check : gate::model_dump_checks(budget.seed, budget.model_dumps))
    checks.push_back(std::move(check));
  if (differential)
    for (auto group : {gate::differential_checks(), gate::layout_differential_checks(), gate::gtp_gather_checks()})
      for (gate::Check& check : group) checks.push_back(std::move(check));
  if (differential && real)
    for (gate::Check& check : gate::real_roundtrip_checks(gate_real_scenarios(), gate_real_directions(), real))
      checks.push_back(std::move(check));
  if (differential && cross.base_to_new)
    for (gate::Check& check : gate::real_roundtrip_cross_checks(gate_cross_scenarios(), gate_real_directions(),
                                                                cross.base_to_new, cross.new_to_base))
      checks.push_back(std::move(check));
  return gate::with_unique_names(std::move(checks));
}

/// The options every token of a run carries: the target and the budget.
ReproToken base_token(const TargetSpec& spec, const Budget& budget, const TargetOptions& options) {
  ReproToken base;
  add_target_options(base, spec);
  base.options["seed"] = std::to_string(budget.seed);
  base.options["cases"] = std::to_string(budget.property_cases);
  if (options.corpus) base.options["corpus"] = budget.corpus;
  if (budget.model_dumps != gate::kGeneratedModelDumps)
    base.options["model-dumps"] = std::to_string(budget.model_dumps);
  return base;
}

}  // namespace ih::cli
