// The gate's verdict for machines and people: a JSON report, JUnit XML (one testcase per check),
// and a Markdown summary for a CI job page. Written whole or not at all (temporary file + rename).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/json_codec.h"
#include "harness/gate/gate.h"
#include "harness/gate/gate_delta.h"
#include "models/result.h"

namespace ih::report {

/// A gate with a base (--base-megatron-path, --base-ref, --base-without-mutant): the base gate's own verdict and
/// the change from it.
struct BaseRun {
  std::string target;          // describe_target() of the base
  int exit_code = 0;           // the base gate's own exit code
  std::string verdict_counts;  // gate::verdict_counts() of the base's results
  std::string tree_hash;       // its cache key ("" where it is not cached: the reference)
  bool from_cache = false;
  std::vector<gate::Change> delta;
};

/// What the run was: printed first by the gate, and the header of every report.
struct GateRun {
  std::string target;  // describe_target()
  std::uint64_t seed = 0;
  std::int64_t property_cases = 0;
  bool require_all = false;
  int exit_code = 0;
  std::optional<BaseRun> base;
  json::Json coverage;           // gate --coverage: report.json's "coverage" object (null: no coverage)
  std::string coverage_summary;  // ... summary.md's section
  std::string verdict_suffix;    // ... and what the verdict line gains (", 0 changed lines not run")
};

/// The gate's last line: gate::verdict_line, with a base followed by ", " and gate::delta_counts.
std::string verdict_line(const GateRun& run, const std::vector<gate::CheckResult>& results);

/// A failing check's picture: check name ("gate/<group>/<name>") -> SVG file name in the report folder.
using Pictures = std::map<std::string, std::string>;

std::string gate_json(const GateRun& run, const std::vector<gate::CheckResult>& results, const Pictures& pictures = {});
std::string gate_junit(const GateRun& run, const std::vector<gate::CheckResult>& results,
                       const Pictures& pictures = {});
std::string gate_markdown(const GateRun& run, const std::vector<gate::CheckResult>& results,
                          const Pictures& pictures = {});

/// Writes junit.xml, report.json and summary.md into `dir`, creating it, and for each failing check
/// with an in_proj layout an SVG of `target`'s own tiling of it beside the reference's (linked from
/// the other three); names the file it could not write.
Status write_gate_reports(const std::string& dir, const GateRun& run, const std::vector<gate::CheckResult>& results,
                          Implementation& target);

/// Whether write_gate_reports asks its target anything: a failing check with an in_proj layout to draw.
bool draws_pictures(const std::vector<gate::CheckResult>& results);

/// Whether a file name in a report folder is one write_gate_reports writes (or its .partial): the
/// files the gate removes from a reused folder before a run, so none of an earlier run's are left.
bool is_gate_report_file(std::string_view name);

/// Writes `text` to `path` through a temporary file and a rename, so a reader never sees half a file.
Status write_file_atomically(const std::string& path, const std::string& text);

}  // namespace ih::report
