// Unit tests of what a save world's end says about its scenarios (world_verdicts.h): no world is started.
#include "harness/roundtrip/world_verdicts.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

WorldOutcome ended_save_world(std::int64_t ranks, int exit_code) {
  WorldOutcome save;
  save.launched = true, save.exit_code = exit_code, save.stderr_tail = "ModuleNotFoundError: No module named 'torch'";
  save.ranks.resize(static_cast<std::size_t>(ranks));
  return save;
}

TEST(JudgeSave, AWorldWhoseRanksNeverStartedIsTheHarnesssNotMegatrons) {
  WorldRunOptions o;
  o.work = ::testing::TempDir();
  ScenarioOutcome r;
  EXPECT_FALSE(judge_save("real_a", ended_save_world(4, 1), o, r));
  EXPECT_EQ(r.outcome, Outcome::harness_error);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems.front().find("before any rank started: ModuleNotFoundError"), std::string::npos)
      << r.problems.front();
}

TEST(JudgeSave, ARankThatStartedAndDiedWithoutAResultFailsItsScenario) {
  WorldRunOptions o;
  o.work = ::testing::TempDir();
  WorldOutcome save = ended_save_world(2, 1);
  save.ranks[1].has_status = true;
  save.ranks[1].status = {{"stage", "save: dist_checkpointing.save"}, {"scenario", "real_a"}};
  ScenarioOutcome r;
  EXPECT_FALSE(judge_save("real_a", save, o, r));
  EXPECT_EQ(r.outcome, Outcome::failed);
  ASSERT_FALSE(r.problems.empty());
  EXPECT_NE(r.problems.front().find("save rank 1 died without a result"), std::string::npos) << r.problems.front();
}

TEST(JudgeSave, AMegatronThatLacksWhatTheWorldNeedsLeavesItsScenariosNotRun) {
  WorldRunOptions o;
  o.work = ::testing::TempDir();
  WorldOutcome save = ended_save_world(2, 1);
  save.ranks[0].has_status = true, save.ranks[0].has_result = true;
  save.ranks[0].result = {
      {"error",
       {{"kind", "unsupported"}, {"stage", "start"}, {"message", "this Megatron lacks gpt_checkpoint_interop"}}}};
  ScenarioOutcome r;
  EXPECT_FALSE(judge_save("real_a", save, o, r));
  EXPECT_EQ(r.outcome, Outcome::not_run);
}

}  // namespace
}  // namespace ih
