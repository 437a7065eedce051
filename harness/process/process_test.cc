// The harness's child processes (spawn.h, line_subprocess.h, child_run.h): a child that answers, one that never
// answers (the timeout fires and the child is gone), one that dies, one that floods stderr, a
// missing executable, and no file descriptor or temporary file left behind on any path, in the
// harness or in the child.
#include "harness/process/child_run.h"
#include "harness/process/line_subprocess.h"
#include "harness/process/spawn.h"

#include <dirent.h>
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace ih {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

// Descriptors open in this process (the directory stream's own one is not counted).
std::set<int> open_fds() {
  std::set<int> out;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return out;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.' && std::stoi(e->d_name) != own) out.insert(std::stoi(e->d_name));
  closedir(dir);
  return out;
}

// The leak tests give this process its own TMPDIR: other tests running at the same time (ctest -j)
// start subprocesses too, and their stderr files in /tmp are not ours to count.
const std::string& private_tmpdir() {
  struct PrivateDir {
    std::string path;
    PrivateDir() {
      char templ[] = "/tmp/ih-process-test-XXXXXX";
      if (!mkdtemp(templ)) throw std::runtime_error("cannot create a private TMPDIR");
      path = templ;
      setenv("TMPDIR", path.c_str(), 1);
    }
    ~PrivateDir() { std::filesystem::remove_all(path); }
  };
  static const PrivateDir dir;
  return dir.path;
}

std::set<std::string> stderr_files() {
  std::set<std::string> out;
  glob_t g{};
  if (glob((private_tmpdir() + "/interop-harness-stderr-*").c_str(), 0, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i) out.insert(g.gl_pathv[i]);
  globfree(&g);
  return out;
}

// Gone: no such process, or only a zombie left for whoever adopted it (init in a container may
// be slow to reap).
bool process_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return true;
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t paren = text.rfind(')');
  return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] == 'Z';
}

// Reads everything from fd until EOF (the child closed its end), at most `limit` seconds.
std::string read_all(int fd, double limit = 20) {
  std::string out;
  const auto start = Clock::now();
  char chunk[4096];
  for (ssize_t n; seconds_since(start) < limit && (n = read(fd, chunk, sizeof chunk)) != 0;)
    if (n > 0) out.append(chunk, static_cast<std::size_t>(n));
  return out;
}

// waitpid with a deadline; the child is killed when it does not end in time.
int wait_status(pid_t pid, double limit = 20) {
  int status = 0;
  const auto start = Clock::now();
  while (waitpid(pid, &status, WNOHANG) == 0) {
    if (seconds_since(start) > limit) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      ADD_FAILURE() << "child " << pid << " did not end within " << limit << " s";
      break;
    }
    usleep(10000);
  }
  return status;
}

