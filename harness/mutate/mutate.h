// Mutation testing of Megatron's own Python code (`interop-harness mutate`): which lines to mutate (those a
// gate check runs, optionally only a change's), which checks judge a mutant (those whose coverage reaches its
// line), the overlay a mutant runs in (the checkout is never edited), and what the checks' verdicts make of
// it. The pure parts; mutate_run.h runs a campaign.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "codec/json_codec.h"
#include "harness/coverage/coverage_report.h"
#include "seam/error_kinds.h"
#include "seam/outcome.h"

namespace ih::mutate {

/// The checkpoint path, the default files of a campaign (globs relative to the tree's root; issue 32's list).
const std::vector<std::string>& checkpoint_path_globs();
/// Whether `path` ('/'-separated, relative) matches `glob` (fnmatch: '*' and '?' stay within one folder).
bool glob_matches(const std::string& glob, const std::string& path);

/// File (relative) -> lines.
using FileLines = std::map<std::string, std::set<std::int64_t>>;

/// The lines of `coverage`'s files matching any of `globs` that some check ran, only those in `changed`
/// when given (a base's change).
FileLines lines_to_mutate(const coverage::LineContexts& coverage, const std::vector<std::string>& globs,
                          const std::optional<FileLines>& changed);
/// The checks that judge a mutant of `file`:`line`: those whose context ran the line; a line run only
/// outside any check (module import) is judged by every check that ran any line of the file.
std::set<std::string> checks_reaching(const coverage::LineContexts& coverage, const std::string& file,
                                      std::int64_t line);

/// Builds in `overlay` (created; must not exist) a mirror of `tree` whose file `relative` is a real file
/// holding `text`: the folders down to it are real folders, every other entry a symlink into `tree`, and
/// no __pycache__ is mirrored on that path (a stale compiled original must not stand in for the mutant).
Status build_overlay(const std::filesystem::path& tree, const std::filesystem::path& overlay,
                     const std::string& relative, const std::string& text);

/// A check's outcome in the gate (passed, failed, known finding, ...), beside a mutant's own.
using GateOutcome = ih::Outcome;
/// One check's verdict in a gate's JSON report (docs/cli.md: checks[].outcome, detail, seconds).
struct CheckVerdict {
  GateOutcome outcome = GateOutcome::harness_error;
  std::string detail;
  double seconds = 0;
};
using GateVerdicts = std::map<std::string, CheckVerdict>;
/// The checks of a gate's --json report, their outcomes read with the gate's own words (parse_outcome); a report
/// without a checks list, or a check with an outcome the gate does not write, is invalid_argument.
Result<GateVerdicts> verdicts_of_gate_json(const std::string& text);

enum class Outcome { killed, survived, timeout, incompetent, equivalent };
std::string to_string(Outcome outcome);

/// How a mutant's gate run ended.
struct MutantRun {
  bool timed_out = false;                // the whole run passed its deadline and was killed
  std::optional<GateVerdicts> verdicts;  // none: the gate gave no report (the mutant broke the adapter's start)
  std::string why;                       // the run's error, when no report
};

/// What one mutant's run makes of it against the clean tree's verdicts of the same checks.
struct Judgement {
  Outcome outcome = Outcome::survived;
  std::vector<std::string> killed_by;  // the checks that failed for it
  std::string note;                    // why incompetent or timeout
};
/// Whether a check's outcome is a verdict (passed, failed, known finding): not a harness error, timeout or not run.
bool gave_verdict(GateOutcome outcome);

/// killed: a check FAILED where the clean tree passed, or failed differently from the clean tree (a known
/// finding matched as before is no kill); else timeout (the run or a check); else incompetent (no report, a
/// harness error, a check that ran on the clean tree and did not on the mutant, or no check with a verdict on the
/// clean tree to compare with); else survived.
/// `overlay` and `tree` let a detail that names the overlay's path compare equal to the clean one.
Judgement judge(const GateVerdicts& clean, const MutantRun& run, const std::string& overlay, const std::string& tree);

/// What judges the mutants: every program in `programs` (the gate's folder: the gate, the verifier) and the
/// adapter's Python files under `adapter`, by path, size and modification time. A campaign whose judge changed
/// half way (rebuilt, edited) would compare a mutant's verdicts with a clean run of another harness.
std::string judge_fingerprint(const std::filesystem::path& programs, const std::filesystem::path& adapter);

/// A survivor judged equivalent (corpus/mutation-equivalent/<name>.equivalent): `file:`, `line:`,
/// `operator:`, `diff-sha256:` (of the mutant's diff) and a one-line `reason:`.
struct Equivalent {
  std::string file, op, diff_sha256, reason, source;
  std::int64_t line = 0;
};
/// Every .equivalent file of `folder` (missing: none); a file lacking a field is invalid_argument naming it.
Result<std::vector<Equivalent>> load_equivalents(const std::filesystem::path& folder);

/// One mutant of a campaign and what became of it.
struct Mutant {
  std::string file, op, diff, diff_sha256, source;  // source: the mutated file's text's path
  std::int64_t line = 0;
  std::string function;  // the function holding the line ("<module>" at top level)
  /// The lines whose checks judge it: a function header's (run at import, acting when called) are its body's, a
  /// class body's statement's the class's; any other line itself (mutation_points.py `judged_by`).
  std::vector<std::int64_t> judged_by_lines;
  std::vector<std::string> checks;  // the checks that ran it
  Judgement judgement;
  double seconds = 0;
};

/// {"score", "killed", "survived", "timeout", "incompetent", "equivalent", "mutants": [{"file", "line",
/// "operator", "diff", "outcome", "checks", "killed_by", "function", "seconds", ...}], "files": {file: score},
/// "functions": {"file:function": score}}; a score is killed / (killed + survived + timeout), null when none.
json::Json campaign_json(const std::vector<Mutant>& mutants);
/// summary.md: the scores per file and function, then every survivor with file:line, its diff and its checks.
std::string campaign_summary(const std::vector<Mutant>& mutants);

}  // namespace ih::mutate
