#include "harness/process/run_scope.h"

#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <thread>

namespace ih {
namespace {

// Guards everything below; the interrupt thread holds it from the signal to its exit, so no child
// is started meanwhile and the main thread's end_run waits for it.
std::mutex g_lock;
std::set<pid_t> g_children;  // started and not yet reaped
bool g_interrupted = false;
bool g_finished = false;  // end_run ran: a late signal changes nothing
std::string g_run_folder;

// SIGTERM first (mpirun forwards it to its ranks and cleans up; Python dies at once), SIGKILL for what
// is left after this grace; both together stay well inside the 5 s a user waits.
constexpr auto kTermGrace = std::chrono::milliseconds(1500);
constexpr auto kKillGrace = std::chrono::milliseconds(2000);

struct ProcessEntry {
  pid_t pid, ppid, pgrp;
  bool zombie;
};

// Every process on the machine (Linux /proc), from /proc/PID/stat: "pid (comm) state ppid pgrp ...".
std::vector<ProcessEntry> all_processes() {
  std::vector<ProcessEntry> out;
  DIR* proc = opendir("/proc");
  if (!proc) return out;
  while (const dirent* e = readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0') continue;
    std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
    std::string line;
    if (!std::getline(in, line)) continue;
    const std::size_t close = line.rfind(')');  // comm may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0, pgrp = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld %ld", &state, &ppid, &pgrp) != 3) continue;
    out.push_back(
        {static_cast<pid_t>(pid), static_cast<pid_t>(ppid), static_cast<pid_t>(pgrp), state == 'Z' || state == 'X'});
  }
  closedir(proc);
  return out;
}

// What an interrupt ends: the groups of the children it started, and every descendant (mpirun's
// ranks lead groups of their own) with its group. Grows as descendants are found.
struct Targets {
  std::set<pid_t> groups, pids;

  void add_descendants(const std::vector<ProcessEntry>& procs) {
    std::map<pid_t, std::vector<const ProcessEntry*>> children;
    for (const ProcessEntry& p : procs) children[p.ppid].push_back(&p);
    const pid_t own_group = getpgrp();
    std::vector<pid_t> todo{getpid()};
    while (!todo.empty()) {
      const pid_t parent = todo.back();
      todo.pop_back();
      for (const ProcessEntry* c : children[parent]) {
        pids.insert(c->pid);
        if (c->pgrp != own_group) groups.insert(c->pgrp);
        todo.push_back(c->pid);
      }
    }
  }
  bool any_alive(const std::vector<ProcessEntry>& procs) const {
    for (const ProcessEntry& p : procs)
      if (!p.zombie && p.pid != getpid() && (pids.count(p.pid) || groups.count(p.pgrp))) return true;
    return false;
  }
  void signal_all(int sig) const {
    for (pid_t g : groups) kill(-g, sig);
    for (pid_t p : pids) kill(p, sig);
  }
};

void reap_own_children() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {
  }
}

// Signals the targets until none is alive or the grace is over; true when none is left.
bool end_targets(Targets& targets, int sig, std::chrono::milliseconds grace) {
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (;;) {
    targets.signal_all(sig);  // again each round: descendants found late get it too
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    reap_own_children();
    const std::vector<ProcessEntry> procs = all_processes();
    targets.add_descendants(procs);
    if (!targets.any_alive(procs)) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
  }
}

[[noreturn]] void end_run_on_signal(int sig, std::unique_lock<std::mutex>& held) {
  g_interrupted = true;
  Targets targets;
  for (pid_t child : g_children) {
    targets.pids.insert(child);
    if (getpgid(child) == child) targets.groups.insert(child);
  }
  targets.add_descendants(all_processes());
  const bool ended = end_targets(targets, SIGTERM, kTermGrace) || end_targets(targets, SIGKILL, kKillGrace);
  std::error_code ec;
  if (!g_run_folder.empty()) std::filesystem::remove_all(g_run_folder, ec);
  std::fprintf(stderr, "interop-harness: interrupted by %s: %zu child process(es) %s; run folder %s\n",
               sig == SIGINT ? "SIGINT" : "SIGTERM", targets.pids.size(),
               ended ? "ended" : "signalled (some did not end)", ec ? "NOT removed" : "removed");
  std::fflush(stderr);
  (void)held;  // held until exit: nothing starts, end_run waits
  _exit(128 + sig);
}

void wait_for_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::unique_lock<std::mutex> held(g_lock);
    if (g_finished) return;  // the run is over; its own exit code stands
    end_run_on_signal(sig, held);
  }
}

}  // namespace

std::string temp_dir() {
  const char* dir = std::getenv("TMPDIR");
  return dir && *dir ? dir : "/tmp";
}

Status begin_run() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  if (pthread_sigmask(SIG_BLOCK, &set, nullptr) != 0)
    return make_error(seam_kind::harness_error, "cannot block SIGINT and SIGTERM");
  // Without a usable $TMPDIR the run goes on without a folder of its own: a command that needs no temporary
  // file works, and the first one that needs one fails there, naming the folder.
  std::string folder = temp_dir() + "/interop-harness-run-XXXXXX";
  if (mkdtemp(folder.data())) {
    std::lock_guard<std::mutex> guard(g_lock);
    g_run_folder = folder;
    setenv("TMPDIR", folder.c_str(), 1);
  }
  std::thread(wait_for_signals).detach();
  return Ok{};
}

int end_run(int code) {
  std::lock_guard<std::mutex> guard(g_lock);  // an interrupt in progress holds it until it exits
  g_finished = true;
  std::error_code ec;
  if (!g_run_folder.empty()) std::filesystem::remove_all(g_run_folder, ec);
  return code;
}

Result<pid_t> start_tracked_child(const std::function<Result<pid_t>()>& fork_child) {
  std::lock_guard<std::mutex> guard(g_lock);
  if (g_interrupted) return make_error(seam_kind::harness_error, "the run is being interrupted");
  auto pid = fork_child();
  if (pid.ok()) g_children.insert(*pid);
  return pid;
}

void forget_child(pid_t pid) {
  std::lock_guard<std::mutex> guard(g_lock);
  g_children.erase(pid);
}

}  // namespace ih
