// gtp_save_memory_bench: per-rank peak memory of a GDP in_proj save under GTP, Megatron's gather design
// against the candidate shard-split design (not Megatron's code), measured in one run by the adapter's
// candidates/save_memory_bench.py in a gloo world on CPU (docs/megatron-findings.md, "Memory").
// Its last line: `ratio gather/shard-split peak per rank: X`. Exit codes as that script's.
//
//   gtp_save_memory_bench --megatron-path DIR [--gtp G] [--cols C] [--layers L] [--pad P]
#include <sys/wait.h>

#include <iostream>
#include <string>
#include <vector>

#include "harness/install/data_dir.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/process/spawn.h"
#include "seam/outcome.h"

int main(int argc, char** argv) {
  using namespace ih;
  std::vector<std::string> command = {default_megatron_python(),
                                      (install::adapter_dir() / "candidates" / "save_memory_bench.py").string()};
  bool has_path = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool known =
        arg == "--megatron-path" || arg == "--gtp" || arg == "--cols" || arg == "--layers" || arg == "--pad";
    if (!known || i + 1 >= argc) {
      std::cerr << "ERROR: invalid_argument: usage: gtp_save_memory_bench --megatron-path DIR [--gtp G] [--cols C] "
                   "[--layers L] [--pad P]\n";
      return kExitBadInput;
    }
    has_path = has_path || arg == "--megatron-path";
    command.push_back(arg);
    command.push_back(argv[++i]);
  }
  if (!has_path) {
    std::cerr
        << "ERROR: invalid_argument: --megatron-path DIR (a Megatron-LM checkout with the GDP mixer) is required\n";
    return kExitBadInput;
  }
  auto child = spawn_child(command, -1, 1, 2, false);
  if (!child.ok()) {
    std::cerr << "ERROR: harness_error: " << child.error().message << "\n";
    return kExitHarnessError;
  }
  int status = 0;
  if (waitpid(*child, &status, 0) < 0 || !WIFEXITED(status)) {
    std::cerr << "ERROR: harness_error: the benchmark did not exit normally\n";
    return kExitHarnessError;
  }
  return WEXITSTATUS(status);
}
