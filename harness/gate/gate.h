// The gate: pinned cases and built-in scenarios run against one Implementation, with progress
// lines and a summary table. The same checks judge the reference, a mutant or a real Megatron.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "seam/implementation.h"

namespace ih::gate {

struct CheckResult {
  std::string group;
  std::string name;
  enum class Verdict { passed, failed, unsupported } verdict = Verdict::passed;
  std::string detail;  // the first disagreement, readable
  double seconds = 0;
};

/// One named check; it returns "" when it passes, else what went wrong.
struct Check {
  std::string group;
  std::string name;
  std::function<Result<std::string>(Implementation&)> run;
};

/// Pinned layer-map cases from corpus/pinned/layer_maps.jsonl (expected answers from the spec).
Result<std::vector<Check>> pinned_layer_map_checks(const std::string& corpus_dir);
/// GPT->Hybrid retarget scenarios over all ranks of built-in layouts (spec 2.9).
std::vector<Check> retarget_scenario_checks();

/// Reference vs target on generated inputs (meaningful when the target is not the reference).
std::vector<Check> differential_checks();
/// Split factory chunks, Megatron's validation verdicts and FSDP trees, reference vs target.
std::vector<Check> layout_differential_checks();

/// Runs the checks, printing "INFO: [i/n] group: name ... ok|FAILED" to `progress`.
std::vector<CheckResult> run_checks(Implementation& target, const std::vector<Check>& checks, std::ostream& progress);
/// A table of groups with passed / failed / unsupported counts, then every failure's detail.
std::string summary_table(const std::vector<CheckResult>& results);

}  // namespace ih::gate