// The pid a child printed as the first line of its stderr, as it appears in an error message.
pid_t pid_in_stderr(const std::string& message) {
  const std::size_t at = message.find("stderr: ");
  return at == std::string::npos ? -1 : static_cast<pid_t>(std::atol(message.c_str() + at + 8));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

// ---------------------------------------------------------------------------------------------
// spawn_child

TEST(SpawnChild, EmptyArgvIsInvalid) {
  auto r = spawn_child({}, -1, 1, 2, false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::invalid_argument);
}

TEST(SpawnChild, MissingExecutableExits127WithAMessage) {
  int err[2];
  ASSERT_EQ(pipe2(err, O_CLOEXEC), 0);
  auto pid = spawn_child({"/nonexistent/interop-harness-no-such-tool", "x"}, -1, err[1], err[1], false);
  close(err[1]);
  ASSERT_TRUE(pid.ok()) << pid.error().message;
  const std::string message = read_all(err[0]);
  close(err[0]);
  const int status = wait_status(*pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 127);
  EXPECT_TRUE(contains(message, "cannot start /nonexistent/interop-harness-no-such-tool")) << message;
}

TEST(SpawnChild, StdinDefaultsToDevNullAndOutputArrives) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  // cat copies stdin: /dev/null gives nothing and ends at once; then echo shows the pipe works.
  auto pid = spawn_child({"sh", "-c", "cat; echo finished"}, -1, out[1], 2, false);
  close(out[1]);
  ASSERT_TRUE(pid.ok());
  const std::string text = read_all(out[0]);
  close(out[0]);
  const int status = wait_status(*pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  EXPECT_EQ(text, "finished\n");
}

TEST(SpawnChild, ChildSeesOnlyItsThreeStreams) {
  // Descriptors the harness holds without close-on-exec (a temporary file, anything opened by a
  // library) must not reach the child: it would keep pipes open and files alive.
  const int stray = open("/dev/null", O_RDONLY);  // no O_CLOEXEC on purpose
  ASSERT_GE(stray, 0);
  const int high = dup2(stray, 200);
  ASSERT_EQ(high, 200);
  char path[] = "/tmp/interop-harness-test-XXXXXX";
  const int err = mkstemp(path);  // no O_CLOEXEC either, like the old stderr file
  ASSERT_GE(err, 0);
  unlink(path);
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  auto pid = spawn_child({"ls", "/proc/self/fd"}, -1, out[1], err, false);
  close(out[1]);
  ASSERT_TRUE(pid.ok());
  const std::string text = read_all(out[0]);
  close(out[0]);
  wait_status(*pid);
  close(stray);
  close(high);
  close(err);
  // 0, 1, 2 and the directory ls itself opened to list them (the lowest free number, 3).
  EXPECT_EQ(lines(text), (std::vector<std::string>{"0", "1", "2", "3"})) << text;
}

TEST(SpawnChild, SigpipeIsDefaultAgainInTheChild) {
  signal(SIGPIPE, SIG_IGN);  // what LineSubprocess does in the harness
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  auto pid = spawn_child({"grep", "^SigIgn:", "/proc/self/status"}, -1, out[1], 2, false);
  close(out[1]);
  ASSERT_TRUE(pid.ok());
  const std::string text = read_all(out[0]);
  close(out[0]);
  wait_status(*pid);
  ASSERT_TRUE(contains(text, "SigIgn:")) << text;
  const unsigned long long ignored = std::stoull(text.substr(text.find(':') + 1), nullptr, 16);
  EXPECT_EQ(ignored & (1ULL << (SIGPIPE - 1)), 0u) << text;  // `yes | head` must still end in a child
}

TEST(SpawnChild, OwnProcessGroupReachesGrandchildren) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  // The shell starts a background grandchild, prints its pid, and waits.
  auto pid = spawn_child({"sh", "-c", "sleep 30 & echo $!; wait"}, -1, out[1], 2, true);
  close(out[1]);
  ASSERT_TRUE(pid.ok());
  EXPECT_EQ(getpgid(*pid), *pid);
  std::string first;
  for (char c; read(out[0], &c, 1) == 1 && c != '\n';) first += c;
  close(out[0]);
  const pid_t grandchild = static_cast<pid_t>(std::atol(first.c_str()));
  ASSERT_GT(grandchild, 0) << first;
  EXPECT_EQ(getpgid(grandchild), *pid);
  ASSERT_EQ(kill(-*pid, SIGKILL), 0);
  const int status = wait_status(*pid);
  EXPECT_TRUE(WIFSIGNALED(status));
  for (int i = 0; i < 200 && !process_gone(grandchild); ++i) usleep(10000);  // init reaps it
  EXPECT_TRUE(process_gone(grandchild));

  auto same = spawn_child({"true"}, -1, 1, 2, false);
  ASSERT_TRUE(same.ok());
  const pid_t group = getpgid(*same);
  wait_status(*same);
  if (group > 0) {
    EXPECT_EQ(group, getpgrp());  // without own_process_group it stays in ours
  }
}

// ---------------------------------------------------------------------------------------------
// run_child

TEST(RunChild, EmptyArgvIsInvalid) {
  auto out = run_child({}, 1s, [](const std::string&) {});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.error().kind, ErrorKind::invalid_argument);
}

TEST(RunChild, LinesArriveInOrderAndTheLastOneWithoutANewline) {
  std::vector<std::string> lines;
  auto out = run_child({"sh", "-c", "echo one; echo two >&2; printf 'three\\nfour'; exit 7"}, 10s,
                       [&](const std::string& line) { lines.push_back(line); });
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(lines, (std::vector<std::string>{"one", "three", "four"}));
  EXPECT_EQ(out->exit_code, 7);
  EXPECT_FALSE(out->signaled);
  EXPECT_FALSE(out->timed_out);
  EXPECT_TRUE(contains(out->stderr_tail, "two")) << out->stderr_tail;
}

