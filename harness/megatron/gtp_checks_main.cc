// megatron_gtp_checks: the gather-design GTP checks (gtp_checks.h) against the reference or a
// Megatron, optionally with one adapter-side mutant. Exit codes as every command (seam/outcome.h).
//
//   megatron_gtp_checks --reference
//   megatron_gtp_checks [--megatron-path DIR] [--mutant NAME]
#include <chrono>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "harness/megatron/gtp_checks.h"
#include "harness/megatron/megatron_implementation.h"
#include "seam/outcome.h"
#include "seam/reference_implementation.h"

int main(int argc, char** argv) {
  using namespace ih;
  bool reference = false;
  MegatronOptions options;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reference") {
      reference = true;
    } else if ((arg == "--megatron-path" || arg == "--mutant") && i + 1 < argc) {
      (arg == "--mutant" ? options.mutant : options.megatron_path) = std::string(argv[++i]);
    } else {
      std::cerr << "ERROR: invalid_argument: usage: megatron_gtp_checks [--reference | --megatron-path DIR] [--mutant "
                   "NAME]\n";
      return kExitBadInput;
    }
  }
  std::unique_ptr<Implementation> target;
  const auto t0 = std::chrono::steady_clock::now();
  if (reference) {
    target = std::make_unique<ReferenceImplementation>();
  } else {
    auto started = MegatronImplementation::start(options);
    if (!started.ok()) {
      std::cerr << "ERROR: " << to_string(started.error().kind) << ": " << started.error().message << "\n";
      return started.error().kind == ErrorKind::invalid_argument ? kExitBadInput : kExitHarnessError;
    }
    std::cout << "INFO: target " << (*started)->describe_target()
              << (options.mutant ? " mutant " + *options.mutant : "") << "\n";
    target = std::move(*started);
  }
  const double start_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::vector<Outcome> outcomes;
  for (const gate::Check& check : megatron::gtp_gather_checks()) {
    const auto c0 = std::chrono::steady_clock::now();
    const gate::CheckAnswer answer = check.run(*target);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - c0).count();
    outcomes.push_back(answer.outcome);
    std::cout << to_string(answer.outcome) << " " << check.check_name() << " (" << s << " s)";
    if (!answer.detail.empty()) std::cout << "\n      " << answer.detail;
    std::cout << "\n";
  }
  std::cout << "INFO: target start-up " << start_s << " s\n";
  return exit_code_of(outcomes);
}
