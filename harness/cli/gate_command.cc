// `interop-harness gate`: the main job. Pinned cases and built-in scenarios against a target.
#include <iostream>
#include <memory>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/gate.h"
#include "harness/megatron_implementation.h"
#include "models/reference_implementation.h"

#ifndef IH_DEFAULT_CORPUS_DIR
#define IH_DEFAULT_CORPUS_DIR "corpus"
#endif

namespace ih::cli {

int gate_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {{"target", true, "reference (default) or megatron"},
                                       {"megatron-path", true, "a Megatron-LM checkout to gate (default: the installed megatron-core)"},
                                       {"mutant", true, "apply an adapter-side mutant to Megatron (proof that the gate gates)"},
                                       {"corpus", true, "corpus folder (default: the source tree's corpus/)"},
                                       {"help", false, "show this help"}};
  auto args = parse_args(argv, flags);
  if (!args.ok() || args->has("help") || !args->positionals.empty()) {
    std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n") << usage("interop-harness gate [--target T]", flags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  const std::string target_name = args->value("target").value_or("reference");
  std::unique_ptr<Implementation> target;
  if (target_name == "reference") {
    target = std::make_unique<ReferenceImplementation>();
  } else if (target_name == "megatron") {
    auto megatron = MegatronImplementation::start({.megatron_path = args->value("megatron-path"), .mutant = args->value("mutant")});
    if (!megatron.ok()) {
      std::cerr << "ERROR: " << to_string(megatron.error().kind) << ": " << megatron.error().message << "\n";
      return kExitHarnessError;
    }
    target = std::move(megatron).value();
  } else {
    std::cerr << "ERROR: unknown --target '" << target_name << "' (known: reference, megatron)\n";
    return kExitBadInput;
  }
  auto checks = gate::pinned_layer_map_checks(args->value("corpus").value_or(IH_DEFAULT_CORPUS_DIR));
  if (!checks.ok()) {
    std::cerr << "ERROR: " << checks.error().message << "\n";
    return kExitHarnessError;
  }
  for (gate::Check& check : gate::retarget_scenario_checks()) checks->push_back(std::move(check));
  if (target_name != "reference")
    for (gate::Check& check : gate::differential_checks()) checks->push_back(std::move(check));
  std::cout << "INFO: gate target " << target->name() << ", " << checks->size() << " checks\n";
  const auto results = gate::run_checks(*target, *checks, std::cout);
  std::cout << "\n" << gate::summary_table(results);
  int passed = 0, failed = 0;
  for (const auto& r : results) (r.verdict == gate::CheckResult::Verdict::failed ? failed : passed)++;
  std::cout << (failed ? "gate: FAILED\n" : "gate: PASSED\n");
  return failed ? kExitCheckFailed : kExitOk;
}

}  // namespace ih::cli
