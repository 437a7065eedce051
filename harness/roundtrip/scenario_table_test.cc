// The scenario table (scenario_table.h) and what is read off it: every row lays out at 4 -> 2 and 2 -> 4 or says
// why not, names are unique, every list is the table's, a finding row names a pinned finding, and a command's
// scenarios (scenario_selection.h) follow the rows' words, never their names.
#include "harness/roundtrip/scenario_table.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "harness/roundtrip/scenario_selection.h"
#include "seam/error_kinds.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> table_names() {
  std::vector<std::string> out;
  for (const ScenarioRow& row : scenario_table()) out.emplace_back(row.name);
  return out;
}

std::vector<std::string> names_of(const std::vector<WorldScenario>& scenarios) {
  std::vector<std::string> out;
  for (const WorldScenario& s : scenarios) out.push_back(s.name);
  return out;
}

std::vector<std::string> joined(std::vector<std::vector<std::string>> lists) {
  std::vector<std::string> out;
  for (auto& list : lists) out.insert(out.end(), list.begin(), list.end());
  return out;
}

TEST(ScenarioTable, NamesAreUniqueAndEachFindsItsRow) {
  const std::vector<std::string> names = table_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  EXPECT_GE(names.size(), 30u);
  for (const std::string& name : names) {
    const ScenarioRow* row = find_scenario_row(name);
    ASSERT_NE(row, nullptr) << name;
    EXPECT_EQ(row->name, name);
  }
  EXPECT_EQ(find_scenario_row("no_such"), nullptr);
  EXPECT_EQ(find_scenario_row(""), nullptr);
}

// A builder refuses only where its world sizes cannot hold the scenario, naming it and why; this row is the
// one that cannot at 4 -> 2 and 2 -> 4 (a local checkpoint reloads only the layout it saved).
TEST(ScenarioTable, EveryRowLaysOutAtFourToTwoAndTwoToFourOrSaysWhyNot) {
  const std::set<std::string> refused_here = {"gdp_in_proj_gtp_local"};
  for (const ScenarioRow& row : scenario_table())
    for (const WorldSizes sizes : {WorldSizes{4, 2}, WorldSizes{2, 4}}) {
      const std::string name(row.name);
      const std::string where = name + " at " + std::to_string(sizes.save) + " -> " + std::to_string(sizes.load);
      auto s = make_world_scenario(name, sizes.save, sizes.load);
      if (refused_here.count(name)) {
        ASSERT_FALSE(s.ok()) << where;
        EXPECT_EQ(s.error().kind, seam_kind::unsupported) << where;
        EXPECT_EQ(s.error().message.rfind("scenario '" + name + "' cannot be laid out on ", 0), 0u)
            << s.error().message;
        continue;
      }
      ASSERT_TRUE(s.ok()) << where << ": " << s.error().message;
      EXPECT_EQ(s->name, name);
      EXPECT_EQ(s->kind, row.kind) << where;
      EXPECT_EQ(s->load_path, row.load_path) << where;
      EXPECT_EQ(s->description, row.description) << where;
      EXPECT_FALSE(s->description.empty()) << where;
      EXPECT_EQ(s->save.ranks(), sizes.save) << where;
      EXPECT_EQ(s->load.ranks(), sizes.load) << where;
      if (s->is_real()) {  // the kind names the models: GPT or hybrid saved, a hybrid loaded
        EXPECT_EQ(s->real_save.model, saved_model(row.kind)) << where;
        EXPECT_EQ(s->real_load.model, ModelKind::hybrid) << where;
      }
    }
}

