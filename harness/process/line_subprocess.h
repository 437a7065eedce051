// A child process spoken to in lines: one request line on stdin, one reply line on stdout,
// each reply awaited with a timeout. Stderr goes to a temporary file kept for reports.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "seam/error_kinds.h"  // Result, and the timeout and harness_error kinds

namespace ih {

class LineSubprocess {
 public:
  /// Starts argv[0] (searched on PATH) with argv; an exec failure shows up as a closed stdout.
  static Result<LineSubprocess> start(const std::vector<std::string>& argv);
  LineSubprocess(LineSubprocess&& other) noexcept;
  LineSubprocess& operator=(LineSubprocess&&) = delete;
  ~LineSubprocess();

  /// Writes `line` + '\n' and reads one reply line. A timeout kills the child (seam_kind::timeout).
  Result<std::string> request(const std::string& line, std::chrono::milliseconds timeout);
  /// What the child wrote on stderr so far (last `max_bytes`).
  std::string stderr_tail(std::size_t max_bytes = 4000) const;
  bool running() const { return pid_ > 0; }
  /// How long the child gets to end by itself once its input is closed, before its group is killed (default
  /// 1 s; a child that writes files as it ends, e.g. coverage data, needs more).
  void set_stop_grace(std::chrono::milliseconds grace) { stop_grace_ = grace; }

 private:
  LineSubprocess() = default;
  void stop();

  pid_t pid_ = -1;
  int stdin_fd_ = -1;
  int stdout_fd_ = -1;
  std::string stderr_path_;
  std::string buffer_;  // bytes read past the last reply's newline
  std::chrono::milliseconds stop_grace_{1000};
};

}  // namespace ih
