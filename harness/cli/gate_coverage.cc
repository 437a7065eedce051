#include "harness/cli/gate_coverage.h"

#include <unistd.h>

#include <filesystem>
#include <ostream>

#include "harness/coverage/coverage_collect.h"
#include "harness/coverage/coverage_context.h"
#include "harness/megatron/megatron_implementation.h"

namespace ih::cli {
namespace {

// coverage.py's combine and JSON report of a gate's data (hundreds of files with contexts), and a tree's diff.
constexpr std::chrono::minutes kCoverageToolTimeout{10};

Result<std::string> tree_of(const std::string& path, const std::string& flag) {
  std::error_code error;
  const auto root = std::filesystem::canonical(path, error);
  if (error || !std::filesystem::is_directory(root / "megatron", error))
    return make_error(ErrorKind::invalid_argument, flag + " " + path + " is not a Megatron-LM tree (no megatron/)");
  return root.string();
}

/// The data folder: the report's coverage/ (an earlier run's data files removed), else a fresh temporary one.
Result<std::string> data_folder(const std::optional<std::string>& report) {
  std::error_code error;
  if (!report) {
    std::string pattern = (std::filesystem::temp_directory_path(error) / "ih-coverage-XXXXXX").string();
    if (!mkdtemp(pattern.data())) return make_error(seam_kind::harness_error, "cannot make a folder for coverage data");
    return pattern;
  }
  const std::filesystem::path dir = std::filesystem::path(*report) / "coverage";
  std::filesystem::create_directories(dir, error);
  if (error) return make_error(ErrorKind::invalid_argument, "cannot make " + dir.string() + ": " + error.message());
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(".coverage", 0) == 0 || name == "coverage.json") std::filesystem::remove(entry.path(), error);
  }
  return dir.string();
}

}  // namespace

Result<std::optional<GateCoverage>> plan_gate_coverage(bool coverage, bool require_changed_lines_run,
                                                       const TargetSpec& spec,
                                                       const std::optional<std::string>& report) {
  if (require_changed_lines_run && !spec.base_megatron_path)
    return make_error(ErrorKind::invalid_argument, "--require-changed-lines-run needs --base-megatron-path");
  if (!coverage && !spec.base_megatron_path) return std::optional<GateCoverage>();
  if (spec.target != TargetKind::megatron || !spec.megatron_path)
    return make_error(ErrorKind::invalid_argument,
                      std::string(coverage ? "--coverage" : "--base-megatron-path") +
                          " measures a Megatron-LM tree: give --target megatron --megatron-path DIR");
  GateCoverage out;
  IH_TRY_ASSIGN(tree, tree_of(*spec.megatron_path, "--megatron-path"));
  out.tree_root = tree;
  if (spec.base_megatron_path) {
    IH_TRY_ASSIGN(base, tree_of(*spec.base_megatron_path, "--base-megatron-path"));
    out.base_root = base;
  }
  IH_TRY_ASSIGN(dir, data_folder(report));
  out.data_dir = dir, out.in_report = report.has_value();
  out.require_changed_lines_run = require_changed_lines_run;
  return std::optional<GateCoverage>(out);
}

void start_gate_coverage(const GateCoverage& coverage) {
  coverage::enable({coverage.data_dir, std::filesystem::path(coverage.tree_root) / "megatron"});
}

void name_coverage_context(const gate::Check& check) { coverage::set_context(check.check_name()); }

namespace {

/// What the gate says of `findings`: into `run` (its report.json object, summary.md section and verdict line) and on
/// the console; with --require-changed-lines-run a change's line no check ran, or lines nobody could measure, fail
/// a run that had passed.
void put_findings(const GateCoverage& coverage, const coverage::CoverageFindings& findings, report::GateRun& run,
                  std::ostream& progress) {
  run.coverage = coverage::findings_json(findings);
  run.coverage_summary = coverage::findings_markdown(findings);
  run.verdict_suffix = coverage::verdict_suffix(findings);
  progress << "\n" << coverage::findings_markdown(findings, false);
  if (!coverage.require_changed_lines_run || run.exit_code != kExitOk) return;
  if (!findings.not_measured.empty()) {
    progress << "--require-changed-lines-run: which changed lines ran is unknown (no coverage data); the gate fails\n";
    run.exit_code = kExitCheckFailed;
  } else if (findings.changed && !findings.changed->not_run.empty()) {
    progress << "--require-changed-lines-run: " << findings.changed->not_run.size()
             << " changed lines no check ran fail the gate\n";
    run.exit_code = kExitCheckFailed;
  }
}

}  // namespace

Status finish_gate_coverage(const GateCoverage& coverage, report::GateRun& run, std::ostream& progress) {
  coverage::disable();
  const std::filesystem::path dir(coverage.data_dir);
  coverage::CoverageFindings findings;
  findings.changed_asked = coverage.base_root.has_value();
  if (!coverage::has_data_files(coverage.data_dir)) {
    // Not a harness failure and never "0 not run": no Megatron process started (every check NOT RUN) or the
    // adapter collects nothing.
    findings.not_measured = "no Megatron process recorded coverage data";
  } else {
    IH_TRY_STATUS(coverage::combine_and_report(default_megatron_python(), coverage.data_dir, coverage.tree_root,
                                               kCoverageToolTimeout));
    IH_TRY_ASSIGN(files, coverage::read_coverage_files((dir / "coverage.json").string(), coverage.tree_root));
    findings.checkpoint_path = coverage::checkpoint_path_coverage(files);
    if (coverage.in_report)
      findings.data_file = (dir / ".coverage").string(), findings.json_report = (dir / "coverage.json").string();
    if (coverage.base_root) {
      IH_TRY_ASSIGN(changed, coverage::changed_lines(*coverage.base_root, coverage.tree_root, kCoverageToolTimeout));
      findings.changed = coverage::changed_lines_coverage(changed, files);
    }
  }
  if (!coverage.in_report) std::filesystem::remove_all(dir);
  put_findings(coverage, findings, run, progress);
  return Ok{};
}

}  // namespace ih::cli
