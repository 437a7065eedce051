// The round trip's plan and oracle writer (world_plan.h) on its own: no Megatron, no MPI, no
// LibTorch. Every named scenario at a few world sizes, the files and coverage it promises, one
// hand-computed expectation per kind of layout change, the plan's oracle field, and each refusal.
#include "harness/roundtrip/world_plan.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace ih {
namespace {

namespace fs = std::filesystem;
using json::Json;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A fresh folder under $TMPDIR (else /tmp), removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/ih-world-plan-test-XXXXXX";
    if (mkdtemp(templ.data())) path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

Json read_json(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  EXPECT_TRUE(parsed.ok()) << path;
  return parsed.ok() ? *parsed : Json();
}

/// The oracle entry of `path` on a load rank (fails the test, naming the paths there, when absent).
Json oracle_tensor(const fs::path& dir, int rank, const std::string& path) {
  const Json oracle = read_json(dir / ("oracle_rank_" + std::to_string(rank) + ".json"));
  std::string paths;
  for (const Json& t : oracle["tensors"]) {
    if (t["path"] == path) return t;
    if (paths.size() < 400) paths += " " + t["path"].get<std::string>();
  }
  ADD_FAILURE() << "no oracle entry " << path << " on load rank " << rank << "; there:" << paths << " ...";
  return Json::object();
}

std::map<std::int64_t, Json> catalogue_keys(const fs::path& dir) {
  const Json catalogue = read_json(dir / "catalogue.json");
  std::map<std::int64_t, Json> out;
  for (const char* list : {"keys", "fresh_keys"})
    for (const Json& k : catalogue[list]) out[k["id"].get<std::int64_t>()] = k;
  return out;
}

struct Sizes {
  std::int64_t save, load;
};
const Sizes kSizes[] = {{2, 4}, {4, 2}, {2, 2}, {1, 2}};

std::vector<std::string> every_name() {
  std::vector<std::string> names = world_scenario_names();
  for (const auto& n : gtp_world_scenario_names()) names.push_back(n);
  for (const auto& n : shard_split_world_scenario_names()) names.push_back(n);
  return names;
}

TEST(WorldPlan, EveryScenarioWritesItsFilesAndEverySavedElementIsRead) {
  int written = 0;
  for (const std::string& name : every_name())
    for (const Sizes& n : kSizes) {
      SCOPED_TRACE(name + " " + std::to_string(n.save) + " -> " + std::to_string(n.load));
      auto s = make_world_scenario(name, n.save, n.load);
      if (!s.ok()) {
        EXPECT_EQ(s.error().kind, seam_kind::unsupported) << s.error().message;  // cannot be laid out: never a pass
        continue;
      }
      TempDir dir;
      auto stats = write_world_scenario(*s, dir.path);
      ASSERT_TRUE(stats.ok()) << stats.error().message;
      ++written;
      EXPECT_GT(stats->gpt_keys, 0);
      EXPECT_GT(stats->expected_elements, 0);
      EXPECT_GT(stats->expected_writers, 0);
      EXPECT_EQ(stats->uncovered_elements, 0);
      for (std::int64_t r = 0; r < n.save; ++r)
        EXPECT_TRUE(fs::exists(dir.path / ("save_rank_" + std::to_string(r) + ".json")));
      EXPECT_FALSE(fs::exists(dir.path / ("save_rank_" + std::to_string(n.save) + ".json")));
      for (std::int64_t r = 0; r < n.load; ++r) {
        EXPECT_TRUE(fs::exists(dir.path / ("load_rank_" + std::to_string(r) + ".json")));
        EXPECT_TRUE(fs::exists(dir.path / ("oracle_rank_" + std::to_string(r) + ".json")));
      }
      EXPECT_FALSE(fs::exists(dir.path / ("oracle_rank_" + std::to_string(n.load) + ".json")));
      const Json catalogue = read_json(dir.path / "catalogue.json");
      EXPECT_EQ(catalogue["uncovered_elements"], 0);
      for (const Json& w : catalogue["writers"]) {  // [key, chunk offset, rank]: a save rank
        EXPECT_GE(w[2].get<std::int64_t>(), 0);
        EXPECT_LT(w[2].get<std::int64_t>(), n.save);
      }
    }
  EXPECT_GE(written, 20);  // most scenarios fit most sizes
}

TEST(WorldPlan, OracleSegmentsLieInsideTheirKeyAndTheirLocalTensor) {
  for (const std::string& name : every_name()) {
    SCOPED_TRACE(name);
    auto s = make_world_scenario(name, 2, 2);
    ASSERT_TRUE(s.ok()) << s.error().message;
    TempDir dir;
    ASSERT_TRUE(write_world_scenario(*s, dir.path).ok());
    const auto keys = catalogue_keys(dir.path);
    for (int r = 0; r < 2; ++r) {
      const Json oracle = read_json(dir.path / ("oracle_rank_" + std::to_string(r) + ".json"));
      ASSERT_FALSE(oracle["tensors"].empty());
      for (const Json& t : oracle["tensors"]) {
        SCOPED_TRACE(t["path"].get<std::string>());
        const auto local = t["local_shape"].get<std::vector<std::int64_t>>();
        std::int64_t rows_covered = 0;
        for (const Json& seg : t["segments"]) {  // [begin, rows, key id, global shape, global offset, prepend]
          const auto begin = seg[0].get<std::int64_t>(), rows = seg[1].get<std::int64_t>();
          const auto shape = seg[3].get<std::vector<std::int64_t>>(), offset = seg[4].get<std::vector<std::int64_t>>();
          const auto p = static_cast<std::size_t>(seg[5].get<std::int64_t>());
          ASSERT_EQ(keys.count(seg[2].get<std::int64_t>()), 1u) << "key id " << seg[2];
          EXPECT_EQ(keys.at(seg[2].get<std::int64_t>())["global_shape"], seg[3]);
          EXPECT_GE(begin, 0);
          EXPECT_LE(begin + rows, local.empty() ? 1 : local[0]);
          ASSERT_LT(p, shape.size());
          EXPECT_LE(offset[p] + rows, shape[p]);
          for (std::size_t d = 0; d < shape.size(); ++d) EXPECT_LT(offset[d], shape[d]);
          rows_covered += rows;
        }
        EXPECT_LE(rows_covered, local.empty() ? 1 : local[0]);
      }
    }
  }
}

// M*-M*-: hybrid layer 1 ('*') is GPT layer 0, layer 4 GPT layer 1. QKV has 3 x 64 = 192 rows; at
// load TP=4 rank 1 holds rows [48, 96) of each GPT layer (the layer a leading axis).
TEST(WorldPlan, LoadRankHoldsItsTpSliceOfTheRightGptLayer) {
  auto s = make_world_scenario("gpt_hybrid_tp", 2, 4);
  ASSERT_TRUE(s.ok());
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*s, dir.path).ok());
  const auto keys = catalogue_keys(dir.path);
  for (const auto& [layer, gpt_layer] : {std::pair<int, int>{1, 0}, {4, 1}}) {
    const Json t = oracle_tensor(dir.path, 1,
                                 "model.decoder.layers." + std::to_string(layer) + ".self_attention.linear_qkv.weight");
    ASSERT_TRUE(t.contains("segments"));
    ASSERT_EQ(t["segments"].size(), 1u);
    const Json& seg = t["segments"][0];
    EXPECT_EQ(keys.at(seg[2].get<std::int64_t>())["key"], "decoder.layers.self_attention.linear_qkv.weight");
    EXPECT_EQ(seg[1], 48);
    EXPECT_EQ(seg[4], Json::array({gpt_layer, 48, 0}));
    EXPECT_EQ(seg[5], 1);
    EXPECT_FALSE(t["fresh"].get<bool>());
  }
  // Mamba layers stay local: their own (fresh) key ids, never a GPT key's.
  const Json mixer = oracle_tensor(dir.path, 1, "model.decoder.layers.0.mixer.in_proj.weight");
  ASSERT_TRUE(mixer.contains("segments"));
  EXPECT_TRUE(mixer["fresh"].get<bool>());
  EXPECT_GE(mixer["segments"][0][2].get<std::int64_t>(), kOracleFreshIdBase);
}

