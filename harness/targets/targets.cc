#include "harness/targets/targets.h"

#include <filesystem>

#include "harness/megatron/megatron_implementation.h"
#include "mutants/mutant_implementation.h"

namespace ih {

TargetSpec target_of(const ReproToken& token) {
  return TargetSpec{token.target(), token.option("mutant"), token.option("megatron-path"), token.option("candidate"),
                    token.option("fix")};
}

void add_target_options(ReproToken& token, const TargetSpec& spec) {
  token.options["target"] = spec.target;
  if (spec.mutant) token.options["mutant"] = *spec.mutant;
  if (spec.megatron_path) token.options["megatron-path"] = *spec.megatron_path;
  if (spec.candidate) token.options["candidate"] = *spec.candidate;
  if (spec.fix) token.options["fix"] = *spec.fix;
}

Result<TargetSpec> validated(TargetSpec spec) {
  if (spec.target == "reference") {
    if (spec.megatron_path || spec.candidate || spec.fix)
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path, --candidate and --fix apply to --target megatron only");
    if (spec.mutant) IH_TRY_STATUS(MutantImplementation::create(*spec.mutant));
    return spec;
  }
  if (spec.target != "megatron")
    return make_error(ErrorKind::invalid_argument, "unknown target '" + spec.target + "' (known: reference, megatron)");
  if (spec.candidate && !is_known_candidate(*spec.candidate))
    return make_error(ErrorKind::invalid_argument,
                      "unknown --candidate '" + *spec.candidate + "' (known: shard-split)");
  if (spec.fix && !is_known_fix(*spec.fix))
    return make_error(ErrorKind::invalid_argument, "unknown --fix '" + *spec.fix + "' (known: to_state_dict_order)");
  if (spec.megatron_path) {
    std::error_code error;
    if (!std::filesystem::is_regular_file(std::filesystem::path(*spec.megatron_path) / "megatron/core/__init__.py",
                                          error))
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path " + *spec.megatron_path +
                            " holds no megatron/core/__init__.py (not a Megatron-LM checkout)");
    spec.megatron_path = std::filesystem::absolute(*spec.megatron_path).lexically_normal().string();
  }
  return spec;
}

MegatronOptions megatron_options(const TargetSpec& spec) {
  return {.megatron_path = spec.megatron_path, .mutant = spec.mutant, .candidate = spec.candidate, .fix = spec.fix};
}

Result<std::unique_ptr<Implementation>> make_target(const TargetSpec& given) {
  IH_TRY_ASSIGN(spec, validated(given));
  if (spec.target == "reference") {
    if (!spec.mutant) return std::unique_ptr<Implementation>(std::make_unique<ReferenceImplementation>());
    IH_TRY_ASSIGN(mutant, MutantImplementation::create(*spec.mutant));
    return std::unique_ptr<Implementation>(std::move(mutant));
  }
  IH_TRY_ASSIGN(megatron, MegatronImplementation::start(megatron_options(spec)));
  return std::unique_ptr<Implementation>(std::move(megatron));
}

std::string describe_target(const Implementation& target, const TargetSpec& spec) {
  std::string out = target.name();
  if (spec.megatron_path) out += " at " + *spec.megatron_path;
  return out;
}

}  // namespace ih
