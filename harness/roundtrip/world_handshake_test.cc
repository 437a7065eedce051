// The describe/plan handshake's pure parts (world_handshake.h): how a rank's description file reads, which scenarios
// get `skip` when a world ends, and one poll loop over description files written here as the worlds' ranks would
// (the reference's entries stand in for Megatron's): no Megatron, no MPI.
#include "harness/roundtrip/world_handshake.h"

#include <gtest/gtest.h>

#include <fstream>

#include "harness/roundtrip/plan_test_files.h"
#include "harness/roundtrip/scenario_table.h"

namespace ih {
namespace {

namespace fs = std::filesystem;
using json::Json;

/// What a rank of the worlds writes for its model: the reference's entries stand in for Megatron's.
Json reference_description(const ModelDumpSpec& spec, std::int64_t rank) {
  auto dict = model_state_dict(spec, rank);
  EXPECT_TRUE(dict.ok());
  return Json{{"entries", json::dump_entries_to_json(flatten(StateNode(*dict)))}};
}

void describe(const fs::path& dir, const char* phase, std::int64_t rank, const Json& answer) {
  fs::create_directories(dir / kDescribedFolder);
  std::ofstream(dir / kDescribedFolder / (std::string(phase) + "_rank_" + std::to_string(rank) + ".json"))
      << answer.dump();
}

/// A save rank's results file with scenario `name` done.
RankState saved(const std::string& name) {
  RankState st;
  st.has_result = true;
  st.result = Json{{"scenarios", Json::array({Json{{"name", name}, {"ok", true}}})}};
  return st;
}

TEST(WorldHandshake, ADescriptionReadsAsTheDescribersReply) {
  auto dict = model_state_dict(make_world_scenario("real_gpt_hybrid_tp", 2, 1)->real_save, 0);
  ASSERT_TRUE(dict.ok());
  const Json entries = json::dump_entries_to_json(flatten(StateNode(*dict)));
  auto read = described_entries(Json{{"entries", entries}});
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->size(), entries.size());

