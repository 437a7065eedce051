// Running one child process to its end with a deadline: its stdout read line by line as it
// arrives, its stderr kept as a tail, its whole process group killed at the deadline (mpirun and its
// ranks, cmake, a Python round trip).
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "seam/error_kinds.h"  // Result, and the harness_error kind

namespace ih {

/// How a child process ended.
struct ChildOutcome {
  int exit_code = -1;     // valid when !signaled && !timed_out
  bool signaled = false;  // killed by a signal it did not ask for
  int signal = 0;
  bool timed_out = false;           // we killed it (and its process group) at the deadline
  bool timed_out_starting = false;  // ... and the deadline was its start-up allowance (StartupClock)
  std::string stderr_tail;
  double seconds = 0;
};

/// Runs argv in its own process group; every stdout line goes to on_line as it arrives; stderr
/// goes to a temporary file whose tail is kept. At the deadline the whole group is killed.
Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line);

/// A child whose start-up is timed apart from its work: Megatron's imports on a 2-core machine
/// beside other worlds can take minutes, and that is not the hang a world timeout is there to catch.
/// While `starting()` answers true (asked about once a second) the allowance runs; `timeout`
/// counts from the first time it answers false.
struct StartupClock {
  std::chrono::milliseconds allowance{0};
  std::function<bool()> starting;
};
Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line, const StartupClock& startup);

}  // namespace ih
