#include "harness/process/spawn.h"

#include "harness/process/run_scope.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ih {
namespace {

// In the forked child, before exec: only async-signal-safe calls from here on.
[[noreturn]] void fail_in_child(const char* program) {
  dprintf(2, "cannot start %s: %s\n", program, std::strerror(errno));
  _exit(127);
}

// Closes every descriptor above 2, so the child sees exactly its three streams: nothing the
// harness holds (another child's pipes, a temporary file, /dev/null) leaks into it.
void close_inherited_fds() {
#ifdef SYS_close_range
  if (syscall(SYS_close_range, 3U, ~0U, 0U) == 0) return;
#endif
  const long max_fd = sysconf(_SC_OPEN_MAX);
  for (long fd = 3; fd < (max_fd > 0 ? max_fd : 65536); ++fd) close(static_cast<int>(fd));
}

}  // namespace

Result<pid_t> spawn_child(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
                          bool own_process_group) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  // Built before fork: the child must not allocate.
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  return start_tracked_child([&]() -> Result<pid_t> {
    const pid_t pid = fork();
    if (pid < 0) return make_error(seam_kind::harness_error, std::string("fork failed: ") + std::strerror(errno));
    if (pid == 0) {
      if (own_process_group) setpgid(0, 0);
      const int in = stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY);
      if (in < 0 || dup2(in, 0) < 0 || dup2(stdout_fd, 1) < 0 || dup2(stderr_fd, 2) < 0) fail_in_child(args[0]);
      close_inherited_fds();
      signal(SIGPIPE, SIG_DFL);  // the harness ignores SIGPIPE; an ignored signal would survive exec
      sigset_t none;             // the run blocks SIGINT/SIGTERM for its own thread; a blocked one survives exec
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, nullptr);
      execvp(args[0], args.data());
      fail_in_child(args[0]);
    }
    if (own_process_group) setpgid(pid, pid);  // also from here, so the group exists before any kill
    return pid;
  });
}

}  // namespace ih