  const auto unsupported = described_entries(Json{{"unsupported", "no GatedDeltaProductMixer here"}});
  ASSERT_FALSE(unsupported.ok());
  EXPECT_EQ(unsupported.error().kind, seam_kind::unsupported);
  EXPECT_EQ(unsupported.error().message, "no GatedDeltaProductMixer here");
  // As the adapter's megatron_error reply reads: a failure (Megatron raised on its own model), not the harness's.
  const auto refused = described_entries(Json{{"megatron_error", "SequentialMLP raised AssertionError"}});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(outcome_of_error(refused.error().kind), Outcome::failed);
  EXPECT_NE(refused.error().message.find("SequentialMLP raised AssertionError"), std::string::npos);
  const auto broken = described_entries(Json{{"harness_error", "the real model could not be built here"}});
  ASSERT_FALSE(broken.ok());
  EXPECT_EQ(broken.error().kind, seam_kind::harness_error);
  for (const Json& junk : {Json::array(), Json{{"entries", 1}}, Json{{"unsupported", 3}},
                           Json{{"entries", Json::array()}, {"unsupported", "x"}}, Json{{"other", "x"}}}) {
    const auto bad = described_entries(junk);
    ASSERT_FALSE(bad.ok()) << junk.dump();
    EXPECT_EQ(bad.error().kind, seam_kind::harness_error) << junk.dump();
  }
}

TEST(WorldHandshake, AWorldThatEndedSkipsWhatItWillNeverReach) {
  using S = HandshakeStage;
  const std::vector<S> stages = {S::skipped, S::complete, S::planned, S::describing, S::describing};
  EXPECT_EQ(scenarios_to_skip(stages, false, false), std::vector<std::size_t>{});
  // The save world gone: nothing more is saved, so nothing not yet complete will be loaded.
  EXPECT_EQ(scenarios_to_skip(stages, true, false), (std::vector<std::size_t>{2, 3, 4}));
  // The load worlds gone: nothing more is described on the load side; the planned one is still saved.
  EXPECT_EQ(scenarios_to_skip(stages, false, true), (std::vector<std::size_t>{3, 4}));
  EXPECT_EQ(scenarios_to_skip(stages, true, true), (std::vector<std::size_t>{2, 3, 4}));
}

TEST(WorldHandshake, EachScenarioIsPlannedOnceEveryRankDescribedItAndLoadedOnceSaved) {
  std::vector<WorldScenario> scenarios;
  for (const char* name : {"real_gpt_hybrid_tp", "real_hybrid_hybrid_gdp_tp", "real_hybrid_hybrid_tp"})
    scenarios.push_back(*make_world_scenario(name, 2, 1));
  TempDir work("ih-handshake-test");
  WorldRunOptions o;
  o.work = work.path;
  o.plan_in_worlds = true;
  WorldRunReport report;
  WorldHandshake handshake(scenarios, o, report);
  ASSERT_TRUE(handshake.start().ok());
  const Json plan = read_json(work.path / "plan.json");
  ASSERT_EQ(plan["scenarios"].size(), 3u);
  EXPECT_EQ(plan["scenarios"][0]["describe"]["save"], json::model_dump_spec_to_json(scenarios[0].real_save, 0));
  EXPECT_EQ(plan["scenarios"][0]["describe"]["load"], json::model_dump_spec_to_json(scenarios[0].real_load, 0));
  const auto dir = [&](std::size_t i) { return work.path / scenario_dir(scenarios[i].name); };

  // The first scenario described by both save ranks and not yet by the load rank: no plan.
  for (std::int64_t r = 0; r < 2; ++r) describe(dir(0), "save", r, reference_description(scenarios[0].real_save, r));
  EXPECT_TRUE(handshake.poll({RankState{}, RankState{}}, false, false).empty());
  EXPECT_FALSE(fs::exists(dir(0) / kPlanReadyMarker));
  describe(dir(0), "load", 0, reference_description(scenarios[0].real_load, 0));
  // The second: the load rank's Megatron has no GDP mixer (not run, skipped); the third: a save rank broke.
  for (std::int64_t r = 0; r < 2; ++r) describe(dir(1), "save", r, reference_description(scenarios[1].real_save, r));
  describe(dir(1), "load", 0, Json{{"unsupported", "no GatedDeltaProductMixer here"}});
  describe(dir(2), "save", 0, reference_description(scenarios[2].real_save, 0));
  describe(dir(2), "save", 1, Json{{"harness_error", "the real model could not be built here: KeyError"}});
  describe(dir(2), "load", 0, reference_description(scenarios[2].real_load, 0));
  EXPECT_TRUE(handshake.poll({RankState{}, RankState{}}, false, false).empty());
  EXPECT_TRUE(fs::exists(dir(0) / kPlanReadyMarker));
  EXPECT_TRUE(fs::exists(dir(0) / "save_rank_1.json") && fs::exists(dir(0) / "oracle_rank_0.json"));
  EXPECT_TRUE(fs::exists(dir(1) / kSkipMarker) && !fs::exists(dir(1) / kPlanReadyMarker));
  EXPECT_TRUE(fs::exists(dir(2) / kSkipMarker) && !fs::exists(dir(2) / kPlanReadyMarker));
  ASSERT_EQ(report.not_run.size(), 1u);
  EXPECT_EQ(report.not_run[0].first, scenarios[1].name);
  ASSERT_EQ(report.scenarios.size(), 1u);
  EXPECT_EQ(report.scenarios[0].name, scenarios[2].name);
  EXPECT_EQ(report.scenarios[0].outcome, Outcome::harness_error);

  // Saved on one rank of two: not complete; on both: complete once the caller says so.
  EXPECT_TRUE(handshake.poll({saved(scenarios[0].name), RankState{}}, false, false).empty());
  const auto done = handshake.poll({saved(scenarios[0].name), saved(scenarios[0].name)}, false, false);
  EXPECT_EQ(done, std::vector<std::string>{scenarios[0].name});
  handshake.complete(scenarios[0].name);
  EXPECT_TRUE(fs::exists(dir(0) / kCheckpointCompleteMarker));
  EXPECT_EQ(handshake.loadable(), std::vector<std::string>{scenarios[0].name});
  ASSERT_EQ(handshake.planned().size(), 1u);
  EXPECT_EQ(handshake.planned()[0]->name, scenarios[0].name);
}

TEST(WorldHandshake,
     AScenarioTheSaveWorldNeverDescribedIsJudgedByItsRanksAndOneTheLoadWorldNeverDescribedHasNoVerdict) {
  std::vector<WorldScenario> scenarios;
  for (const char* name : {"real_gpt_hybrid_tp", "real_hybrid_hybrid_tp"})
    scenarios.push_back(*make_world_scenario(name, 2, 1));
  for (const bool save_ended : {true, false}) {
    TempDir work("ih-handshake-test");
    WorldRunOptions o;
    o.work = work.path;
    WorldRunReport report;
    WorldHandshake handshake(scenarios, o, report);
    ASSERT_TRUE(handshake.start().ok());
    EXPECT_TRUE(handshake.poll({RankState{}, RankState{}}, save_ended, !save_ended).empty());
    for (const WorldScenario& s : scenarios) EXPECT_TRUE(fs::exists(work.path / scenario_dir(s.name) / kSkipMarker));
    // The save world's end is judged from what its ranks reported (judge_save); the load world's is said here: no
    // rank said why, so it is the harness's (the world's exit and stderr go into the run's faults).
    EXPECT_EQ(handshake.planned().size(), save_ended ? 2u : 0u);
    EXPECT_EQ(report.scenarios.size(), save_ended ? 0u : 2u);
    for (const ScenarioOutcome& r : report.scenarios) EXPECT_EQ(r.outcome, Outcome::harness_error);
  }
}

}  // namespace
}  // namespace ih
