#include "harness/process/line_subprocess.h"

#include "harness/process/spawn.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace ih {

Result<LineSubprocess> LineSubprocess::start(const std::vector<std::string>& argv) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  char stderr_template[] = "/tmp/interop-harness-stderr-XXXXXX";
  const int stderr_fd = mkstemp(stderr_template);
  int to_child[2], from_child[2];
  if (stderr_fd < 0 || pipe2(to_child, O_CLOEXEC) != 0 || pipe2(from_child, O_CLOEXEC) != 0)
    return make_error(ErrorKind::harness_error, std::string("cannot create pipes: ") + std::strerror(errno));
  IH_TRY_ASSIGN(pid, spawn_child(argv, to_child[0], from_child[1], stderr_fd, false));
  close(to_child[0]);
  close(from_child[1]);
  close(stderr_fd);
  signal(SIGPIPE, SIG_IGN);  // a dead child must give an error, not kill the harness
  LineSubprocess out;
  out.pid_ = pid;
  out.stdin_fd_ = to_child[1];
  out.stdout_fd_ = from_child[0];
  out.stderr_path_ = stderr_template;
  return out;
}

LineSubprocess::LineSubprocess(LineSubprocess&& other) noexcept
    : pid_(other.pid_), stdin_fd_(other.stdin_fd_), stdout_fd_(other.stdout_fd_),
      stderr_path_(std::move(other.stderr_path_)), buffer_(std::move(other.buffer_)) {
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
  // Closing stdin ends the adapter's loop; give it a moment, then insist.
  for (int i = 0; i < 50; ++i) {
    if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return;
    }
    usleep(20000);
  }
  kill(pid_, SIGKILL);
  waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

Result<std::string> LineSubprocess::request(const std::string& line, std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return make_error(ErrorKind::harness_error, "the subprocess is not running");
  const std::string payload = line + "\n";
  for (std::size_t sent = 0; sent < payload.size();) {
    const ssize_t n = write(stdin_fd_, payload.data() + sent, payload.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return make_error(ErrorKind::harness_error, "the subprocess closed its input; stderr: " + stderr_tail());
    sent += static_cast<std::size_t>(n);
  }
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const std::size_t newline = buffer_.find('\n'); newline != std::string::npos) {
      std::string reply = buffer_.substr(0, newline);
      buffer_.erase(0, newline + 1);
      return reply;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      stop();
      return make_error(ErrorKind::timeout, "no reply within " + std::to_string(timeout.count()) + " ms; stderr: " + stderr_tail());
    }
    pollfd fd{stdout_fd_, POLLIN, 0};
    const int ready = poll(&fd, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;
    char chunk[65536];
    const ssize_t n = read(stdout_fd_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      stop();
      return make_error(ErrorKind::harness_error, "the subprocess exited without replying; stderr: " + stderr_tail());
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
