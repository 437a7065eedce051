// What a change did to the gate's verdicts: the checks whose verdict on the new tree differs from the one on
// its base tree, each typed (a new failure, fixed, a known finding gone stale, ...), the worse ones first.
// Pure: two runs' in-memory results in, the delta out; the gate prints it before the new tree's own verdict.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "harness/gate/gate.h"

namespace ih::gate {

/// How one check's verdict moved from the base to the new tree.
enum class ChangeKind {
  new_failure,          // FAILED (or a known finding) now; passed, NOT RUN or absent on the base
  failing_differently,  // failed on the base too (or was its known finding), with another failure now
  stopped_running,      // a verdict on the base (passed, failed or a known finding), NOT RUN now
  no_verdict_now,       // a verdict or NOT RUN on the base, a harness error or a timeout now
  fixed,                // failed on the base, passes now
  finding_stale,        // the base's known finding passes now: its pin is stale
  known_now,            // failed on the base, fails now exactly as its pinned known finding
  runs_now,             // NOT RUN on the base, passes now
  verdict_again,        // a harness error or a timeout on the base, passes or is NOT RUN now
  only_on_base,         // the base gate had this check, the new one does not
};

/// The stable word of a change (report.json "change"), e.g. "new_failure", "finding_stale".
std::string_view to_string(ChangeKind kind);

/// One check whose verdict differs.
struct Change {
  std::string check;  // "gate/<group>/<name>"
  ChangeKind kind = ChangeKind::new_failure;
  std::string base, now;  // each side's verdict: progress_word() ("absent" where it had no such check)
  std::string detail;     // the new side's failure or reason (the base's for only_on_base)
  /// Whether the change made the check worse: new_failure, failing_differently and stopped_running (a check that
  /// did not run is never a pass). A harness error or timeout now is no verdict either way: its exit is the gate's.
  bool worse() const;
};

/// The changes, worse ones first, then no verdict now, then the rest, each part in the new run's check order.
/// Same results on both sides: none.
std::vector<Change> gate_delta(const std::vector<CheckResult>& base, const std::vector<CheckResult>& now);

/// The gate's exit with a base: 1 when the change made a check worse, else the new tree's own exit (`absolute`,
/// which already says 1 for every FAILED check, whatever the base did).
int exit_with_delta(int absolute, const std::vector<Change>& delta);

/// "against base: 1 worse, 2 better, 0 other": what the gate appends to its verdict line with a base.
std::string delta_counts(const std::vector<Change>& delta);

/// The change section the gate prints first: a heading naming the base and the count, then one line per change,
/// "WORSE <check>: FAILED (base: ok) new_failure" with its detail indented; "none" when empty.
std::string change_section(const std::string& base_target, const std::vector<Change>& delta);

}  // namespace ih::gate
