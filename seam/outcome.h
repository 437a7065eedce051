// One typed outcome for every check, property, round trip and command: what happened, never a
// string to search. Exit codes follow from it and are the same in every command (docs/cli.md).
#pragma once

#include <string_view>
#include <vector>

#include "models/result.h"
#include "seam/error_kinds.h"

namespace ih {

enum class Outcome {
  passed,         // ran and held
  failed,         // ran and found a problem in the target (a finding)
  not_run,        // could not run here (the reason travels beside it); never a pass
  known_finding,  // failed exactly as a pinned, explained finding in the target says it does
  harness_error,  // the harness itself broke (a subprocess died, a protocol broke): no verdict
  timeout,        // the target or a rank did not answer in time: no verdict
};

/// Process exit codes, one table for every command.
enum ExitCode : int {
  kExitOk = 0,            // every check that ran passed (known findings and NOT RUN lines are shown)
  kExitCheckFailed = 1,   // a finding
  kExitBadInput = 2,      // the command line or an input file was wrong
  kExitHarnessError = 3,  // the harness broke
  kExitTimeout = 4,       // something did not answer in time
  kExitNothingRan = 5,    // nothing could run here (every check NOT RUN): nothing was verified
};

/// "passed", "failed", "not run", "known finding", "harness error", "timeout".
std::string_view to_string(Outcome outcome);
/// The outcome to_string wrote (a report read back); any other word is invalid_argument naming it.
Result<Outcome> parse_outcome(std::string_view text);
/// Every outcome, in declaration order.
inline constexpr Outcome kAllOutcomes[] = {Outcome::passed,        Outcome::failed,        Outcome::not_run,
                                           Outcome::known_finding, Outcome::harness_error, Outcome::timeout};
/// The outcome of a check whose target answered with `error` instead of an answer: an operation the
/// target lacks is not run; a timeout or a harness fault is no verdict; anything else is a finding
/// (an exception inside Megatron on a valid configuration is one).
Outcome outcome_of_error(ErrorKind kind);
/// The exit code of a run whose checks ended in `outcomes` (harness errors and timeouts outrank findings:
/// a broken run says nothing about the target).
int exit_code_of(const std::vector<Outcome>& outcomes);

}  // namespace ih
