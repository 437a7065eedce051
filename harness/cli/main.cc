// interop-harness: the command-line entry point. One table of subcommands: dispatch and help.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <exception>
#include <iomanip>
#include <iostream>
#include <string>
#include <vector>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/process/run_scope.h"

namespace {

constexpr const char* kVersion = "0.3.0";

struct Subcommand {
  const char* name;
  int (*run)(const std::vector<std::string>&);
  const char* summary;  // `<name> --help` prints the flags
};

const Subcommand kSubcommands[] = {
    {"gate", ih::cli::gate_command, "pinned cases, scenarios, the properties and differential checks against a target"},
    {"mutants", ih::cli::mutants_command, "the gate against every planted mutant of a target (the kill matrix)"},
    {"mutate", ih::cli::mutate_command, "mutants of Megatron's own code, each judged by the checks that reach it"},
    {"repro", ih::cli::repro_command, "replay the one case a REPRO token names"},
    {"properties", ih::cli::properties_command, "the RapidCheck property suite against the reference or a mutant"},
    {"pin", ih::cli::pin_command, "pin a failing case under corpus/regressions/ (pin --replay FILE replays one)"},
    {"pattern", ih::cli::pattern_command, "maps | make | check: hybrid patterns and their GPT layer maps"},
    {"retarget", ih::cli::retarget_command, "retarget a sharded state dict (JSON on stdin) for a hybrid pattern"},
    {"layout", ih::cli::layout_command, "gdp | mamba: which rank saves which in_proj rows (table, JSON, SVG)"},
    {"roundtrip", ih::cli::roundtrip_command, "real saves and loads through Megatron's dist_checkpointing"},
    {"model", ih::cli::model_command,
     "dump: one rank's sharded state dict of a GPT or hybrid model (reference or real)"},
};

void print_help(std::ostream& out) {
  out << "interop-harness: checks Megatron GPT->Hybrid checkpoint interop and GTP shard layouts\n\n"
      << "usage: interop-harness COMMAND [--help | flags...]\n\ncommands:\n";
  for (const Subcommand& c : kSubcommands) out << "  " << std::left << std::setw(12) << c.name << c.summary << "\n";
  out << "  " << std::setw(12) << "--version"
      << "print the version\n\n"
      << "exit codes: 0 ok, 1 a check failed (a finding), 2 bad input, 3 harness error, 4 timeout,\n"
      << "            5 nothing could run here (every check NOT RUN), 130/143 interrupted by SIGINT/SIGTERM\n";
}

int harness_defect(const std::exception& e) {
  // Models return errors as values; anything thrown here is a harness defect, reported, not a crash.
  std::cerr << "ERROR: harness_error: " << e.what() << "\n";
  return ih::cli::kExitHarnessError;
}

int run_subcommand(const Subcommand& c, const std::vector<std::string>& rest) {
  // Before any thread starts: the run's folder and its answer to SIGINT/SIGTERM (exit 130/143).
  if (auto run = ih::begin_run(); !run.ok()) {
    std::cerr << "ERROR: " << ih::to_string(run.error().kind) << ": " << run.error().message << "\n";
    return ih::cli::kExitHarnessError;
  }
  int code = ih::cli::kExitHarnessError;
  try {
    code = c.run(rest);
  } catch (const std::exception& e) {
    code = harness_defect(e);
  }
  return ih::end_run(code);
}

/// The command's exit code, or a harness error when what it printed on stdout did not arrive
/// (`retarget ... > /dev/full` exited 0 with its output lost): one check for every command.
int with_stdout_checked(int exit_code) {
  std::cout.flush();
  const bool lost = !std::cout || std::fflush(stdout) != 0 || std::ferror(stdout);
  if (!lost) return exit_code;
  std::cerr << "ERROR: harness_error: cannot write standard output (" << std::strerror(errno)
            << "); the command's output is lost\n";
  return ih::cli::kExitHarnessError;
}

int run_command(const std::vector<std::string>& args) {
  using namespace ih::cli;
  const std::string command = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  try {
    for (const Subcommand& c : kSubcommands)
      if (command == c.name) return run_subcommand(c, rest);
    if (command == "--version" || command == "version") {
      std::cout << "interop-harness " << kVersion << "\n";
      return kExitOk;
    }
    if (command == "help" || command == "--help" || command == "-h") {
      print_help(std::cout);
      return kExitOk;
    }
    std::cerr << (command.empty() ? "ERROR: invalid_argument: no command\n"
                                  : "ERROR: invalid_argument: unknown command '" + command + "'\n");
    print_help(std::cerr);
    return kExitBadInput;
  } catch (const std::exception& e) {
    return harness_defect(e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  return with_stdout_checked(run_command(std::vector<std::string>(argv + 1, argv + argc)));
}
