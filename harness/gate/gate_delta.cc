#include "harness/gate/gate_delta.h"

#include "harness/gate/real_roundtrip_runner.h"

#include <algorithm>
#include <map>
#include <set>
#include <sstream>

namespace ih::gate {
namespace {

bool is_verdict(Outcome o) { return o == Outcome::passed || o == Outcome::failed || o == Outcome::known_finding; }
bool no_verdict(Outcome o) { return o == Outcome::harness_error || o == Outcome::timeout; }

/// What a failure is, to tell "failing differently" from the same failure: a typed check's violations (their kind
/// and key, not their text), else its detail.
std::string failure_signature(const CheckAnswer& answer) {
  if (answer.violations.empty()) return answer.detail;
  std::set<std::string> typed;
  for (const Violation& v : answer.violations) typed.insert(v.kind + " " + v.key);
  std::string signature;
  for (const std::string& v : typed) signature += v + "\n";
  return signature;
}

/// The change from `base` to `now` where both sides have the check; nullopt where the verdict is the same.
std::optional<ChangeKind> change_of(const CheckResult& base, const CheckResult& now) {
  const Outcome b = base.answer.outcome, n = now.answer.outcome;
  if (b == n) {
    const bool differs = n == Outcome::failed && failure_signature(base.answer) != failure_signature(now.answer);
    return differs ? std::optional(ChangeKind::failing_differently) : std::nullopt;
  }
  switch (n) {
    case Outcome::failed:
      return b == Outcome::known_finding ? ChangeKind::failing_differently : ChangeKind::new_failure;
    case Outcome::known_finding:
      if (b == Outcome::failed) return ChangeKind::known_now;
      return b == Outcome::passed    ? ChangeKind::new_failure
             : b == Outcome::not_run ? ChangeKind::runs_now
                                     : ChangeKind::verdict_again;
    case Outcome::not_run: return is_verdict(b) ? ChangeKind::stopped_running : ChangeKind::verdict_again;
    case Outcome::harness_error:
    case Outcome::timeout: return no_verdict(b) ? std::nullopt : std::optional(ChangeKind::no_verdict_now);
    case Outcome::passed:
      if (b == Outcome::failed) return ChangeKind::fixed;
      if (b == Outcome::known_finding) return ChangeKind::finding_stale;
      return b == Outcome::not_run ? ChangeKind::runs_now : ChangeKind::verdict_again;
  }
  return std::nullopt;
}

/// The order of the change section: worse, then no verdict now, then the rest.
int rank_of(const Change& c) { return c.worse() ? 0 : c.kind == ChangeKind::no_verdict_now ? 1 : 2; }

}  // namespace

std::string_view to_string(ChangeKind kind) {
  switch (kind) {
    case ChangeKind::new_failure: return "new_failure";
    case ChangeKind::failing_differently: return "failing_differently";
    case ChangeKind::stopped_running: return "stopped_running";
    case ChangeKind::no_verdict_now: return "no_verdict_now";
    case ChangeKind::fixed: return "fixed";
    case ChangeKind::finding_stale: return "finding_stale";
    case ChangeKind::known_now: return "known_now";
    case ChangeKind::runs_now: return "runs_now";
    case ChangeKind::verdict_again: return "verdict_again";
    case ChangeKind::only_on_base: return "only_on_base";
  }
  return "?";
}

bool Change::worse() const {
  return kind == ChangeKind::new_failure || kind == ChangeKind::failing_differently ||
         kind == ChangeKind::stopped_running;
}

std::vector<Change> gate_delta(const std::vector<CheckResult>& base, const std::vector<CheckResult>& now) {
  std::map<std::string, const CheckResult*> on_base;
  for (const CheckResult& r : base) on_base[gate_check_name(r.group, r.name)] = &r;
  std::vector<Change> delta;
  for (const CheckResult& r : now) {
    // The cross-version round trips compare the two trees themselves: only the gated side has them, and they are
    // its own verdicts, not a move between the sides.
    if (r.group == kRealRoundTripCrossGroup) continue;
    const std::string check = gate_check_name(r.group, r.name);
    const auto found = on_base.find(check);
    if (found == on_base.end()) {  // a check the base gate lacked: judged as if it had not run there
      CheckResult absent = r;
      absent.answer = CheckAnswer{};
      absent.answer.outcome = Outcome::not_run;
      if (const auto kind = change_of(absent, r))
        delta.push_back({check, *kind, "absent", progress_word(r), r.answer.detail});
      continue;
    }
    const CheckResult& b = *found->second;
    on_base.erase(found);
    if (const auto kind = change_of(b, r))
      delta.push_back({check, *kind, progress_word(b), progress_word(r), r.answer.detail});
  }
  for (const CheckResult& b : base)  // in the base's order
    if (on_base.count(gate_check_name(b.group, b.name)))
      delta.push_back(
          {gate_check_name(b.group, b.name), ChangeKind::only_on_base, progress_word(b), "absent", b.answer.detail});
  std::stable_sort(delta.begin(), delta.end(),
                   [](const Change& x, const Change& y) { return rank_of(x) < rank_of(y); });
  return delta;
}

int exit_with_delta(int absolute, const std::vector<Change>& delta) {
  const bool worse = std::any_of(delta.begin(), delta.end(), [](const Change& c) { return c.worse(); });
  return worse ? kExitCheckFailed : absolute;
}

std::string delta_counts(const std::vector<Change>& delta) {
  int worse = 0, better = 0, other = 0;
  for (const Change& c : delta) {
    const bool improved = c.kind == ChangeKind::fixed || c.kind == ChangeKind::finding_stale ||
                          c.kind == ChangeKind::known_now || c.kind == ChangeKind::runs_now ||
                          c.kind == ChangeKind::verdict_again;
    (c.worse() ? worse : improved ? better : other) += 1;
  }
  return "against base: " + std::to_string(worse) + " worse, " + std::to_string(better) + " better, " +
         std::to_string(other) + " other";
}

std::string change_section(const std::string& base_target, const std::vector<Change>& delta) {
  std::ostringstream out;
  out << "CHANGE against base " << base_target << ": ";
  if (delta.empty()) return out.str() + "none (every check's verdict is the base's)\n";
  out << delta.size() << (delta.size() == 1 ? " check differs" : " checks differ") << "\n";
  for (const Change& c : delta) {
    out << (c.worse()                              ? "WORSE "
            : c.kind == ChangeKind::no_verdict_now ? "NO VERDICT "
                                                   : "CHANGED ")
        << c.check << ": " << c.now << " (base: " << c.base << ") " << to_string(c.kind) << "\n";
    if (!c.detail.empty()) out << "      " << c.detail.substr(0, c.detail.find('\n')) << "\n";
  }
  return out.str();
}

}  // namespace ih::gate
