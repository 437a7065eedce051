#include "harness/process/line_subprocess.h"

#include "harness/process/run_scope.h"
#include "harness/process/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

namespace ih {

namespace {

// The descriptors and temporary file start() creates, released on every error path.
struct StartResources {
  std::string stderr_path = temp_dir() + "/interop-harness-stderr-XXXXXX";
  int stderr_fd = -1;
  int to_child[2] = {-1, -1};
  int from_child[2] = {-1, -1};

  ~StartResources() {
    for (int fd : {stderr_fd, to_child[0], to_child[1], from_child[0], from_child[1]})
      if (fd >= 0) close(fd);
    if (stderr_fd >= 0) unlink(stderr_path.c_str());  // still ours: start() failed
  }
};

}  // namespace

Result<LineSubprocess> LineSubprocess::start(const std::vector<std::string>& argv) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  StartResources r;
  // Close-on-exec everywhere: no other child started meanwhile may inherit these.
  r.stderr_fd = mkostemp(r.stderr_path.data(), O_CLOEXEC);
  if (r.stderr_fd < 0)
    return make_error(seam_kind::harness_error,
                      "cannot create a stderr file under " + temp_dir() + " ($TMPDIR): " + std::strerror(errno));
  if (pipe2(r.to_child, O_CLOEXEC) != 0 || pipe2(r.from_child, O_CLOEXEC) != 0)
    return make_error(seam_kind::harness_error, std::string("cannot create pipes: ") + std::strerror(errno));
  // Our end of the child's stdin never blocks, so a child that stops reading cannot outlast a timeout.
  if (fcntl(r.to_child[1], F_SETFL, fcntl(r.to_child[1], F_GETFL) | O_NONBLOCK) != 0)
    return make_error(seam_kind::harness_error, std::string("cannot set up the pipe: ") + std::strerror(errno));
  signal(SIGPIPE, SIG_IGN);  // a dead child must give an error, not kill the harness
  // Its own process group: stop() and an interrupt end what it started too (the adapter's world workers).
  IH_TRY_ASSIGN(pid, spawn_child(argv, r.to_child[0], r.from_child[1], r.stderr_fd, true));
  LineSubprocess out;
  out.pid_ = pid;
  out.stdin_fd_ = std::exchange(r.to_child[1], -1);
  out.stdout_fd_ = std::exchange(r.from_child[0], -1);
  out.stderr_path_ = r.stderr_path;
  close(std::exchange(r.stderr_fd, -1));  // the child has it; the file stays for stderr_tail
  return out;                             // r closes the child's pipe ends
}

LineSubprocess::LineSubprocess(LineSubprocess&& other) noexcept
    : pid_(other.pid_),
      stdin_fd_(other.stdin_fd_),
      stdout_fd_(other.stdout_fd_),
      stderr_path_(std::move(other.stderr_path_)),
      buffer_(std::move(other.buffer_)),
      stop_grace_(other.stop_grace_) {
  other.pid_ = -1;
  other.stdin_fd_ = other.stdout_fd_ = -1;
  other.stderr_path_.clear();
}

LineSubprocess::~LineSubprocess() {
  stop();
  if (!stderr_path_.empty()) unlink(stderr_path_.c_str());
}

void LineSubprocess::stop() {
  if (stdin_fd_ >= 0) close(stdin_fd_);
  if (stdout_fd_ >= 0) close(stdout_fd_);
  stdin_fd_ = stdout_fd_ = -1;
  if (pid_ <= 0) return;
  // Closing stdin ends the adapter's loop; give it a moment, then insist. Looked at without reaping,
  // so the group id stays ours while whatever the child left in its group is killed.
  for (std::int64_t i = 0; i < stop_grace_.count() / 20; ++i) {
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid_), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid_) break;
    usleep(20000);
  }
  kill(-pid_, SIGKILL);
  forget_child(pid_);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Result<std::string> LineSubprocess::request(const std::string& line, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return make_error(seam_kind::harness_error, "the subprocess is not running");
  const std::string payload = line + "\n";
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // Milliseconds left for one poll (at least 0, at most what an int holds), or -1 when time is up.
  const auto poll_budget = [&]() -> int {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return -1;
    return static_cast<int>(std::min<std::int64_t>(left.count(), std::numeric_limits<int>::max()));
  };
  const auto timed_out = [&](const char* what) -> Error {
    stop();
    return make_error(seam_kind::timeout, std::string(what) + " within " + std::to_string(timeout.count()) +
                                              " ms; stderr: " + stderr_tail());
  };
  for (std::size_t sent = 0; sent < payload.size();) {
    const ssize_t n = write(stdin_fd_, payload.data() + sent, payload.size() - sent);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      const int budget = poll_budget();
      if (budget < 0) return timed_out("the request was not read");
      pollfd fd{stdin_fd_, POLLOUT, 0};
      poll(&fd, 1, budget);
      continue;
    }
    stop();  // it is gone or has closed its input: either way no reply can come
    return make_error(seam_kind::harness_error, "the subprocess closed its input; stderr: " + stderr_tail());
  }
  for (;;) {
    if (const std::size_t newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string reply = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return reply;
    }
    const int budget = poll_budget();
    if (budget < 0) return timed_out("no reply");
    pollfd fd{stdout_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, budget);
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stop();
      return make_error(seam_kind::harness_error, "the subprocess exited without replying; stderr: " + stderr_tail());
    }
    buffer_.append(chunk, static_cast<std::size_t>(n));
  }
}

std::string LineSubprocess::stderr_tail(std::size_t max_bytes) const {
  std::ifstream in(stderr_path_);
  std::stringstream text;
  text << in.rdbuf();
  const std::string all = text.str();
  return all.size() > max_bytes ? all.substr(all.size() - max_bytes) : all;
}

}  // namespace ih