TEST(ScenarioTable, BuildersRefuseSizesTheirLayoutsCannotSplit) {
  // One world of one rank holds no PP 2, DP 2, TP 2 or EP 2: each builder says which of its worlds needs what.
  const std::map<std::string, std::string> needs = {
      {"gpt_hybrid_tp_pp", "the save world needs PP=2"},
      {"dp_replicas", "both worlds need DP=2"},
      {"real_gpt_hybrid_pp", "both worlds need PP=2"},
      {"real_gpt_hybrid_training_pp", "both worlds need PP=2"},
      {"real_hybrid_hybrid_gtp_tp2", "both worlds need TP 2"},
      {"real_gpt_hybrid_moe_distributed_optimizer", "both worlds need EP >= 2"},
      {"real_hybrid_hybrid_gtp_dp", "both worlds need GTP 2"},
      {"real_hybrid_hybrid_gdp_gtp_dp", "both worlds need GTP 2"},
      {"real_hybrid_hybrid_cp", "both worlds need CP 2"},
      {"real_gpt_hybrid_cp", "both worlds need CP 2"}};
  for (const auto& [name, why] : needs) {
    auto s = make_world_scenario(name, 1, 2);
    ASSERT_FALSE(s.ok()) << name;
    EXPECT_EQ(s.error().kind, seam_kind::unsupported) << name;
    EXPECT_NE(s.error().message.find(why), std::string::npos) << s.error().message;
  }
  auto tp = make_world_scenario("gpt_hybrid_pp_tp", 2, 1);
  ASSERT_FALSE(tp.ok());
  EXPECT_NE(tp.error().message.find("the load world needs PP=2"), std::string::npos) << tp.error().message;
}

// The GTP x DP rows put DP replicas beside GTP 2 (4 ranks: GTP 2 x DP 2, 2 ranks: GTP 2 x DP 1); the CP rows
// put every model at CP 2 (4 ranks: TP 2 x CP 2).
TEST(ScenarioTable, GtpDpAndCpRowsLayOutTheirReplicas) {
  for (const char* name : {"real_hybrid_hybrid_gtp_dp", "real_hybrid_hybrid_gdp_gtp_dp"}) {
    auto s = make_world_scenario(name, 4, 2);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->save.text(), "TP=1 PP=1 GTP=2 DP=2 (4 ranks)") << name;
    EXPECT_EQ(s->load.text(), "TP=1 PP=1 GTP=2 (2 ranks)") << name;
    EXPECT_EQ(data_parallel_size(s->real_save.sizes), 2) << name;
  }
  for (const char* name : {"real_hybrid_hybrid_cp", "real_gpt_hybrid_cp"}) {
    auto s = make_world_scenario(name, 4, 2);
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->save.text(), "TP=2 PP=1 CP=2 (4 ranks)") << name;
    EXPECT_EQ(s->load.text(), "TP=1 PP=1 CP=2 (2 ranks)") << name;
    EXPECT_EQ(s->real_save.sizes.cp, 2) << name;
  }
}

TEST(ScenarioTable, EveryListIsReadOffTheTableInItsOrder) {
  const auto rows = [](auto keep) {
    std::vector<std::string> out;
    for (const ScenarioRow& row : scenario_table())
      if (keep(row)) out.emplace_back(row.name);
    return out;
  };
  EXPECT_EQ(world_scenario_names(),
            rows([](const ScenarioRow& r) { return r.kind == ScenarioKind::gpt_hybrid && r.in_all == InAll::yes; }));
  EXPECT_EQ(gtp_world_scenario_names(),
            rows([](const ScenarioRow& r) { return r.kind == ScenarioKind::gdp_gtp && r.in_all == InAll::yes; }));
  EXPECT_EQ(shard_split_world_scenario_names(),
            rows([](const ScenarioRow& r) { return r.in_all == InAll::with_candidate; }));
  EXPECT_EQ(real_world_scenario_names(),
            rows([](const ScenarioRow& r) { return is_real(r.kind) && r.in_all == InAll::yes; }));
  EXPECT_EQ(real_finding_scenario_names(), rows([](const ScenarioRow& r) { return r.in_all == InAll::no; }));
  EXPECT_EQ(gate_real_scenario_names(), joined({real_world_scenario_names(), real_finding_scenario_names()}));
  std::vector<std::string> not_run;
  for (const auto& [name, why] : world_scenarios_not_run()) {
    not_run.push_back(name);
    EXPECT_EQ(why, kNeedsCandidate) << name;
  }
  EXPECT_EQ(not_run, shard_split_world_scenario_names());
  // Every row is in exactly one list.
  std::vector<std::string> all =
      joined({world_scenario_names(), gtp_world_scenario_names(), shard_split_world_scenario_names(),
              real_world_scenario_names(), real_finding_scenario_names()});
  std::vector<std::string> names = table_names();
  std::sort(all.begin(), all.end()), std::sort(names.begin(), names.end());
  EXPECT_EQ(all, names);
}

