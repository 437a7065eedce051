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

}  // namespace

Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line) {
  return run_child(argv, timeout, on_line, StartupClock{});
}

Result<ChildOutcome> run_child(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                               const std::function<void(const std::string&)>& on_line, const StartupClock& startup) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  std::string stderr_template = temp_dir() + "/interop-harness-stderr-XXXXXX";
  const int stderr_fd = mkostemp(stderr_template.data(), O_CLOEXEC);
  if (stderr_fd < 0)
    return make_error(seam_kind::harness_error, std::string("cannot create a stderr file: ") + std::strerror(errno));
  int from_child[2];
  if (pipe2(from_child, O_CLOEXEC) != 0) {
    const Error error =
        make_error(seam_kind::harness_error, std::string("cannot create pipes: ") + std::strerror(errno));
    close(stderr_fd), unlink(stderr_template.c_str());
    return error;
  }
  const auto started = std::chrono::steady_clock::now();
  // Its own process group: a timeout kills the rank workers too.
  auto spawned = spawn_child(argv, -1, from_child[1], stderr_fd, true);
  if (!spawned.ok()) {  // release everything this call made before it returns
    close(from_child[0]), close(from_child[1]), close(stderr_fd), unlink(stderr_template.c_str());
    return spawned.error();
  }
  const pid_t pid = *spawned;
  close(from_child[1]);
  close(stderr_fd);
  const std::string stderr_path = stderr_template;
  bool starting = static_cast<bool>(startup.starting);
  auto deadline = started + (starting ? startup.allowance : timeout);
  auto next_start_check = started;
  ChildOutcome out;
  std::string buffer;
  bool eof = false;
  const auto flush_lines = [&](bool all) {
    for (std::size_t nl; (nl = buffer.find('\n')) != std::string::npos;) {
      on_line(buffer.substr(0, nl));
      buffer.erase(0, nl + 1);
    }
    if (all && !buffer.empty()) on_line(buffer), buffer.clear();
  };
  int status = 0;
  bool reaped = false;
  while (!reaped) {
    if (starting && std::chrono::steady_clock::now() >= next_start_check) {
      next_start_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
      if (!startup.starting()) starting = false, deadline = std::chrono::steady_clock::now() + timeout;
    }
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      // SIGTERM first: mpirun forwards it to its ranks (which lead their own process groups) and
      // cleans up; then SIGKILL for whatever is left of the group.
      kill(-pid, SIGTERM);
      for (int i = 0; i < 50; ++i) {
        siginfo_t gone{};
        if (waitid(P_PID, static_cast<id_t>(pid), &gone, WEXITED | WNOHANG | WNOWAIT) == 0 && gone.si_pid == pid) break;
        usleep(100000);
      }
      kill(-pid, SIGKILL);
      forget_child(pid);
      waitpid(pid, &status, 0);
      out.timed_out = true;
      out.timed_out_starting = starting;
      reaped = true;
      break;
    }
    if (!eof) {
      pollfd fd{from_child[0], POLLIN, 0};
      const int ready = poll(&fd, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 200)));
      if (ready > 0) {
        char chunk[65536];
        const ssize_t n = read(from_child[0], chunk, sizeof chunk);
        if (n > 0) {
          buffer.append(chunk, static_cast<std::size_t>(n));
          flush_lines(false);
        } else if (n == 0 || errno != EINTR) {
          eof = true;
        }
      }
    } else {
      usleep(20000);
    }
    // Exited? Look without reaping, so the group id stays ours while stray workers are killed.
    siginfo_t info{};
    if (waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid) {
      kill(-pid, SIGKILL);  // rank workers a crashed parent left behind, if any
      forget_child(pid);
      waitpid(pid, &status, 0);
      reaped = true;
    }
  }
  // Drain what the child wrote before it exited.
  for (char chunk[65536];;) {
    pollfd fd{from_child[0], POLLIN, 0};
    if (out.timed_out || poll(&fd, 1, 0) <= 0) break;
    const ssize_t n = read(from_child[0], chunk, sizeof chunk);
    if (n <= 0) break;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  flush_lines(true);
  close(from_child[0]);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (!out.timed_out) {
    if (WIFEXITED(status)) out.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) out.signaled = true, out.signal = WTERMSIG(status);
  }
  out.stderr_tail = read_tail(stderr_path, 6000);
  unlink(stderr_path.c_str());
  return out;
}

}  // namespace ih
