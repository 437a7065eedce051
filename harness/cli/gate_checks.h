// What every command that runs the gate's checks shares (gate, repro, mutants): the target and budget options, the
// list of checks for a target, and the options every token of a run carries.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/cli/args.h"
#include "harness/gate/gate.h"
#include "harness/targets/targets.h"
#include "seam/repro_token.h"

namespace ih::cli {

inline constexpr std::int64_t kMaxPropertyCases = 1'000'000;
inline constexpr std::int64_t kMaxModelDumps = 1'000;

/// The options of every command that runs the gate's checks: the target and the budget.
struct TargetOptions : GivenFlags {
  std::optional<std::string> target, megatron_path, mutant, candidate, fix, corpus;
  std::int64_t seed = 1;
  std::int64_t property_cases = 25;  // 5 against megatron unless given
  std::int64_t model_dumps = gate::kGeneratedModelDumps;
};

/// The rows of TargetOptions, for the table of a command whose options O derive from it.
template <class O>
std::vector<Flag<O>> target_flags() {
  return {{"target", &O::target, "reference (default) or megatron"},
          {"megatron-path", &O::megatron_path, "a Megatron-LM checkout to gate (default: the installed megatron-core)"},
          {"mutant", &O::mutant, "plant one bug in the target (see --list-mutants)"},
          {"candidate", &O::candidate,
           "megatron: apply a candidate design to the checkout (shard-split: the harness's own candidate of the "
           "pending GTP shard-split save, not Megatron's code; never over a checkout's own factory)"},
          {"fix", &O::fix, "megatron: apply a declared optional fix of Megatron's code (to_state_dict_order)"},
          {"corpus", &O::corpus, "corpus folder (default: the source tree's corpus/)"}};
}

template <class O>
Flag<O> model_dumps_flag() {
  return {"model-dumps", &O::model_dumps,
          "generated configurations of the model_dump group, drawn from --seed (default " +
              std::to_string(gate::kGeneratedModelDumps) + ")",
          0, kMaxModelDumps};
}

template <class O>
Flag<O> property_cases_flag() {
  return {"property-cases", &O::property_cases, "generated cases per property (default 25; 5 against megatron)", 1,
          kMaxPropertyCases};
}

/// The options that change which checks exist and what they generate.
struct Budget {
  std::uint64_t seed = 1;
  std::int64_t property_cases = 25;
  std::int64_t model_dumps = gate::kGeneratedModelDumps;
  std::string corpus;
};

std::string corpus_of(const TargetOptions& options);
Result<TargetSpec> spec_of(const TargetOptions& options);
Budget budget_of(const TargetOptions& options, const TargetSpec& spec);

/// The cross-version round trips' runners of a change against its base (both empty without a base).
struct CrossRunners {
  gate::RealRoundTripRunner base_to_new, new_to_base;
};

/// Both cross-version runners of `spec` (none without a base tree).
CrossRunners cross_runners_of(const TargetSpec& spec, std::ostream& progress, RealRoundTripBatch batch,
                              const SelectedChecks& selected = std::nullopt);

/// The gate's checks for a target; names are unique, so a token finds its check wherever it is. A Megatron
/// target (differential) also gets the real tier's round trips, run by `real` (none: they are not listed), and with
/// a base the cross-version round trips.
Result<std::vector<gate::Check>> all_checks(const Budget& budget, bool differential,
                                            const gate::RealRoundTripRunner& real = {}, const CrossRunners& cross = {});

/// The options every token of a run carries: the target and the budget.
ReproToken base_token(const TargetSpec& spec, const Budget& budget, const TargetOptions& options);

}  // namespace ih::cli
