// The subcommands of interop-harness; each returns a process exit code (args.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "seam/repro_token.h"

namespace ih::cli {

int pattern_command(const std::vector<std::string>& args);
int retarget_command(const std::vector<std::string>& args);
int layout_command(const std::vector<std::string>& args);
int gate_command(const std::vector<std::string>& args);
int repro_command(const std::vector<std::string>& args);
int mutants_command(const std::vector<std::string>& args);
/// `mutate`: cosmic-ray's mutants of Megatron's Python code, each run by the checks that reach it (mutate_command.cc).
int mutate_command(const std::vector<std::string>& args);
/// `properties`: the property suite against the reference or a planted mutant (properties_command.cc).
int properties_command(const std::vector<std::string>& args);
/// `pin TOKEN --reason R` writes corpus/regressions/<name>.pin; `pin --replay FILE` replays one.
int pin_command(const std::vector<std::string>& args);
/// Reads a TOKEN argument (repro, pin): an ih2 token whose checksum matches, or an old ih1 token
/// only where it is the text of a case pinned in the corpus (it has no checksum, so an edited one
/// could name another case). Anything else is invalid_argument ("damaged token").
Result<ReproToken> token_argument(std::string_view text);
/// Replays one property case named by a token, printing the case and the verdict.
int property_repro_command(const ReproToken& token, const std::optional<std::string>& megatron_path);
/// Replays any token: a property case or a gate check; `megatron_path` overrides the token's hint.
int replay_token(const ReproToken& token, const std::optional<std::string>& megatron_path = std::nullopt);
int roundtrip_command(const std::vector<std::string>& args);
/// `model dump`: one rank's state dict of a whole model, reference or real (model_command.cc).
int model_command(const std::vector<std::string>& args);

}  // namespace ih::cli
