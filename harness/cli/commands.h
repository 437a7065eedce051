// The subcommands of interop-harness; each returns a process exit code (args.h).
#pragma once

#include <string>
#include <vector>

#include "seam/repro_token.h"

namespace ih::cli {

int pattern_command(const std::vector<std::string>& args);
int retarget_command(const std::vector<std::string>& args);
int layout_command(const std::vector<std::string>& args);
int gate_command(const std::vector<std::string>& args);
int repro_command(const std::vector<std::string>& args);
int mutants_command(const std::vector<std::string>& args);
/// `properties`: the property suite against the reference or a planted mutant (properties_command.cc).
int properties_command(const std::vector<std::string>& args);
/// `pin TOKEN --reason R` writes corpus/regressions/<name>.pin; `pin --replay FILE` replays one.
int pin_command(const std::vector<std::string>& args);
/// Replays one property case named by a token, printing the case and the verdict.
int property_repro_command(const ReproToken& token);
/// Replays any token: a property case or a gate check.
int replay_token(const ReproToken& token);
int roundtrip_command(const std::vector<std::string>& args);

}  // namespace ih::cli
