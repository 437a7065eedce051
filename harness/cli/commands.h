// The subcommands of interop-harness; each returns a process exit code (args.h).
#pragma once

#include <string>
#include <vector>

namespace ih::cli {

int pattern_command(const std::vector<std::string>& args);
int retarget_command(const std::vector<std::string>& args);
int layout_command(const std::vector<std::string>& args);
int gate_command(const std::vector<std::string>& args);
int repro_command(const std::vector<std::string>& args);
int mutants_command(const std::vector<std::string>& args);

}  // namespace ih::cli
