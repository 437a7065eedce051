// interop-harness: the command-line entry point. Dispatches on the first word.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"

namespace {

constexpr const char* kVersion = "0.3.0";

constexpr const char* kHelp =
    "interop-harness: checks Megatron GPT->Hybrid checkpoint interop and GTP shard layouts\n"
    "\n"
    "commands:\n"
    "  gate [--target reference|megatron] [--megatron-path DIR] [--mutant M] [--report DIR] [--json] [--require-all]\n"
    "                                       pinned cases, built-in scenarios, the properties, differential checks\n"
    "  mutants [--target reference|megatron] [--json]\n"
    "                                       run the gate against every planted mutant of the target\n"
    "  repro TOKEN                          replay one failing check or property case (token printed on failure)\n"
    "  properties [--list] [--list-mutants] [--seed S] [--cases N] [--json] [--mutant NAME]\n"
    "                                       the property suite (RapidCheck) against the reference or a mutant\n"
    "  pin TOKEN --reason R                 pin a failing case under corpus/regressions/ (pin --replay FILE)\n"
    "  pattern maps [--json] PATTERN...     GPT layer maps of hybrid patterns ('-' reads stdin)\n"
    "  pattern make --gpt-layers N --block B [--segments S]\n"
    "  pattern check PATTERN [--gpt-layers N] [--pp P]\n"
    "  retarget --pattern P                 retarget a sharded state dict (JSON on stdin)\n"
    "  roundtrip --target megatron [--pattern P] [--save-tp T --save-pp P --load-tp T --load-pp P] [--gated]\n"
    "                                       save GPT, load hybrid through real dist_checkpointing (CPU, gloo)\n"
    "  layout gdp|mamba --d-inner-local D ... --tp T --gtp G --pad-align P --cols C [--json] [--svg F]\n"
    "                                       which rank saves which in_proj rows (GTP shard split)\n"
    "\n"
    "  --version                            print the version\n"
    "\n"
    "exit codes: 0 ok, 1 a check failed (a finding), 2 bad input, 3 harness error, 4 timeout,\n"
    "            5 nothing could run here (every check NOT RUN)\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace ih::cli;
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string command = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  try {
    if (command == "pattern") return pattern_command(rest);
    if (command == "retarget") return retarget_command(rest);
    if (command == "layout") return layout_command(rest);
    if (command == "gate") return gate_command(rest);
    if (command == "repro") return repro_command(rest);
    if (command == "mutants") return mutants_command(rest);
    if (command == "properties") return properties_command(rest);
    if (command == "pin") return pin_command(rest);
    if (command == "roundtrip") return roundtrip_command(rest);
    if (command == "--version" || command == "version") {
      std::cout << "interop-harness " << kVersion << "\n";
      return kExitOk;
    }
    if (command == "help" || command == "--help" || command == "-h") {
      std::cout << kHelp;
      return kExitOk;
    }
    std::cerr << (command.empty() ? "" : "ERROR: unknown command '" + command + "'\n") << kHelp;
    return kExitBadInput;
  } catch (const std::exception& e) {
    // Models return errors as values; anything thrown here is a harness defect, reported, not a crash.
    std::cerr << "ERROR: internal: " << e.what() << "\n";
    return kExitHarnessError;
  }
}