// TP 2 -> 1 x PP 2: load rank 1 is pipeline stage 1 and holds the second half of the layers whole.
TEST(WorldPlan, PipelineStageHoldsItsLayers) {
  auto s = make_world_scenario("gpt_hybrid_pp_tp", 2, 2);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->load.pp, 2);
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*s, dir.path).ok());
  const Json oracle = read_json(dir.path / "oracle_rank_1.json");
  std::set<std::int64_t> gpt_layers;
  for (const Json& t : oracle["tensors"]) {
    const std::string path = t["path"];
    if (path.rfind("model.", 0) != 0 || !contains(path, "self_attention.linear_qkv.weight")) continue;
    for (const Json& seg : t["segments"]) {
      gpt_layers.insert(seg[4][0].get<std::int64_t>());
      EXPECT_EQ(seg[1], 192) << path;  // TP 1: every row
    }
  }
  EXPECT_EQ(gpt_layers, (std::set<std::int64_t>{2, 3}));  // M*-M*-M*-M*-: 4 GPT layers, stage 1 holds 2 and 3
}

// DP 2 on both sides: only DP rank 0 (world ranks 0 .. TP-1) writes; each chunk has one writer.
TEST(WorldPlan, ReplicasNeverWrite) {
  auto s = make_world_scenario("dp_replicas", 4, 4);
  ASSERT_TRUE(s.ok());
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*s, dir.path).ok());
  const Json catalogue = read_json(dir.path / "catalogue.json");
  std::set<std::int64_t> writers;
  std::set<std::string> chunks;
  for (const Json& w : catalogue["writers"]) {
    writers.insert(w[2].get<std::int64_t>());
    EXPECT_TRUE(chunks.insert(w[0].get<std::string>() + "@" + w[1].dump()).second) << "two writers of " << w.dump();
  }
  EXPECT_EQ(writers, (std::set<std::int64_t>{0, 1}));
}