TEST(RunChild, ASignalIsNamed) {
  auto out = run_child({"sh", "-c", "kill -9 $$"}, 10s, [](const std::string&) {});
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->signaled);
  EXPECT_EQ(out->signal, SIGKILL);
  EXPECT_FALSE(out->timed_out);
}

TEST(RunChild, TheDeadlineKillsTheWholeGroup) {
  pid_t grandchild = 0;
  const auto start = Clock::now();
  auto out = run_child({"sh", "-c", "trap '' TERM; sleep 30 & echo $!; wait"}, 500ms,
                       [&](const std::string& line) { grandchild = static_cast<pid_t>(std::atol(line.c_str())); });
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->timed_out);
  EXPECT_LT(seconds_since(start), 15.0);
  ASSERT_GT(grandchild, 0);
  for (int i = 0; i < 200 && !process_gone(grandchild); ++i) usleep(10000);
  EXPECT_TRUE(process_gone(grandchild));
}

/// A child that "starts" until it prints `started`, then works for `work`.
struct StartingChild {
  bool started = false;
  Result<ChildOutcome> run(const std::string& start, const std::string& work, std::chrono::milliseconds timeout,
                           std::chrono::milliseconds allowance) {
    return run_child(
        {"sh", "-c", "sleep " + start + "; echo started; sleep " + work}, timeout,
        [&](const std::string& line) { started = started || line == "started"; },
        StartupClock{allowance, [&] { return !started; }});
  }
};

TEST(RunChild, AStartUpLongerThanTheTimeoutRunsOnItsOwnAllowance) {
  StartingChild child;
  auto out = child.run("2", "0.2", 1s, 20s);
  ASSERT_TRUE(out.ok());
  EXPECT_FALSE(out->timed_out);
  EXPECT_EQ(out->exit_code, 0);
}

TEST(RunChild, AStartUpPastItsAllowanceIsNamedAsSuch) {
  StartingChild child;
  auto out = child.run("30", "0", 60s, 1s);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->timed_out);
  EXPECT_TRUE(out->timed_out_starting);
}

TEST(RunChild, TheTimeoutCountsFromTheEndOfTheStartUp) {
  StartingChild child;
  const auto start = Clock::now();
  auto out = child.run("0", "30", 1s, 60s);
  ASSERT_TRUE(out.ok());
  EXPECT_TRUE(out->timed_out);
  EXPECT_FALSE(out->timed_out_starting);
  EXPECT_LT(seconds_since(start), 15.0);
}
TEST(RunChild, AMissingExecutableExits127) {
  auto out = run_child({"/nonexistent/interop-harness-no-such-tool"}, 10s, [](const std::string&) {});
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 127);
  EXPECT_FALSE(out->stderr_tail.empty());
}

// ---------------------------------------------------------------------------------------------
// LineSubprocess

TEST(LineSubprocess, AnswersLineByLine) {
  auto child = LineSubprocess::start({"sh", "-c", "while read l; do echo \"got:$l\"; done"});
  ASSERT_TRUE(child.ok()) << child.error().message;
  EXPECT_TRUE(child->running());
  EXPECT_EQ(child->request("a", 10s).value(), "got:a");
  EXPECT_EQ(child->request("b c", 10s).value(), "got:b c");
  EXPECT_EQ(child->request("", 10s).value(), "got:");
}

TEST(LineSubprocess, RepliesArrivingTogetherAreSplitIntoLines) {
  auto child = LineSubprocess::start({"sh", "-c", "read l; printf 'one\\ntwo\\n'; read l; read l"});
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(child->request("x", 10s).value(), "one");
  EXPECT_EQ(child->request("y", 10s).value(), "two");  // already buffered
}

TEST(LineSubprocess, HugeReplyArrivesWhole) {
  auto child = LineSubprocess::start({"sh", "-c", "read l; head -c 3000000 /dev/zero | tr '\\0' r; echo"});
  ASSERT_TRUE(child.ok());
  const auto reply = child->request("go", 20s);
  ASSERT_TRUE(reply.ok()) << reply.error().message;
  EXPECT_EQ(*reply, std::string(3000000, 'r'));
}

