// One run of the harness: its private temporary folder, the child processes it started, and what
// SIGINT and SIGTERM do to both (end every child, remove the folder, exit 128 + the signal).
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "seam/error_kinds.h"  // Result, Status, and the harness_error kind

namespace ih {

/// Starts the run. Call first thing in main, before any thread exists: it blocks SIGINT and SIGTERM
/// (every later thread inherits that; spawn_child unblocks them in its children), makes a private run
/// folder under $TMPDIR (else /tmp) and points TMPDIR at it, so every temporary file of the harness and
/// of its children (the adapter's worlds, mpirun's session folders) lands there. Where no folder can be
/// made there the run goes on without one ($TMPDIR unchanged): what needs a temporary file fails naming it. A thread
/// then waits for the signals; on one it starts nothing more, ends every child (its process group and every descendant:
/// SIGTERM, SIGKILL after a grace), removes the run folder and exits 130 (SIGINT) or 143 (SIGTERM).
Status begin_run();

/// The normal end of a run: removes the run folder and returns `code`. While an interrupt is being
/// handled it waits for that instead, whose exit code wins.
int end_run(int code);

/// $TMPDIR when set (inside a run: its run folder), else /tmp.
std::string temp_dir();

/// Runs `fork_child` (which forks and returns the child's pid) under the run's lock and records the
/// child, so an interrupt never misses it; refuses (harness_error) once the run is being interrupted.
/// A child that leads its own process group is ended with its whole group.
Result<pid_t> start_tracked_child(const std::function<Result<pid_t>()>& fork_child);

/// Forgets a child before it is reaped, so its pid or group id, reused later, is never signalled.
void forget_child(pid_t pid);

}  // namespace ih
