// `interop-harness gate`, `mutants` and `repro`: the checks against a target, the proof that they
// catch planted Megatron bugs, and the one-command replay of a single failing check.
#include <iostream>
#include <memory>
#include <sstream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/gate/gate.h"
#include "codec/json_codec.h"
#include "harness/megatron/megatron_implementation.h"
#include "seam/reference_implementation.h"
#include "models/text.h"
#include "properties/suite.h"

#ifndef IH_DEFAULT_CORPUS_DIR
#define IH_DEFAULT_CORPUS_DIR "corpus"
#endif

namespace ih::cli {
namespace {

const std::vector<FlagSpec> kTargetFlags = {
    {"property-cases", true, "generated cases per property in the gate (default 25; 5 against megatron)"},
    {"target", true, "reference (default) or megatron"},
    {"megatron-path", true, "a Megatron-LM checkout to gate (default: the installed megatron-core)"},
    {"mutant", true, "apply an adapter-side mutant to Megatron (see `mutants`)"},
    {"corpus", true, "corpus folder (default: the source tree's corpus/)"},
    {"json", false, "machine-readable output"},
    {"help", false, "show this help"}};

Result<std::unique_ptr<Implementation>> make_target(const std::string& name, const ParsedArgs& args,
                                                    std::optional<std::string> mutant) {
  if (name == "reference") {
    if (mutant) return make_error(ErrorKind::invalid_argument, "--mutant applies to --target megatron only");
    return std::unique_ptr<Implementation>(std::make_unique<ReferenceImplementation>());
  }
  if (name != "megatron") return make_error(ErrorKind::invalid_argument, "unknown --target '" + name + "' (known: reference, megatron)");
  IH_TRY_ASSIGN(megatron, MegatronImplementation::start({.megatron_path = args.value("megatron-path"), .mutant = mutant}));
  return std::unique_ptr<Implementation>(std::move(megatron));
}

/// Every property of the suite as a gate check with a fixed seed; a failure's detail carries the
/// minimal case and RapidCheck's reproduce string. Operations the target lacks count as not run.
std::vector<gate::Check> property_checks(int cases) {
  std::vector<gate::Check> out;
  for (const props::Property& property : props::all_properties())
    out.push_back({"properties", property.name, [&property, cases](Implementation& target) -> Result<std::string> {
                     const props::Outcome outcome = property.run(target, {.seed = 1, .cases = cases});
                     if (outcome.ok) return std::string();
                     if (outcome.description.find("unsupported: ") != std::string::npos)
                       return make_error(ErrorKind::unsupported, outcome.description);
                     return outcome.description + "\n      minimal case: " + outcome.counterexample +
                            "\n      RapidCheck reproduce: " + outcome.reproduce;
                   }});
  return out;
}

/// The gate's checks in a fixed order, so a check's index is a stable part of a repro token.
Result<std::vector<gate::Check>> all_checks(const ParsedArgs& args, bool differential) {
  IH_TRY_ASSIGN(checks, gate::pinned_layer_map_checks(args.value("corpus").value_or(IH_DEFAULT_CORPUS_DIR)));
  for (gate::Check& check : gate::retarget_scenario_checks()) checks.push_back(std::move(check));
  IH_TRY_ASSIGN(cases, args.int_value("property-cases", differential ? 5 : 25));
  for (gate::Check& check : property_checks(static_cast<int>(cases))) checks.push_back(std::move(check));
  if (differential)
    for (auto group : {gate::differential_checks(), gate::layout_differential_checks()})
      for (gate::Check& check : group) checks.push_back(std::move(check));
  return checks;
}

int report_error(const Error& error, int code) {
  std::cerr << "ERROR: " << to_string(error.kind) << ": " << error.message << "\n";
  return code;
}

std::string token_for(const std::string& target, const std::optional<std::string>& mutant, std::size_t index) {
  return target + ":" + mutant.value_or("-") + ":" + std::to_string(index);
}

}  // namespace

int gate_command(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, kTargetFlags);
  if (!args.ok() || args->has("help") || !args->positionals.empty()) {
    std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n")
              << usage("interop-harness gate [--target reference|megatron] [--megatron-path DIR] [--mutant M]", kTargetFlags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  const std::string target_name = args->value("target").value_or("reference");
  auto target = make_target(target_name, *args, args->value("mutant"));
  if (!target.ok()) return report_error(target.error(), target.error().kind == ErrorKind::invalid_argument ? kExitBadInput : kExitHarnessError);
  auto checks = all_checks(*args, target_name != "reference");
  if (!checks.ok()) return report_error(checks.error(), kExitHarnessError);
  std::cout << "INFO: gate target " << (*target)->name() << ", " << checks->size() << " checks\n";
  const auto results = gate::run_checks(**target, *checks, std::cout);
  std::cout << "\n" << gate::summary_table(results);
  int failed = 0;
  for (std::size_t i = 0; i < results.size(); ++i)
    if (results[i].verdict == gate::CheckResult::Verdict::failed) {
      ++failed;
      std::cout << "REPRO: interop-harness repro " << token_for(target_name, args->value("mutant"), i) << "\n";
    }
  std::cout << (failed ? "gate: FAILED\n" : "gate: PASSED\n");
  return failed ? kExitCheckFailed : kExitOk;
}

int repro_command(const std::vector<std::string>& argv) {
  if (argv.size() == 1 && argv[0].rfind("prop:", 0) == 0) return property_repro_command(argv[0]);  // property tokens
  auto args = parse_args(argv, kTargetFlags);
  if (!args.ok() || args->has("help") || args->positionals.size() != 1) {
    std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n")
              << usage("interop-harness repro TARGET:MUTANT:CHECK (as printed by a failing gate or mutants run)", kTargetFlags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  const auto parts = split(args->positionals[0], ':');
  const auto index = parts.size() == 3 ? parse_int(parts[2]) : Result<std::int64_t>(make_error(ErrorKind::invalid_argument, "x"));
  if (!index.ok()) return report_error(make_error(ErrorKind::invalid_argument, "a repro token is TARGET:MUTANT:CHECK, e.g. megatron:accept_mixed_mlp:20"), kExitBadInput);
  const std::optional<std::string> mutant = parts[1] == "-" ? std::nullopt : std::optional<std::string>(parts[1]);
  auto target = make_target(parts[0], *args, mutant);
  if (!target.ok()) return report_error(target.error(), kExitHarnessError);
  auto checks = all_checks(*args, parts[0] != "reference");
  if (!checks.ok()) return report_error(checks.error(), kExitHarnessError);
  if (*index < 0 || static_cast<std::size_t>(*index) >= checks->size())
    return report_error(make_error(ErrorKind::invalid_argument, "check " + parts[2] + " does not exist (there are " + std::to_string(checks->size()) + ")"), kExitBadInput);
  const auto results = gate::run_checks(**target, {(*checks)[*index]}, std::cout);
  std::cout << gate::summary_table(results);
  return results[0].verdict == gate::CheckResult::Verdict::failed ? kExitCheckFailed : kExitOk;
}

int mutants_command(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, kTargetFlags);
  if (!args.ok() || args->has("help") || args->value("target").value_or("") != "megatron") {
    std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n")
              << usage("interop-harness mutants --target megatron [--json] [--megatron-path DIR]", kTargetFlags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  auto clean = MegatronImplementation::start({.megatron_path = args->value("megatron-path")});
  if (!clean.ok()) return report_error(clean.error(), kExitHarnessError);
  auto listed = (*clean)->list_mutants();
  if (!listed.ok()) return report_error(listed.error(), kExitHarnessError);
  auto checks = all_checks(*args, true);
  if (!checks.ok()) return report_error(checks.error(), kExitHarnessError);
  json::Json report{{"mutants", json::Json::array()}};
  int killed = 0, total = 0;
  std::ostream& progress = args->has("json") ? std::cerr : std::cout;
  for (const auto& mutant : listed->value("mutants", json::Json::array())) {
    const std::string name = mutant.value("name", std::string());
    ++total;
    progress << "INFO: [" << total << "] mutant " << name << ": " << mutant.value("description", std::string()) << "\n";
    auto target = make_target("megatron", *args, name);
    if (!target.ok()) return report_error(target.error(), kExitHarnessError);
    std::ostringstream quiet;
    const auto results = gate::run_checks(**target, *checks, quiet);
    json::Json killed_by = json::Json::array();
    std::string token;
    for (std::size_t i = 0; i < results.size(); ++i)
      if (results[i].verdict == gate::CheckResult::Verdict::failed) {
        killed_by.push_back(results[i].group + ": " + results[i].name);
        if (token.empty()) token = token_for("megatron", name, i);
      }
    const bool is_killed = !killed_by.empty();
    killed += is_killed;
    progress << "      " << (is_killed ? "killed by " + std::to_string(killed_by.size()) + " check(s); repro: interop-harness repro " + token
                                      : std::string("SURVIVED"))
             << "\n";
    report["mutants"].push_back({{"name", name}, {"killed", is_killed}, {"killed_by", killed_by}, {"token", token}});
  }
  report["score"] = std::to_string(killed) + "/" + std::to_string(total);
  if (args->has("json")) std::cout << json::dump(report) << "\n";
  else std::cout << "mutants killed: " << killed << "/" << total << "\n";
  return killed == total ? kExitOk : kExitCheckFailed;
}

}  // namespace ih::cli
