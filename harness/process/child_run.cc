#include "harness/process/child_run.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "harness/process/run_scope.h"
#include "harness/process/spawn.h"

namespace ih {
namespace {

std::string read_tail(const std::string& path, std::size_t max_bytes) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

/// The child's stdout pipe and the temporary file its stderr goes to.
struct ChildOutputs {
  int stdout_read = -1, stdout_write = -1, stderr_fd = -1;
  std::string stderr_path;
};

/// Makes the stdout pipe and the stderr file; on a failure releases what it made.
Result<ChildOutputs> open_outputs() {
  ChildOutputs out;
  out.stderr_path = temp_dir() + "/interop-harness-stderr-XXXXXX";
  out.stderr_fd = mkostemp(out.stderr_path.data(), O_CLOEXEC);
  if (out.stderr_fd < 0)
    return make_error(seam_kind::harness_error,
                      "cannot create a stderr file under " + temp_dir() + " ($TMPDIR): " + std::strerror(errno));
  int from_child[2];
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    const Error error =
        make_error(seam_kind::harness_error, std::string("cannot create pipes: ") + std::strerror(errno));
    close(out.stderr_fd), unlink(out.stderr_path.c_str());
    return error;
  }
  out.stdout_read = from_child[0], out.stdout_write = from_child[1];
  return out;
}

/// When the child's time is up: the start-up allowance while `startup.starting()` answers true (asked
/// about once a second), then `timeout` from the first time it answers false.
class ChildClock {
 public:
  ChildClock(std::chrono::milliseconds timeout, const StartupClock& startup)
      : timeout_(timeout),
        startup_(startup),
        starting_(static_cast<bool>(startup.starting)),
        deadline_(std::chrono::steady_clock::now() + (starting_ ? startup.allowance : timeout)),
        next_start_check_(std::chrono::steady_clock::now()) {}

  /// The time left (none or less: the deadline has passed).
  std::chrono::milliseconds left() {
    const auto now = std::chrono::steady_clock::now();
    if (starting_ && now >= next_start_check_) {
      next_start_check_ = now + std::chrono::seconds(1);
      if (!startup_.starting()) starting_ = false, deadline_ = now + timeout_;
    }
    return std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - std::chrono::steady_clock::now());
  }
  bool starting() const { return starting_; }

 private:
  std::chrono::milliseconds timeout_;
  const StartupClock& startup_;
  bool starting_;
  std::chrono::steady_clock::time_point deadline_, next_start_check_;
};

/// Stdout bytes handed to `on_line` one complete line at a time.
class LineSplitter {
 public:
  explicit LineSplitter(const std::function<void(const std::string&)>& on_line) : on_line_(on_line) {}
  void add(const char* bytes, std::size_t n) {
    buffer_.append(bytes, n);
    for (std::size_t nl; (nl = buffer_.find('\n')) != std::string::npos;) {
      on_line_(buffer_.substr(0, nl));
      buffer_.erase(0, nl + 1);
    }
  }
  /// The last line, which lacks its newline.
  void finish() {
    if (!buffer_.empty()) on_line_(buffer_), buffer_.clear();
  }

 private:
  const std::function<void(const std::string&)>& on_line_;
  std::string buffer_;
};

/// Reads what the child wrote within `wait_ms`; false at the end of its output.
bool read_some(int fd, int wait_ms, LineSplitter& lines) {
  pollfd ready{fd, POLLIN, 0};
  if (poll(&ready, 1, wait_ms) <= 0) return true;
  char chunk[65536];
  const ssize_t n = read(fd, chunk, sizeof chunk);
  if (n > 0) lines.add(chunk, static_cast<std::size_t>(n));
  return n > 0 || (n < 0 && errno == EINTR);
}

/// What the child wrote before it exited and is still in the pipe.
void drain(int fd, LineSplitter& lines) {
  for (char chunk[65536];;) {
    pollfd ready{fd, POLLIN, 0};
    if (poll(&ready, 1, 0) <= 0) break;
    const ssize_t n = read(fd, chunk, sizeof chunk);
    if (n <= 0) break;
    lines.add(chunk, static_cast<std::size_t>(n));
  }
}

bool has_exited(pid_t pid) {
  siginfo_t info{};  // looked at without reaping, so the group id stays ours while stray workers are killed
  return waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

/// Ends the child's whole process group and reaps the child: SIGTERM first (mpirun forwards it to its ranks,
/// which lead their own process groups, and cleans up), then after up to 5 s SIGKILL for what is left.
int end_group(pid_t pid) {
  kill(-pid, SIGTERM);
  for (int i = 0; i < 50 && !has_exited(pid); ++i) usleep(100000);
  int status = 0;
  kill(-pid, SIGKILL);
  forget_child(pid);
  waitpid(pid, &status, 0);
  return status;
}

/// Watches a started child to its end or its deadline, its stdout lines to `on_line` as they arrive.
ChildOutcome watch(pid_t pid, int stdout_fd, ChildClock& clock,
                   const std::function<void(const std::string&)>& on_line) {
  ChildOutcome out;
  LineSplitter lines(on_line);
  int status = 0;
  for (bool open = true;;) {
    const auto left = clock.left();
    if (left.count() <= 0) {
      status = end_group(pid);
      out.timed_out = true, out.timed_out_starting = clock.starting();
      break;
    }
    if (open)
      open = read_some(stdout_fd, static_cast<int>(std::min<std::int64_t>(left.count(), 200)), lines);
    else
      usleep(20000);
    if (has_exited(pid)) {
      kill(-pid, SIGKILL);  // rank workers a crashed parent left behind, if any
      forget_child(pid);
      waitpid(pid, &status, 0);
      break;
    }
  }
  if (!out.timed_out) drain(stdout_fd, lines);
  lines.finish();
  if (!out.timed_out && WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
  if (!out.timed_out && WIFSIGNALED(status)) out.signaled = true, out.signal = WTERMSIG(status);
  return out;
}

}  // namespace

Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line) {
  return run_child(argv, timeout, on_line, StartupClock{});
}

Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line, const StartupClock& startup) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  IH_TRY_ASSIGN(outputs, open_outputs());
  const auto started = std::chrono::steady_clock::now();
  ChildClock clock(timeout, startup);
  // Its own process group: a timeout kills the rank workers too.
  auto spawned = spawn_child(argv, -1, outputs.stdout_write, outputs.stderr_fd, true);
  close(outputs.stdout_write), close(outputs.stderr_fd);
  if (!spawned.ok()) {  // release everything this call made before it returns
    close(outputs.stdout_read), unlink(outputs.stderr_path.c_str());
    return spawned.error();
  }
  ChildOutcome out = watch(*spawned, outputs.stdout_read, clock, on_line);
  close(outputs.stdout_read);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out.stderr_tail = read_tail(outputs.stderr_path, 6000);
  unlink(outputs.stderr_path.c_str());
  return out;
}

}  // namespace ih
