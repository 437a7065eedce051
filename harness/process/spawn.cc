#include "harness/process/spawn.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ih {

Result<pid_t> spawn_child(const std::vector<std::string>& argv, int stdin_fd, int stdout_fd, int stderr_fd,
                          bool own_process_group) {
  if (argv.empty()) return make_error(ErrorKind::invalid_argument, "no command to start");
  const pid_t pid = fork();
  if (pid < 0) return make_error(ErrorKind::harness_error, std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    if (own_process_group) setpgid(0, 0);
    dup2(stdin_fd >= 0 ? stdin_fd : open("/dev/null", O_RDONLY), 0);
    dup2(stdout_fd, 1);
    dup2(stderr_fd, 2);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    dprintf(2, "cannot start %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  if (own_process_group) setpgid(pid, pid);  // also from here, so the group exists before any kill
  return pid;
}

}  // namespace ih