TEST(ScenarioTable, OnlyRealFindingRowsStayOutOfAllAndEachNamesItsPinnedFinding) {
  for (const ScenarioRow& row : scenario_table()) {
    const std::string name(row.name);
    if (row.in_all != InAll::no) {
      EXPECT_TRUE(row.finding.empty()) << name;
      continue;
    }
    EXPECT_TRUE(is_real(row.kind)) << name;  // the gate's real tier runs it
    ASSERT_FALSE(row.finding.empty()) << name;
    // Each letter has a pin in corpus/findings whose token is this scenario's gate check.
    std::stringstream letters{std::string(row.finding)};
    for (std::string letter; std::getline(letters, letter, ',');) {
      letter.erase(0, letter.find_first_not_of(' '));
      bool pinned = false;
      for (const auto& f : fs::directory_iterator(fs::path(IH_SOURCE_DIR_PATH) / "corpus" / "findings")) {
        if (f.path().filename().string().rfind(letter + "-", 0) != 0) continue;
        std::ifstream in(f.path());
        for (std::string line; std::getline(in, line);)
          pinned = pinned || (line.rfind("token:", 0) == 0 &&
                              line.find("gate/real-roundtrips/" + name + "_4_to_2:") != std::string::npos);
      }
      EXPECT_TRUE(pinned) << name << ": no corpus/findings/" << letter << "-*.finding pins it";
    }
  }
}

TEST(ScenarioTable, UnknownNamesAreRefusedNamingTheScenariosThereAre) {
  for (const char* name : {"no_such", "real_no_such"}) {
    auto s = make_world_scenario(name, 2, 2);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().kind, ErrorKind::invalid_argument);
    EXPECT_EQ(s.error().message.rfind("unknown scenario '" + std::string(name) + "' (known: gpt_hybrid_tp, ", 0), 0u)
        << s.error().message;
  }
}

ScenarioRequest request(ScenarioRequest::Mode mode, bool real, WorldSizes sizes = {4, 2}) {
  ScenarioRequest r;
  r.mode = mode, r.real = real, r.sizes = sizes;
  return r;
}

TEST(ScenarioSelection, AllRunsTheRowsOfItsFamilyAndSaysWhichItCannot) {
  auto synthetic = select_scenarios(request(ScenarioRequest::Mode::all, false));
  ASSERT_TRUE(synthetic.ok()) << synthetic.error().message;
  std::vector<std::string> runnable = joined({world_scenario_names(), gtp_world_scenario_names()});
  runnable.erase(std::find(runnable.begin(), runnable.end(), "gdp_in_proj_gtp_local"));  // A = B only
  EXPECT_EQ(names_of(synthetic->scenarios), runnable);
  ASSERT_EQ(synthetic->not_run.size(), 1u + shard_split_world_scenario_names().size());
  EXPECT_EQ(synthetic->not_run[0].rfind("gdp_in_proj_gtp_local: scenario 'gdp_in_proj_gtp_local' cannot", 0), 0u);
  EXPECT_EQ(synthetic->not_run[1], shard_split_world_scenario_names()[0] + ": " + std::string(kNeedsCandidate));

  ScenarioRequest with_candidate = request(ScenarioRequest::Mode::all, false);
  with_candidate.candidate = Candidate::shard_split;
  auto candidate = select_scenarios(with_candidate);
  ASSERT_TRUE(candidate.ok()) << candidate.error().message;
  EXPECT_EQ(names_of(candidate->scenarios), joined({runnable, shard_split_world_scenario_names()}));
  EXPECT_EQ(candidate->not_run.size(), 1u);

  auto real = select_scenarios(request(ScenarioRequest::Mode::all, true));
  ASSERT_TRUE(real.ok()) << real.error().message;
  EXPECT_EQ(names_of(real->scenarios), real_world_scenario_names());  // never the finding ones
  EXPECT_TRUE(real->not_run.empty());

  auto one_rank = select_scenarios(request(ScenarioRequest::Mode::all, true, {1, 1}));
  ASSERT_TRUE(one_rank.ok());
  EXPECT_FALSE(one_rank->not_run.empty());  // the PP 2 ones, printed NOT RUN
  EXPECT_LT(one_rank->scenarios.size(), real_world_scenario_names().size());
}

