// The world launcher's mpirun options against the Open MPI installed here (label mpi): each world's session files
// land in a folder of its own, so a round trip's save and load worlds, started together, never race to create one
// (open-mpi/ompi#8510).
#include "harness/roundtrip/world_launch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "harness/process/child_run.h"
#include "harness/process/work_folder.h"

namespace ih {
namespace {

/// What a one-rank world launched by mpirun_launcher sees in its session folder while it runs.
struct Listing {
  bool ran = false;
  std::vector<std::string> names;
};

Listing list_session_folder_from_inside(const std::filesystem::path& session_folder) {
  std::vector<std::string> cmd = mpirun_launcher(1, session_folder);
  cmd.insert(cmd.end(), {"ls", "-A", session_folder.string()});
  Listing listing;
  auto outcome =
      run_child(cmd, std::chrono::seconds(60), [&](const std::string& line) { listing.names.push_back(line); });
  listing.ran = outcome.ok() && !outcome->timed_out && !outcome->signaled && outcome->exit_code == 0;
  if (outcome.ok() && !listing.ran) ADD_FAILURE() << "mpirun failed:\n" << outcome->stderr_tail;
  return listing;
}

bool holds_open_mpi_session(const Listing& listing) {
  return std::any_of(listing.names.begin(), listing.names.end(),
                     [](const std::string& name) { return name.rfind("ompi.", 0) == 0; });
}

TEST(MpirunLauncher, OpenMpisSessionFilesLandInTheWorldsOwnFolder) {
  auto folder = WorkFolder::make(std::nullopt, "launcher-test");
  ASSERT_TRUE(folder.ok());
  const Listing listing = list_session_folder_from_inside(folder->path());
  ASSERT_TRUE(listing.ran);
  EXPECT_TRUE(holds_open_mpi_session(listing)) << "no ompi.* session folder under " << folder->path();
}

TEST(MpirunLauncher, TwoWorldsStartedTogetherEachKeepTheirSessionInTheirOwnFolder) {
  auto first = WorkFolder::make(std::nullopt, "launcher-test");
  auto second = WorkFolder::make(std::nullopt, "launcher-test");
  ASSERT_TRUE(first.ok() && second.ok());
  Listing first_listing;
  std::thread beside([&] { first_listing = list_session_folder_from_inside(first->path()); });
  const Listing second_listing = list_session_folder_from_inside(second->path());
  beside.join();
  ASSERT_TRUE(first_listing.ran && second_listing.ran);
  EXPECT_TRUE(holds_open_mpi_session(first_listing));
  EXPECT_TRUE(holds_open_mpi_session(second_listing));
}

}  // namespace
}  // namespace ih
