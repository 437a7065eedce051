#include "seam/outcome.h"

#include <algorithm>
#include <string>

namespace ih {

std::string_view to_string(Outcome outcome) {
  switch (outcome) {
    case Outcome::passed: return "passed";
    case Outcome::failed: return "failed";
    case Outcome::not_run: return "not run";
    case Outcome::known_finding: return "known finding";
    case Outcome::harness_error: return "harness error";
    case Outcome::timeout: return "timeout";
  }
  return "?";
}

Result<Outcome> parse_outcome(std::string_view text) {
  for (const Outcome outcome : kAllOutcomes)
    if (to_string(outcome) == text) return outcome;
  return make_error(ErrorKind::invalid_argument, "unknown check outcome '" + std::string(text) + "'");
}

Outcome outcome_of_error(ErrorKind kind) {
  if (kind == seam_kind::unsupported) return Outcome::not_run;
  if (kind == seam_kind::timeout) return Outcome::timeout;
  if (kind == seam_kind::harness_error) return Outcome::harness_error;
  return Outcome::failed;
}

int exit_code_of(const std::vector<Outcome>& outcomes) {
  const auto any = [&](Outcome o) { return std::find(outcomes.begin(), outcomes.end(), o) != outcomes.end(); };
  if (any(Outcome::harness_error)) return kExitHarnessError;
  if (any(Outcome::timeout)) return kExitTimeout;
  if (any(Outcome::failed)) return kExitCheckFailed;
  const bool nothing_ran =
      std::all_of(outcomes.begin(), outcomes.end(), [](Outcome o) { return o == Outcome::not_run; });
  return nothing_ran ? kExitNothingRan : kExitOk;
}

}  // namespace ih
