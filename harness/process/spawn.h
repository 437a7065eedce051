// Starting a child process with its standard streams redirected: the one fork/exec of the harness.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "seam/error_kinds.h"  // Result, and the timeout and harness_error kinds

namespace ih {

/// Starts argv (searched on PATH) with fds 0/1/2 taken from the given descriptors (stdin_fd < 0:
/// /dev/null). With own_process_group the child leads a new group, so one kill reaches its children.
/// An exec failure shows up as exit status 127 with a message on the child's stderr.
Result<pid_t> spawn_child(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
                          bool own_process_group);

}  // namespace ih
