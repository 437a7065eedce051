// `interop-harness mutants`: the gate against every planted mutant of a target, the proof that its checks catch them.
#include <algorithm>
#include <iostream>
#include <set>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/cli/commands.h"
#include "harness/cli/gate_checks.h"
#include "mutants/mutant_implementation.h"

namespace ih::cli {
namespace {

struct MutantsOptions : TargetOptions {
  bool json = false;
};

const std::vector<Flag<MutantsOptions>> kMutantsFlags = [] {
  std::vector<Flag<MutantsOptions>> flags = target_flags<MutantsOptions>();
  flags.push_back(property_cases_flag<MutantsOptions>());
  flags.push_back(model_dumps_flag<MutantsOptions>());
  flags.push_back({"json", &MutantsOptions::json, "machine-readable output"});
  return flags;
}();

/// One mutant of a campaign.
struct Planted {
  std::string name, description;
  std::string not_applicable;            // why this target lacks what the mutant patches (empty: applicable)
  MutantTier tier = MutantTier::checks;  // real: model or training code, its gate runs the real round trips too
};

/// The target's planted mutants: the C++ catalogue, or the adapter's list (with a candidate only the
/// candidate's own mistakes: the checkout's mutants are campaigned without one; without one the
/// candidate's mutants are not applicable).
Result<std::vector<Planted>> planted_mutants(const TargetSpec& spec) {
  std::vector<Planted> mutants;
  if (spec.target == TargetKind::reference) {
    for (const MutantInfo& m : mutant_catalogue())
      mutants.push_back({m.name, m.bug_class + " " + m.description, "", MutantTier::checks});
    return mutants;
  }
  IH_TRY_ASSIGN(listed, list_megatron_mutants(spec));
  for (const MegatronMutant& m : listed) {
    if (spec.candidate != Candidate::none && m.of != MutantOf::candidate) continue;
    mutants.push_back({m.name, m.description, m.not_applicable, m.tier});
  }
  return mutants;
}

/// What a campaign runs each mutant with: its target, budget and checks.
struct Campaign {
  TargetSpec spec;
  Budget budget;
  const TargetOptions& options;
  std::vector<gate::Check> checks;  // without the real round trips
  std::ostream& progress;
  /// The checks of `spec` (with the real round trips, progress into `rounds`, for the real tier).
  Result<std::vector<gate::Check>> checks_for(const TargetSpec& target, MutantTier tier, std::ostream& rounds) const {
    if (tier != MutantTier::real) return checks;
    return all_checks(budget, spec.target != TargetKind::reference, real_roundtrip_runner(target, rounds));
  }
};

/// The checks that pass on the clean target: a check that already fails there kills nothing. Its progress
/// is shown: against Megatron the clean run is a whole gate (minutes), the longest step.
Result<std::set<std::string>> passing_on_clean(const Campaign& campaign, MutantTier widest) {
  std::ostringstream quiet_rounds;
  IH_TRY_ASSIGN(checks, campaign.checks_for(campaign.spec, widest, quiet_rounds));
  IH_TRY_ASSIGN(clean, make_target(campaign.spec));
  campaign.progress << "INFO: the clean target " << describe_target(*clean, campaign.spec) << " first"
                    << (widest == MutantTier::real ? " (with the real round trips, for the real-tier mutants)" : "")
                    << "\n";
  std::set<std::string> passing;
  const ReproToken base = base_token(campaign.spec, campaign.budget, campaign.options);
  for (const auto& r : gate::run_checks(*clean, checks, base, gate::KnownFindings{}, campaign.progress))
    if (r.answer.outcome == Outcome::passed) passing.insert(gate_check_name(r.group, r.name));
  campaign.progress << "INFO: " << passing.size() << " of " << checks.size() << " checks pass on the clean target\n";
  return passing;
}

/// What one mutant's gate showed: the clean-passing checks it failed, the first one's token, and how many
/// checks gave no verdict.
struct MutantVerdict {
  json::Json killed_by = json::Json::array();
  std::string token;
  int without_verdict = 0;
};

/// Runs the gate against one mutant; a target or checks that cannot be made end the campaign (their error:
/// checks are bad input, a target that cannot start is the harness's).
Result<MutantVerdict> run_mutant(const Campaign& campaign, const Planted& mutant,
                                 const std::set<std::string>& passing) {
  TargetSpec mutated = campaign.spec;
  mutated.mutant = mutant.name;
  IH_TRY_ASSIGN(target, make_target(mutated));
  ReproToken base = base_token(mutated, campaign.budget, campaign.options);
  add_target_identity(base, *target);
  std::ostringstream quiet;
  IH_TRY_ASSIGN(checks, campaign.checks_for(mutated, mutant.tier, quiet));
  MutantVerdict verdict;
  for (const auto& r : gate::run_checks(*target, checks, base, gate::KnownFindings{}, quiet)) {
    verdict.without_verdict += r.answer.outcome == Outcome::harness_error || r.answer.outcome == Outcome::timeout;
    if (r.answer.outcome != Outcome::failed || !passing.count(gate_check_name(r.group, r.name))) continue;
    verdict.killed_by.push_back(r.group + ": " + r.name);
    if (verdict.token.empty()) verdict.token = to_string(r.token);
  }
  return verdict;
}

/// The line under a mutant's heading: killed (by how many checks, with a REPRO line) or SURVIVED, and the
/// checks that gave no verdict.
std::string mutant_line(const MutantVerdict& v) {
  const std::string killed =
      "killed by " + std::to_string(v.killed_by.size()) + " check(s); REPRO: interop-harness repro " + v.token;
  const std::string unjudged =
      "; " + std::to_string(v.without_verdict) + " check(s) gave no verdict (harness error or timeout)";
  return "      " + (v.killed_by.empty() ? std::string("SURVIVED") : killed) + (v.without_verdict ? unjudged : "");
}

}  // namespace

int mutants_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args =
      open_command(argv, "interop-harness mutants [--target reference|megatron] [--json] [--megatron-path DIR]",
                   kMutantsFlags, exit_code);
  if (!args) return exit_code;
  auto spec = spec_of(*args);
  if (!spec.ok()) return report_error(spec.error(), kExitBadInput);
  if (spec->mutant)
    return report_error(make_error(ErrorKind::invalid_argument, "mutants runs every mutant; use gate --mutant for one"),
                        kExitBadInput);
  const Budget budget = budget_of(*args, *spec);
  auto checks = all_checks(budget, spec->target != TargetKind::reference);
  if (!checks.ok()) return report_error(checks.error(), kExitBadInput);
  auto mutants = planted_mutants(*spec);
  if (!mutants.ok()) return report_error(mutants.error());
  const Campaign campaign{*spec, budget, *args, *checks, args->json ? std::cerr : std::cout};
  // The real round trips cost minutes per run: only real-tier mutants (and the clean run they are judged
  // against) run them; every other mutant's verdict rests on the other checks.
  const MutantTier widest =
      std::any_of(mutants->begin(), mutants->end(), [](const Planted& m) { return m.tier == MutantTier::real; })
          ? MutantTier::real
          : MutantTier::checks;
  auto passing = passing_on_clean(campaign, widest);
  if (!passing.ok()) return report_error(passing.error());  // bad checks (exit 2) or a target that cannot start
  json::Json report{{"mutants", json::Json::array()}};
  int killed = 0, total = 0, not_applicable = 0;
  bool no_verdict = false;
  for (const Planted& mutant : *mutants) {
    campaign.progress << "INFO: [" << total + not_applicable + 1 << "/" << mutants->size() << "] mutant " << mutant.name
                      << ": " << mutant.description << "\n"
                      << std::flush;  // each mutant is a whole gate: its line shows before it runs, also into a file
    if (!mutant.not_applicable.empty()) {  // this Megatron lacks the code the mutant patches: no verdict either way
      ++not_applicable;
      campaign.progress << "      NOT APPLICABLE: " << mutant.not_applicable << "\n";
      report["mutants"].push_back(
          {{"name", mutant.name}, {"killed", false}, {"not_applicable", mutant.not_applicable}});
      continue;
    }
    ++total;
    const auto verdict = run_mutant(campaign, mutant, *passing);
    if (!verdict.ok()) return report_error(verdict.error());
    killed += !verdict->killed_by.empty();
    no_verdict = no_verdict || verdict->without_verdict > 0;
    campaign.progress << mutant_line(*verdict) << "\n" << std::flush;
    report["mutants"].push_back({{"name", mutant.name},
                                 {"killed", !verdict->killed_by.empty()},
                                 {"killed_by", verdict->killed_by},
                                 {"token", verdict->token}});
  }
  report["score"] = std::to_string(killed) + "/" + std::to_string(total);
  report["not_applicable"] = not_applicable;
  if (args->json)
    std::cout << json::dump(report) << "\n";
  else
    std::cout << "mutants killed: " << killed << "/" << total
              << (not_applicable ? " (" + std::to_string(not_applicable) + " not applicable to this target)" : "")
              << "\n";
  if (total == 0) return kExitNothingRan;
  if (killed == total) return kExitOk;
  return no_verdict ? kExitHarnessError : kExitCheckFailed;  // a survivor may be explained by a broken run
}

}  // namespace ih::cli