TEST(LineSubprocess, NeverAnsweringChildTimesOutAndIsKilled) {
  // Prints its pid on stderr, then sleeps without reading stdin: closing stdin does not end it.
  auto child = LineSubprocess::start({"sh", "-c", "echo $$ >&2; exec sleep 30"});
  ASSERT_TRUE(child.ok());
  const auto start = Clock::now();
  const auto reply = child->request("hello", 300ms);
  const double took = seconds_since(start);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().kind, seam_kind::timeout);
  EXPECT_TRUE(contains(reply.error().message, "300 ms")) << reply.error().message;
  EXPECT_GE(took, 0.3);
  EXPECT_LT(took, 5.0);  // 300 ms plus at most the one-second grace before SIGKILL
  const pid_t pid = pid_in_stderr(reply.error().message);
  ASSERT_GT(pid, 0) << reply.error().message;
  EXPECT_TRUE(process_gone(pid)) << "child " << pid << " survived its timeout";
  EXPECT_FALSE(child->running());
  const auto again = child->request("hello", 300ms);
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().kind, seam_kind::harness_error);
}

TEST(LineSubprocess, RequestLargerThanThePipeTimesOutWhenNotRead) {
  // A stuck child that never reads: a 4 MiB request fills the pipe. The timeout must still fire
  // (a blocking write would wait until the child exits by itself, here after 8 s).
  auto child = LineSubprocess::start({"sh", "-c", "echo $$ >&2; exec sleep 8"});
  ASSERT_TRUE(child.ok());
  const auto start = Clock::now();
  const auto reply = child->request(std::string(4 << 20, 'x'), 300ms);
  const double took = seconds_since(start);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().kind, seam_kind::timeout) << reply.error().message;
  EXPECT_LT(took, 5.0);
  const pid_t pid = pid_in_stderr(reply.error().message);
  ASSERT_GT(pid, 0) << reply.error().message;
  EXPECT_TRUE(process_gone(pid));
}

TEST(LineSubprocess, ChildThatDiesIsAHarnessErrorWithItsStderr) {
  auto child = LineSubprocess::start({"sh", "-c", "echo boom-before-exit >&2; exit 3"});
  ASSERT_TRUE(child.ok());
  usleep(100000);  // let it die first: the write may then fail or succeed, either is fine
  const auto reply = child->request("hello", 10s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(reply.error().message, "boom-before-exit")) << reply.error().message;
  EXPECT_FALSE(child->running());
}

TEST(LineSubprocess, ChildThatAnswersOnceThenDies) {
  auto child = LineSubprocess::start({"sh", "-c", "read l; echo ok; echo dying >&2; kill -9 $$"});
  ASSERT_TRUE(child.ok());
  EXPECT_EQ(child->request("1", 10s).value(), "ok");
  const auto second = child->request("2", 10s);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(second.error().message, "dying")) << second.error().message;
}

TEST(LineSubprocess, HugeStderrDoesNotBlockTheChild) {
  // 8 MB on stderr before answering: stderr goes to a file, so nothing fills up.
  auto child = LineSubprocess::start(
      {"sh", "-c", "head -c 8000000 /dev/zero | tr '\\0' e >&2; echo END >&2; read l; echo done"});
  ASSERT_TRUE(child.ok());
  const auto reply = child->request("go", 20s);
  ASSERT_TRUE(reply.ok()) << reply.error().message.substr(0, 200);
  EXPECT_EQ(*reply, "done");
  const std::string tail = child->stderr_tail(1000);
  ASSERT_EQ(tail.size(), 1000u);
  EXPECT_EQ(tail, std::string(996, 'e') + "END\n");
  EXPECT_EQ(child->stderr_tail().size(), 4000u);  // the default keeps the last 4000 bytes
}