TEST(ScenarioSelection, ANamedScenarioMustBeOfTheAskedFamilyAndRunnable) {
  const auto named = [](const std::string& name, bool real, Candidate candidate = Candidate::none) {
    ScenarioRequest r = request(ScenarioRequest::Mode::named, real);
    r.name = name, r.candidate = candidate;
    return select_scenarios(r);
  };
  auto finding = named("real_gpt_hybrid_gtp_swiglu", true);
  ASSERT_TRUE(finding.ok()) << finding.error().message;
  EXPECT_EQ(names_of(finding->scenarios), std::vector<std::string>{"real_gpt_hybrid_gtp_swiglu"});
  auto not_real = named("gpt_hybrid_tp", true);
  ASSERT_FALSE(not_real.ok());
  EXPECT_NE(not_real.error().message.find("is not a real-model scenario"), std::string::npos);
  auto real = named("real_gpt_hybrid_tp", false);
  ASSERT_FALSE(real.ok());
  EXPECT_NE(real.error().message.find("is a real-model scenario: add --real"), std::string::npos);
  auto shard_split = named("gdp_in_proj_shard_split", false);
  ASSERT_FALSE(shard_split.ok());
  EXPECT_EQ(shard_split.error().kind, seam_kind::unsupported);
  EXPECT_EQ(shard_split.error().message,
            "scenario 'gdp_in_proj_shard_split' is not run: " + std::string(kNeedsCandidate));
  EXPECT_TRUE(named("gdp_in_proj_shard_split", false, Candidate::shard_split).ok());
  auto local = named("gdp_in_proj_gtp_local", false);
  ASSERT_FALSE(local.ok());
  EXPECT_EQ(local.error().kind, seam_kind::unsupported);  // 4 -> 2: exit 2 with its reason
}

TEST(ScenarioSelection, ASeedDrawsOneScenarioOfItsFamily) {
  ScenarioRequest r = request(ScenarioRequest::Mode::seed, true);
  r.seed = 7;
  auto real = select_scenarios(r);
  ASSERT_TRUE(real.ok()) << real.error().message;
  ASSERT_EQ(real->scenarios.size(), 1u);
  EXPECT_EQ(real->scenarios[0].name, "real_seed_7");
  EXPECT_TRUE(real->scenarios[0].is_real());
  r.real = false, r.sizes = {3, 2};
  auto refused = select_scenarios(r);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::invalid_argument);
}

TEST(WorldScenario, EveryEnumHasOneWord) {
  EXPECT_EQ(to_string(Device::cpu), "cpu");
  EXPECT_EQ(to_string(Device::cuda), "cuda");
  EXPECT_EQ(mixer_word(GtpMixer::gdp), "gdp");
  EXPECT_EQ(mixer_word(GtpMixer::mamba), "mamba");
  EXPECT_EQ(mixer_word(GtpMixer::mamba), ModelConfig{}.ssm_mixer);  // the model's default mixer
  EXPECT_EQ(to_string(ScenarioKind::real_hybrid_hybrid), "real_hybrid_hybrid");
  EXPECT_TRUE(is_real(ScenarioKind::real_gpt_hybrid));
  EXPECT_FALSE(is_real(ScenarioKind::gdp_gtp));
  EXPECT_EQ(saved_model(ScenarioKind::real_hybrid_hybrid), ModelKind::hybrid);
  EXPECT_EQ(saved_model(ScenarioKind::real_gpt_hybrid), ModelKind::gpt);
}

}  // namespace
}  // namespace ih
