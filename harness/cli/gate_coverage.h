// gate --coverage and --base-megatron-path: which lines of the gated Megatron tree the checks ran, and which of a
// change's lines none ran (docs/coverage.md). Collection is on before the target starts and read after every
// Megatron process has ended.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/coverage/coverage_findings.h"
#include "harness/gate/gate.h"
#include "harness/report/gate_report.h"
#include "harness/targets/targets.h"

namespace ih::cli {

/// One gate's coverage run.
struct GateCoverage {
  std::string tree_root;                 // the gated tree (canonical)
  std::string data_dir;                  // where every process writes its data (report/coverage, else temporary)
  bool in_report = false;                // data_dir lies in the report folder and stays
  std::optional<std::string> base_root;  // the change's base tree
  bool require_changed_lines_run = false;
};

/// The coverage run a gate's flags ask for (none: nullopt), checked before anything runs. Coverage needs a megatron
/// target with --megatron-path; --require-changed-lines-run needs a base: else invalid_argument.
Result<std::optional<GateCoverage>> plan_gate_coverage(bool coverage, bool require_changed_lines_run,
                                                       const TargetSpec& spec,
                                                       const std::optional<std::string>& report);

/// Coverage on for every process started from now on (after the base's gate: only the gated tree's checks count).
void start_gate_coverage(const GateCoverage& coverage);

/// Once every Megatron process ended: coverage.py's combined data and JSON report, what the gate says of them put
/// into `run` (its report.json object, summary.md section and verdict line), and with --require-changed-lines-run
/// a change's line no check ran fails a run that had passed. No data file at all (no Megatron process started, or
/// an adapter that collects nothing) is reported as not measured, changed lines unknown, never as "0 not run".
/// Collection is off afterwards. A coverage.py or git that fails is a harness_error.
Status finish_gate_coverage(const GateCoverage& coverage, report::GateRun& run, std::ostream& progress);

/// The gate check each process records under from now on (run_checks' before_each).
void name_coverage_context(const gate::Check& check);

}  // namespace ih::cli
