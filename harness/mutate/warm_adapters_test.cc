// The campaign's warm adapters (warm_adapters.h) around a stand-in fork server: the fork server's own stand-in
// adapter (harness/megatron/adapter/tests/unit/fork_stand_in.py, no torch) behind a stand-in venv's python. A
// started server is named in the environment; one that stops is said and unnamed (the rest start cold); one that
// cannot start, or --cold-adapters, names none.
#include "harness/mutate/warm_adapters.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "harness/install/data_dir.h"

namespace ih::mutate {
namespace {

namespace fs = std::filesystem;

class WarmAdaptersTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "ih-warm-test-XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    venv_ = dir;
    fs::create_directories(venv_ / "bin");
    setenv("INTEROP_MEGATRON_VENV", venv_.c_str(), 1);
    if (const char* tmp = getenv("TMPDIR")) tmpdir_ = tmp;
    setenv("TMPDIR", venv_.c_str(), 1);  // the server's socket goes here (temp_dir())
  }
  void TearDown() override {
    unsetenv("INTEROP_MEGATRON_VENV");
    if (tmpdir_.empty())
      unsetenv("TMPDIR");
    else
      setenv("TMPDIR", tmpdir_.c_str(), 1);
    fs::remove_all(venv_);
  }
  /// The stand-in venv's python: records its pid, then runs `body` (its arguments: adapter.py and the rest).
  void python(const std::string& body) {
    const fs::path path = venv_ / "bin" / "python";
    std::ofstream(path) << "#!/bin/sh\necho $$ > " << (venv_ / "pid").string() << "\n" << body << "\n";
    fs::permissions(path, fs::perms::owner_all);
  }
  pid_t server_pid() const {
    pid_t pid = 0;
    std::ifstream(venv_ / "pid") >> pid;
    return pid;
  }
  fs::path venv_;
  std::string tmpdir_;
};

TEST_F(WarmAdaptersTest, AStartedServerIsNamedAndOneThatStopsIsSaidAndUnnamed) {
  const fs::path stand_in = install::adapter_dir() / "tests" / "unit" / "fork_stand_in.py";
  python("shift; exec python3 " + stand_in.string() + " \"$@\"");  // adapter.py's arguments to the stand-in
  std::ostringstream progress;
  WarmAdapters warm = WarmAdapters::start(false, "/a/tree", progress);
  const char* named = getenv(kForkServerVariable);
  ASSERT_NE(named, nullptr) << progress.str();
  EXPECT_EQ(fs::path(named).parent_path(), venv_);
  warm.check(progress);
  EXPECT_EQ(warm.summary(), "warm adapters: 0 started by the fork server, 0 cold");
  ASSERT_EQ(kill(server_pid(), SIGKILL), 0);
  warm.check(progress);
  EXPECT_NE(progress.str().find("WARNING: the adapters' fork server stopped"), std::string::npos) << progress.str();
  EXPECT_EQ(getenv(kForkServerVariable), nullptr);
  EXPECT_NE(warm.summary().find("the fork server stopped, the rest started cold"), std::string::npos);
}

TEST_F(WarmAdaptersTest, AServerThatCannotStartAndColdAdaptersNameNone) {
  python("echo no torch here >&2; exit 1");
  setenv(kForkServerVariable, "/left/over", 1);
  std::ostringstream progress;
  {
    WarmAdapters warm = WarmAdapters::start(false, "/a/tree", progress);
    EXPECT_EQ(getenv(kForkServerVariable), nullptr);
    EXPECT_NE(progress.str().find("did not start"), std::string::npos) << progress.str();
    EXPECT_NE(progress.str().find("no torch here"), std::string::npos) << progress.str();
  }
  WarmAdapters cold = WarmAdapters::start(true, "/a/tree", progress);
  EXPECT_EQ(getenv(kForkServerVariable), nullptr);
  EXPECT_NE(progress.str().find("cold adapters (--cold-adapters)"), std::string::npos) << progress.str();
  EXPECT_EQ(cold.summary(), "");
}

}  // namespace
}  // namespace ih::mutate