/// Which save ranks write the in_proj's chunks, and the design each save rank is told to use.
std::pair<std::set<std::int64_t>, std::set<std::string>> gdp_writers_and_designs(const std::string& name,
                                                                                 std::int64_t a, std::int64_t b) {
  auto s = make_world_scenario(name, a, b);
  EXPECT_TRUE(s.ok()) << (s.ok() ? "" : s.error().message);
  if (!s.ok()) return {};
  TempDir dir;
  EXPECT_TRUE(write_world_scenario(*s, dir.path).ok());
  std::set<std::int64_t> writers;
  const Json catalogue = read_json(dir.path / "catalogue.json");
  for (const Json& w : catalogue["writers"]) writers.insert(w[2].get<std::int64_t>());
  std::set<std::string> designs;
  for (std::int64_t r = 0; r < a; ++r)
    designs.insert(
        read_json(dir.path / ("save_rank_" + std::to_string(r) + ".json"))["gtp"]["design"].get<std::string>());
  return {writers, designs};
}

TEST(WorldPlan, ShardSplitSavesWriteTheirOwnPiecesGatherSavesOneReplica) {
  // Save world TP 1 x GTP 2, p 16: D = 28 rows, GTP rank 0 holds rows 0-15, rank 1 rows 16-27 and 4 pad rows.
  const auto [gather_writers, gather_design] = gdp_writers_and_designs("gdp_in_proj_gtp", 2, 4);
  EXPECT_EQ(gather_writers, (std::set<std::int64_t>{0}));  // the gathered chunks: GTP rank 0, the main replica
  EXPECT_EQ(gather_design, (std::set<std::string>{"gather"}));
  const auto [split_writers, split_design] = gdp_writers_and_designs("gdp_in_proj_shard_split", 2, 4);
  EXPECT_EQ(split_writers, (std::set<std::int64_t>{0, 1}));  // each GTP rank its own real rows
  EXPECT_EQ(split_design, (std::set<std::string>{"shard-split"}));
  // TP 2 x GTP 2: D = 14 < p x G, so GTP rank 1 of each TP rank (world ranks 1, 3) holds only padding.
  EXPECT_EQ(gdp_writers_and_designs("gdp_in_proj_shard_split", 4, 2).first, (std::set<std::int64_t>{0, 2}));
  EXPECT_EQ(gdp_writers_and_designs("gdp_in_proj_gather_to_shard_split", 4, 2).second,
            (std::set<std::string>{"gather"}));
  EXPECT_EQ(gdp_writers_and_designs("gdp_in_proj_shard_split_to_gather", 2, 4).first, (std::set<std::int64_t>{0, 1}));
}

