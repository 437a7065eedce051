// What the gate says about a coverage report of a Megatron tree (gate --coverage, docs/coverage.md): the checkpoint
// path's functions no check ran (a declared table of files and function names), and, given a base tree, the
// change's executable lines no check ran, each with its file and function.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "codec/json_codec.h"
#include "harness/coverage/coverage_report.h"

namespace ih::coverage {

/// One row of the checkpoint path: functions whose name matches `function_glob` in files matching `file_glob`
/// (fnmatch globs; '*' crosses '/', relative to the tree root).
struct CheckpointPathRule {
  const char* file_glob;
  const char* function_glob;
};
/// The checkpoint path: dist_checkpointing/, the models' and optimizers' sharded_state_dict and load paths,
/// training/checkpointing.py.
const std::vector<CheckpointPathRule>& checkpoint_path_table();
/// Whether function `function` of file `file` is on the checkpoint path (module level never is).
bool on_checkpoint_path(const std::string& file, const std::string& function);

struct FunctionNeverRun {
  std::string file, function;
  std::int64_t start_line = 0, statements = 0;
};
/// A file's share of the checkpoint path: its functions on it, how many ran, their statements and how many ran.
struct FileShare {
  std::string file;
  std::int64_t functions = 0, functions_run = 0, statements = 0, statements_run = 0;
};
struct CheckpointPathCoverage {
  std::vector<FunctionNeverRun> never_run;  // by file, then line
  std::vector<FileShare> files;             // every file with a function on the path
};
CheckpointPathCoverage checkpoint_path_coverage(const CoverageFiles& files);

/// File (relative to the tree root) -> the lines of the new tree a change added or modified.
using ChangedLines = std::map<std::string, std::set<std::int64_t>>;
/// The new side's added and modified lines of `git diff --no-index -U0 BASE NEW` output, for files inside
/// `new_root` (an absolute path, as the diff was given it); deleted files add nothing.
ChangedLines new_lines_of_diff(std::string_view diff, const std::string& new_root);

struct ChangedLineNotRun {
  std::string file, function;
  std::int64_t line = 0;
};
struct ChangedLinesCoverage {
  std::int64_t changed_statements = 0;  // changed lines that are executable statements (coverage.py's analysis)
  std::vector<ChangedLineNotRun> not_run;
};
/// The changed lines that are statements, and those of them no process ran.
ChangedLinesCoverage changed_lines_coverage(const ChangedLines& changed, const CoverageFiles& files);

/// What one gate run found; `changed` only with a base.
struct CoverageFindings {
  CheckpointPathCoverage checkpoint_path;
  std::optional<ChangedLinesCoverage> changed;
  std::string data_file, json_report;  // where the combined data and coverage.json were left ("" if not kept)
  // Why nothing was measured ("" when something was): then no line counts as run or not run, and with a base
  // (`changed_asked`) which changed lines ran is unknown.
  std::string not_measured;
  bool changed_asked = false;
};
/// report.json's "coverage" object (docs/json-formats.md).
json::Json findings_json(const CoverageFindings& findings);
/// summary.md's section; the console's leaves out the checkpoint path's tables (`with_checkpoint_path` false).
std::string findings_markdown(const CoverageFindings& findings, bool with_checkpoint_path = true);
/// What the verdict line gains: ", N checkpoint-path functions never run" and with a base ", N changed lines not run";
/// nothing measured: ", coverage not measured" (with a base: "(changed lines unknown)").
std::string verdict_suffix(const CoverageFindings& findings);

}  // namespace ih::coverage