TEST(LineSubprocess, MissingExecutable) {
  auto empty = LineSubprocess::start({});
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.error().kind, ErrorKind::invalid_argument);
  // An exec failure shows up as a closed stdout with the reason on stderr.
  auto child = LineSubprocess::start({"/nonexistent/interop-harness-no-such-tool"});
  ASSERT_TRUE(child.ok());
  const auto reply = child->request("hello", 10s);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(reply.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(reply.error().message, "cannot start /nonexistent/interop-harness-no-such-tool"))
      << reply.error().message;
}

TEST(LineSubprocess, MoveKeepsTheChild) {
  auto started = LineSubprocess::start({"sh", "-c", "while read l; do echo \"$l$l\"; done"});
  ASSERT_TRUE(started.ok());
  LineSubprocess moved(std::move(started.value()));
  EXPECT_FALSE(started->running());
  EXPECT_EQ(started->request("x", 1s).error().kind, seam_kind::harness_error);
  EXPECT_EQ(moved.request("ab", 10s).value(), "abab");
}

TEST(LineSubprocess, DestructorEndsAChildThatIgnoresEndOfInput) {
  pid_t pid = -1;
  const auto start = Clock::now();
  {
    auto child = LineSubprocess::start({"sh", "-c", "read l; echo $$; exec sleep 30"});
    ASSERT_TRUE(child.ok());
    pid = static_cast<pid_t>(std::stol(child->request("pid?", 10s).value()));
  }
  EXPECT_LT(seconds_since(start), 5.0);
  EXPECT_TRUE(process_gone(pid));
}

// ---------------------------------------------------------------------------------------------
// No descriptor or temporary file survives a failed start or a failed child.

TEST(ProcessLeaks, FailedStartsLeaveNoDescriptorsOrFiles) {
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &old), 0);
  const std::set<int> fds_before = open_fds();
  const std::set<std::string> files_before = stderr_files();
  const int lowest_free = open("/dev/null", O_RDONLY);
  ASSERT_GE(lowest_free, 0);
  close(lowest_free);
  // A start needs 5 descriptors (stderr file, two pipes). Allow 0 to 4 above the lowest free one,
  // so each of its steps fails in turn: the file, the first pipe, the second pipe.
  int failures = 0;
  for (int allowed = 0; allowed <= 4; ++allowed) {
    rlimit tight = old;
    tight.rlim_cur = static_cast<rlim_t>(lowest_free + allowed);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    for (int i = 0; i < 20; ++i) {
      auto child = LineSubprocess::start({"cat"});
      if (!child.ok() && child.error().kind == seam_kind::harness_error) ++failures;
    }
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &old), 0);
  }
  EXPECT_EQ(failures, 100);
  EXPECT_EQ(open_fds(), fds_before);
  std::vector<std::string> left;
  for (const std::string& f : stderr_files())
    if (!files_before.count(f)) left.push_back(f);
  EXPECT_TRUE(left.empty()) << left.size() << " stderr files left, e.g. " << (left.empty() ? "" : left[0]);
}

TEST(ProcessLeaks, FailingChildrenLeaveNoDescriptorsOrFiles) {
  const std::set<int> fds_before = open_fds();
  const std::set<std::string> files_before = stderr_files();
  for (int i = 0; i < 10; ++i) {
    auto missing = LineSubprocess::start({"/nonexistent/interop-harness-no-such-tool"});
    ASSERT_TRUE(missing.ok());
    EXPECT_FALSE(missing->request("x", 10s).ok());
    auto dying = LineSubprocess::start({"sh", "-c", "exit 1"});
    ASSERT_TRUE(dying.ok());
    EXPECT_FALSE(dying->request("x", 10s).ok());
    auto silent = LineSubprocess::start({"cat", "/dev/zero"});  // never a newline
    ASSERT_TRUE(silent.ok());
    EXPECT_EQ(silent->request("x", 20ms).error().kind, seam_kind::timeout);
    EXPECT_TRUE(run_child({"sh", "-c", "echo x; echo y >&2; exit 3"}, 10s, [](const std::string&) {}).ok());
    EXPECT_TRUE(run_child({"sleep", "5"}, 20ms, [](const std::string&) {})->timed_out);
  }
  EXPECT_EQ(open_fds(), fds_before);
  std::size_t left = 0;
  for (const std::string& f : stderr_files()) left += !files_before.count(f);
  EXPECT_EQ(left, 0u);
}

}  // namespace
}  // namespace ih