TEST(WorldPlan, PlanNamesTheOracleEncodingAndEachScenario) {
  auto tp = make_world_scenario("gpt_hybrid_tp", 2, 2);
  auto local = make_world_scenario("gdp_in_proj_gtp_local", 2, 2);
  ASSERT_TRUE(tp.ok() && local.ok());
  auto plan = world_plan_json({&*tp, &*local}, "cpu");
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ((*plan)["device"], "cpu");
  EXPECT_EQ((*plan)["oracle"], (Json{{"key_shift", kOracleKeyShift}}));
  EXPECT_EQ(kOracleKeyShift, 40);  // the workers' and the verifier's reading of old checkpoints
  const Json& list = (*plan)["scenarios"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "gpt_hybrid_tp");
  EXPECT_EQ(list[0]["kind"], "gpt_hybrid");
  EXPECT_EQ(list[0]["dir"], "s_gpt_hybrid_tp");
  EXPECT_EQ(list[0]["load_order"], "serialization_load");
  EXPECT_EQ(list[0]["save"], "TP=2 PP=1 (2 ranks)");
  EXPECT_EQ(list[1]["kind"], "gdp_gtp");
  EXPECT_EQ(list[1]["load_order"], "to_state_dict");
  EXPECT_EQ(list[1]["save"], "TP=1 GTP=2 p=16 (2 ranks)");

  WorldScenario fixed = *local;
  fixed.load_order = LoadOrder::to_state_dict_fixed;  // a reference-model ordering no worker runs
  auto refused = world_plan_json({&fixed}, "cpu");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::invalid_argument);
  EXPECT_TRUE(contains(refused.error().message, "to_state_dict_fixed")) << refused.error().message;
}

TEST(WorldPlan, RefusalsNameWhatIsWrong) {
  const auto refused = [](const Result<WorldScenario>& r, ErrorKind kind, const std::string& part) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().kind, kind) << r.error().message;
    EXPECT_TRUE(contains(r.error().message, part)) << r.error().message;
  };
  refused(make_world_scenario("no_such", 2, 2), ErrorKind::invalid_argument,
          "unknown scenario 'no_such' (known: gpt_hybrid_tp");
  refused(make_world_scenario("gpt_hybrid_tp", 9, 2), ErrorKind::invalid_argument, "[1, 8]");
  refused(make_world_scenario("gpt_hybrid_tp", 0, 2), ErrorKind::invalid_argument, "[1, 8]");
  refused(make_world_scenario("gpt_hybrid_tp", 3, 2), seam_kind::unsupported, "1, 2, 4 or 8 ranks");
  refused(make_world_scenario("gpt_hybrid_tp_pp", 1, 2), seam_kind::unsupported, "the save world needs PP=2");
  refused(make_world_scenario("gpt_hybrid_pp_tp", 2, 1), seam_kind::unsupported, "the load world needs PP=2");
  refused(make_world_scenario("dp_replicas", 1, 2), seam_kind::unsupported, "both worlds need DP=2");
  refused(make_world_scenario("gdp_in_proj_gtp_local", 2, 4), seam_kind::unsupported, "(A = B)");
  refused(make_world_scenario("gdp_in_proj_gtp", 8, 2), seam_kind::unsupported, "GTP worlds of 1, 2 or 4 ranks");
  refused(custom_world_scenario("MM", {.tp = 2}, {.tp = 1}, false, false), ErrorKind::unbalanced_attention_mlp,
          "pattern 'MM'");
  refused(custom_world_scenario("M*-M*-", {.tp = 1, .pp = 3}, {.tp = 1}, false, false), ErrorKind::invalid_argument,
          "2 layers, not divisible by --save-pp 3");
  refused(custom_world_scenario("M*-M*-", {.tp = 0}, {.tp = 1}, false, false), ErrorKind::invalid_argument,
          "at least 1");
}

TEST(WorldPlan, CommandLineScenarioIsLaidOutAsGiven) {
  auto s = custom_world_scenario("M*-|M*-", {.tp = 2, .pp = 2}, {.tp = 1, .pp = 2}, true, true);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->name, kCustomScenarioName);
  EXPECT_EQ(s->save.ranks(), 4);
  EXPECT_EQ(s->load.ranks(), 2);
  TempDir dir;
  auto stats = write_world_scenario(*s, dir.path);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->uncovered_elements, 0);
  EXPECT_TRUE(fs::exists(dir.path / "save_rank_3.json"));
  EXPECT_TRUE(fs::exists(dir.path / "oracle_rank_1.json"));
}

TEST(WorldPlan, SeedGivesTheSameScenarioEveryTime) {
  auto a = seeded_world_scenario(2, 4, 2), b = seeded_world_scenario(2, 4, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->pattern, "M*E*ME**EE");  // docs/roundtrip.md names this draw
  EXPECT_EQ(a->pattern, b->pattern);
  EXPECT_EQ(a->save.text(), b->save.text());
  EXPECT_EQ(a->load.text(), b->load.text());
  EXPECT_EQ(a->save.ranks(), 4);
  EXPECT_EQ(a->load.ranks(), 2);
}

}  // namespace
}  // namespace ih
