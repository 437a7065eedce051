// Real versus synthetic (issue 17): one rank's model dump of the reference compared with a target's,
// entry by entry on kind, key, global shape, local shape, global offset, axis fragmentations, replica
// id and allow_shape_mismatch, a factory by its built pieces; paths are not compared (the real
// model's local layer spec names modules differently, the keys a checkpoint holds agree). Differences
// that cannot agree are explained rules (docs/spec-addendum.md I), each applied to the real model's
// dump where its configuration names it, and STALE when it no longer fires there.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/flat_state.h"
#include "models/model_state_dict.h"

namespace ih {

/// The `model dump` flags that print this configuration (docs/cli.md), a flag at its default left out:
/// the configuration in failure lines and printed cases.
std::string model_dump_flags(const ModelDumpSpec& spec);

/// The explained differences between the reference and Megatron's real model (spec addendum I).
enum class DumpExplanation {
  /// With --optimizer the real optimizer's common state (torch's param_groups hyperparameters and step,
  /// one dict per optimizer of a chain) is saved as plain entries the reference does not model: dropped.
  optimizer_common_state,
};

/// "optimizer_common_state".
std::string to_string(DumpExplanation rule);

/// The rules the real model's dump of `spec` needs (a rule is named by configuration: an optimizer).
std::vector<DumpExplanation> expected_explanations(const ModelDumpSpec& spec);

/// Rewrites `real` (rank `rank` of `spec`) by `rule` into the reference's form; returns how many entries
/// it rewrote (or dropped).
Result<std::int64_t> apply_explanation(DumpExplanation rule, const ModelDumpSpec& spec, std::int64_t rank,
                                       std::vector<FlatEntry>& real);

/// The compared rows of a dump, one canonical line each ("tensor key=... global_shape=[...] ..."),
/// sorted, repeated as often as they occur; a factory contributes one "factory/<kind>" row per
/// built piece, a local or plain entry its kind and path.
Result<std::vector<std::string>> dump_rows(const std::vector<FlatEntry>& entries);

/// What the two dumps disagree on: "reference only: <row>" and "target only: <row>" lines
/// (empty when they agree as multisets of rows).
Result<std::vector<std::string>> dump_differences(const std::vector<FlatEntry>& reference,
                                                  const std::vector<FlatEntry>& target);

/// One rank's comparison, the target's dump first rewritten by the expected rules when `explain`.
struct DumpComparison {
  std::vector<std::string> differences;                             // dump_differences after the rules
  std::vector<std::pair<DumpExplanation, std::int64_t>> explained;  // each expected rule and its rewrites
  /// The expected rules that rewrote nothing: the explanation no longer holds (STALE).
  std::vector<DumpExplanation> stale() const;
};
Result<DumpComparison> compare_model_dumps(const ModelDumpSpec& spec, std::int64_t rank,
                                           const std::vector<FlatEntry>& reference, std::vector<FlatEntry> target,
                                           bool explain);

}  // namespace ih
