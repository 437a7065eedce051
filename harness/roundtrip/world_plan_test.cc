// The round trip's plan and oracle writer (world_plan.h) on its own: no Megatron, no MPI, no
// LibTorch. Every named scenario at a few world sizes, the files and coverage it promises, one
// hand-computed expectation per kind of layout change, the plan's oracle field, and each refusal.
#include "harness/roundtrip/world_plan.h"
#include "harness/roundtrip/plan_segments.h"
#include "harness/roundtrip/plan_test_files.h"
#include "harness/roundtrip/roundtrip_session.h"
#include "harness/roundtrip/world_run.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
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
  const std::int64_t fresh_id = mixer["segments"][0][2].get<std::int64_t>();
  bool gpt = false, fresh = false;
  const Json catalogue = read_json(dir.path / "catalogue.json");
  for (const Json& k : catalogue["keys"]) gpt |= k["id"] == fresh_id;
  for (const Json& k : catalogue["fresh_keys"]) fresh |= k["id"] == fresh_id;
  EXPECT_TRUE(fresh && !gpt) << fresh_id;
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
  auto plan = world_plan_json({&*tp, &*local}, Device::cpu);
  ASSERT_TRUE(plan.ok()) << plan.error().message;
  EXPECT_EQ((*plan)["device"], "cpu");
  EXPECT_FALSE(plan->contains("oracle"));  // each scenario's catalogue.json names its own
  const Json& list = (*plan)["scenarios"];
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0]["name"], "gpt_hybrid_tp");
  EXPECT_EQ(list[0]["kind"], "gpt_hybrid");
  EXPECT_EQ(list[0]["dir"], "s_gpt_hybrid_tp");
  EXPECT_EQ(list[0]["load_order"], "serialization_load");
  EXPECT_EQ(list[0]["load_path"], "dist_checkpointing");
  EXPECT_EQ(list[0]["save"], "TP=2 PP=1 (2 ranks)");
  EXPECT_EQ(list[1]["kind"], "gdp_gtp");
  EXPECT_EQ(list[1]["load_order"], "to_state_dict");
  EXPECT_EQ(list[1]["save"], "TP=1 GTP=2 p=16 (2 ranks)");
  EXPECT_TRUE(list[0]["saved_by_older_megatron"].is_null());

  // The GPT checkpoints users already have: saved by a Megatron-LM from before the optimizer refactor
  // (7d3f4a0122), whose args had no GatedDeltaProduct and whose param groups no default_config yet.
  auto training = make_world_scenario("real_gpt_hybrid_training", 4, 2);
  ASSERT_TRUE(training.ok()) << training.error().message;
  auto training_plan = world_plan_json({&*training}, Device::cpu);
  ASSERT_TRUE(training_plan.ok()) << training_plan.error().message;
  EXPECT_EQ((*training_plan)["scenarios"][0]["load_path"], "training");
  EXPECT_EQ((*training_plan)["scenarios"][0]["saved_by_older_megatron"],
            (Json{{"args", {"gdp_num_householder"}}, {"param_group_fields", {"default_config"}}}));

  WorldScenario fixed = *local;
  fixed.load_order = LoadOrder::to_state_dict_fixed;  // a reference-model ordering no worker runs
  auto refused = world_plan_json({&fixed}, Device::cpu);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::invalid_argument);
  EXPECT_TRUE(contains(refused.error().message, "to_state_dict_fixed")) << refused.error().message;
}

/// A stand-in for the Megatron target's `model dump` (no Megatron here): the reference's entries of the
/// rank, sent through the dump's JSON (no tensor data), so factories arrive as a real model's do, built
/// pieces only. Counts the ranks it was asked for.
struct DescribedByReference {
  std::shared_ptr<std::int64_t> calls = std::make_shared<std::int64_t>(0);
  Result<std::vector<FlatEntry>> operator()(const ModelDumpSpec& spec, std::int64_t rank) const {
    ++*calls;
    IH_TRY_ASSIGN(dict, model_state_dict(spec, rank));
    return json::entries_from_json(json::dump_entries_to_json(flatten(StateNode(dict))));
  }
};

/// Megatron's replica ids under GTP (make_sharded_tensors_for_checkpoint_with_gtp_remat; the gathered
/// in_proj): a replicated entry's DP coordinate is the rank in the GTP-inclusive dp_cp group, g + G x d,
/// where the reference's synthetic model keeps d (its model does not GTP-wrap the plain linears). Every
/// replica_id of the dump JSON (built pieces too) is rewritten so, on a GTP world; the rest is the reference's.
struct DescribedAsMegatronUnderGtp {
  Result<std::vector<FlatEntry>> operator()(const ModelDumpSpec& spec, std::int64_t rank) const {
    IH_TRY_ASSIGN(dict, model_state_dict(spec, rank));
    IH_TRY_ASSIGN(l, rank_layout(spec.sizes, rank));
    Json dumped = json::dump_entries_to_json(flatten(StateNode(dict)));
    const std::function<void(Json&)> walk = [&](Json& j) {
      if (j.is_object()) {
        for (auto& [k, v] : j.items()) {
          if (k == "replica_id" && v.is_array() && !v.empty() && v.back() == l.dp_rank && spec.sizes.gtp > 1)
            v.back() = l.gtp_rank + spec.sizes.gtp * l.dp_rank;
          else
            walk(v);
        }
      } else if (j.is_array()) {
        for (Json& v : j) walk(v);
      }
    };
    walk(dumped);
    return json::entries_from_json(dumped);
  }
};

/// DescribedAsMegatronUnderGtp with `edit` applied to each entry of a GTP rank's dump JSON: how Megatron
/// describes what the reference does not model (a padded shard, the SwiGLU pieces of finding S).
RealModelEntries described_under_gtp_edited(std::function<void(Json& entry, const RankLayout&)> edit) {
  return [edit](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    IH_TRY_ASSIGN(entries, DescribedAsMegatronUnderGtp{}(spec, rank));
    if (spec.sizes.gtp == 1) return entries;
    IH_TRY_ASSIGN(l, rank_layout(spec.sizes, rank));
    Json dumped = json::dump_entries_to_json(entries);
    for (Json& item : dumped) edit(item["entry"], l);
    return json::entries_from_json(dumped);
  };
}

TEST(WorldPlan, RealScenariosArePlannedFromTheDescribedModelsAndReadEverySavedElement) {
  for (const std::string& name : real_world_scenario_names())
    for (const auto& [a, b] : {std::pair{4, 2}, std::pair{2, 4}}) {
      auto s = make_world_scenario(name, a, b);
      ASSERT_TRUE(s.ok()) << name << ": " << s.error().message;
      EXPECT_TRUE(s->is_real());
      EXPECT_EQ(s->save.ranks(), a);
      EXPECT_EQ(s->load.ranks(), b);
      TempDir dir;
      if (s->real_save.sizes.gtp > 1 || s->real_load.sizes.gtp > 1) {  // planned as under Megatron's ids
        auto stats = write_world_scenario(*s, dir.path, DescribedAsMegatronUnderGtp{});
        ASSERT_TRUE(stats.ok()) << name << ": " << stats.error().message;
        EXPECT_EQ(stats->uncovered_elements, 0) << name;
        continue;
      }
      DescribedByReference describe;
      auto stats = write_world_scenario(*s, dir.path, describe);
      ASSERT_TRUE(stats.ok()) << name << ": " << stats.error().message;
      EXPECT_EQ(*describe.calls, a + b) << name;
      EXPECT_GT(stats->expected_elements, 0) << name;
      EXPECT_EQ(stats->uncovered_elements, 0) << name;
      const Json save0 = read_json(dir.path / "save_rank_0.json");
      EXPECT_EQ(save0["kind"], std::string(to_string(s->kind)));
      EXPECT_EQ(save0["model"]["rank"], 0);
    }
  // A factory without data (a real one) lays its built tensors' rows one after the other.
  auto swiglu = make_world_scenario("real_gpt_hybrid_swiglu_tied", 2, 1);
  ASSERT_TRUE(swiglu.ok());
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*swiglu, dir.path, DescribedByReference{}).ok());
  const Json fc1 = read_json(dir.path / "save_rank_0.json")["fill"]["model.decoder.layers.0.mlp.linear_fc1.weight"];
  ASSERT_EQ(fc1.size(), 2u) << fc1.dump();
  EXPECT_EQ(fc1[0][0], 0);
  EXPECT_EQ(fc1[1][0], fc1[0][1]);  // the second piece starts where the first ends
  // Without the target's description a real scenario cannot be planned: a harness error, never a guess.
  const auto refused = write_world_scenario(*swiglu, dir.path);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, seam_kind::harness_error);
}

TEST(WorldPlan, TrainingSavesListEachChunksHoldersAsItsPossibleWriters) {
  // save_checkpoint saves fully parallel: a replicated chunk is written by one of the ranks holding it.
  const auto writers = [](const std::string& name) {
    auto s = make_world_scenario(name, 4, 2);
    EXPECT_TRUE(s.ok()) << name;
    TempDir dir;
    EXPECT_TRUE(write_world_scenario(*s, dir.path, DescribedByReference{}).ok()) << name;
    return read_json(dir.path / "catalogue.json")["writers"];
  };
  bool replicated = false;
  for (const Json& w : writers("real_gpt_hybrid_training_moe")) {  // EP 4 at TP 1: dense chunks on 4 ranks
    ASSERT_EQ(w.size(), 4u) << w.dump();
    const auto holders = w[3].get<std::vector<std::int64_t>>();
    EXPECT_NE(std::find(holders.begin(), holders.end(), w[2].get<std::int64_t>()), holders.end()) << w.dump();
    replicated |= holders == std::vector<std::int64_t>{0, 1, 2, 3};
  }
  EXPECT_TRUE(replicated);
  for (const Json& w : writers("real_gpt_hybrid_moe")) EXPECT_EQ(w.size(), 3u) << w.dump();  // the main replica's rank
}

/// The reference's entries with Megatron's optimizer param groups as plain values (the reference does not model
/// them): one group, its `default_config` and `lr`.
RealModelEntries described_with_param_groups() {
  return [](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    IH_TRY_ASSIGN(entries, DescribedByReference{}(spec, rank));
    if (!spec.optimizer) return entries;
    Json dumped = json::dump_entries_to_json(entries);
    for (const auto& [field, value] : {std::pair<const char*, Json>{"default_config", true}, {"lr", 0.5}})
      dumped.push_back({{"path", std::string("optimizer.param_groups.0.") + field},
                        {"entry", {{"kind", "plain"}, {"value", value}}}});
    return json::entries_from_json(dumped);
  };
}

TEST(WorldPlan, AnOlderMegatronsCheckpointLacksDefaultConfigAndTheResumedRunsGroupsAreChecked) {
  const auto planned = [](const std::string& name, bool older) {
    auto s = make_world_scenario(name, 2, 1);
    EXPECT_TRUE(s.ok()) << name;
    s->saved_by_older_megatron = older;
    TempDir dir;
    EXPECT_TRUE(write_world_scenario(*s, dir.path, described_with_param_groups()).ok()) << name;
    return std::pair{read_json(dir.path / "catalogue.json")["saved_plain"], read_json(dir.path / "oracle_rank_0.json")};
  };
  const auto [older_saved, older_oracle] = planned("real_gpt_hybrid_training_optimizer", true);
  EXPECT_FALSE(older_saved.contains("optimizer.param_groups.0.default_config")) << older_saved.dump();
  EXPECT_TRUE(older_saved.contains("optimizer.param_groups.0.lr")) << older_saved.dump();
  EXPECT_EQ(older_oracle["param_groups_after_load_checkpoint"], true);
  EXPECT_EQ(older_oracle["plain"].size(), 2u);  // the resumed run's own groups: both fields expected back
  const auto [current_saved, current_oracle] = planned("real_gpt_hybrid_training_optimizer", false);
  EXPECT_TRUE(current_saved.contains("optimizer.param_groups.0.default_config"));
  // Not on dist_checkpointing's path (no load_checkpoint) nor with a chain of optimizers (experts).
  EXPECT_EQ(planned("real_gpt_hybrid_optimizer", false).second["param_groups_after_load_checkpoint"], false);
  EXPECT_EQ(planned("real_gpt_hybrid_training_moe", false).second["param_groups_after_load_checkpoint"], false);
}

TEST(WorldPlan, RealOptimizerMomentsAreFilledAndRetargetedLikeTheirWeights) {
  auto s = make_world_scenario("real_gpt_hybrid_optimizer", 2, 1);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->real_save.optimizer && s->real_load.optimizer);
  EXPECT_EQ(s->real_save.optimizer_kind, OptimizerKind::fp32);  // the optimizer float64 parameters can have
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*s, dir.path, DescribedByReference{}).ok());
  // The save ranks fill Adam's moments as they fill the weights.
  const Json save0 = read_json(dir.path / "save_rank_0.json");
  std::int64_t moments = 0;
  for (const auto& [path, segments] : save0["fill"].items()) {
    if (path.rfind("optimizer.", 0) != 0) continue;
    ++moments;
    EXPECT_FALSE(segments.empty()) << path;
  }
  EXPECT_GT(moments, 0);
  // The load rank expects the GPT's moments in the hybrid's attention and MLP layers and keeps its Mamba
  // layers' moments fresh, exactly as for their weights.
  std::map<std::int64_t, std::string> key_of;
  const Json catalogue = read_json(dir.path / "catalogue.json");
  for (const Json& k : catalogue["keys"]) key_of[k["id"].get<std::int64_t>()] = k["key"].get<std::string>();
  std::int64_t loaded_moments = 0, fresh_moments = 0;
  const Json oracle = read_json(dir.path / "oracle_rank_0.json");
  for (const Json& t : oracle["tensors"]) {
    const std::string path = t["path"];
    if (path.rfind("optimizer.", 0) != 0) continue;
    if (t["fresh"].get<bool>()) {
      ++fresh_moments;
      continue;
    }
    ++loaded_moments;
    for (const Json& seg : t["segments"]) {
      const std::string key = key_of[seg[2].get<std::int64_t>()];
      EXPECT_EQ(key.rfind("optimizer.state.exp_avg", 0), 0u) << path << " reads " << key;
    }
  }
  EXPECT_GT(loaded_moments, 0);
  EXPECT_GT(fresh_moments, 0);  // M*-M*-: the Mamba layers' moments
}

TEST(WorldPlan, RealDistributedOptimizerIsPlannedInFloat32WithItsParamStateOnItsParameter) {
  auto s = make_world_scenario("real_gpt_hybrid_distributed_optimizer", 4, 2);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(s->distributed_optimizer());
  TempDir dir;
  auto stats = write_world_scenario(*s, dir.path, DescribedByReference{});
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->uncovered_elements, 0);
  const Json catalogue = read_json(dir.path / "catalogue.json");
  std::int64_t max_id = 0, max_numel = 0;
  std::map<std::string, std::int64_t> id_of;
  for (const char* list : {"keys", "fresh_keys"})
    for (const Json& k : catalogue[list]) {
      max_id = std::max(max_id, k["id"].get<std::int64_t>());
      id_of[k["key"].get<std::string>()] = k["id"].get<std::int64_t>();
      std::int64_t n = 1;
      for (const Json& d : k["global_shape"]) n *= d.get<std::int64_t>();
      max_numel = std::max(max_numel, n);
    }
  // The largest key is the GPT's linear_qkv, both layers on one axis, 2 x 192 x 64 = 24,576 elements: 15 index
  // bits, so each value (id << 15 | index) stays exact in an fp32 parameter.
  EXPECT_EQ(max_numel, 2 * 192 * 64);
  EXPECT_EQ(catalogue["oracle"], (Json{{"key_shift", 15}, {"dtype", "float32"}}));
  EXPECT_LE((max_id + 1) << 15, std::int64_t{1} << 24);
  // optimizer.state.param.<key> is the fp32 parameter <key> itself: it holds <key>'s values.
  ASSERT_FALSE(catalogue["aliases"].empty());
  for (const Json& a : catalogue["aliases"]) {
    const std::string alias = a["key"];
    ASSERT_EQ(alias.rfind("optimizer.state.param.", 0), 0u) << alias;
    EXPECT_EQ(a["id"], id_of.at(alias.substr(std::string("optimizer.state.param.").size()))) << alias;
    EXPECT_FALSE(id_of.count(alias)) << alias;
  }
  // The MoE variant (dense states sliced over DP 4 -> 2 and 2 -> 4) is planned alike.
  for (const auto& [a, b] : {std::pair{4, 2}, std::pair{2, 4}}) {
    auto moe = make_world_scenario("real_gpt_hybrid_moe_distributed_optimizer", a, b);
    ASSERT_TRUE(moe.ok()) << moe.error().message;
    EXPECT_TRUE(moe->distributed_optimizer());
    EXPECT_EQ(moe->save.ranks(), a);
    TempDir moe_dir;
    auto moe_stats = write_world_scenario(*moe, moe_dir.path, DescribedByReference{});
    ASSERT_TRUE(moe_stats.ok()) << moe_stats.error().message;
    EXPECT_EQ(moe_stats->uncovered_elements, 0);
    EXPECT_EQ(read_json(moe_dir.path / "catalogue.json")["oracle"]["dtype"], "float32");
  }
  EXPECT_FALSE(make_world_scenario("real_gpt_hybrid_moe_distributed_optimizer", 1, 2).ok());  // EP 1: no chain
  // A float64 scenario keeps the float64 encoding.
  auto fp64 = make_world_scenario("real_gpt_hybrid_optimizer", 2, 1);
  ASSERT_TRUE(fp64.ok());
  TempDir dir64;
  ASSERT_TRUE(write_world_scenario(*fp64, dir64.path, DescribedByReference{}).ok());
  EXPECT_EQ(read_json(dir64.path / "catalogue.json")["oracle"], (Json{{"key_shift", 24}, {"dtype", "float64"}}));
  EXPECT_TRUE(read_json(dir64.path / "catalogue.json")["aliases"].empty());
}

/// The reference's description with, on every rank, the object a DistributedOptimizer saves its common state in
/// outside the fully reshardable formats (one per DP group, Megatron's own value inside): key dp_group_idx_<g>, g
/// from `group_of(side's ranks, rank)`, its value naming the group.
RealModelEntries with_carried_object(std::function<std::int64_t(std::int64_t ranks, std::int64_t rank)> group_of) {
  return [group_of](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    IH_TRY_ASSIGN(entries, DescribedByReference{}(spec, rank));
    const std::int64_t group = group_of(world_size(spec.sizes), rank);
    entries.push_back({"optimizer.carried",
                       ShardedObject{"optimizer.distributed.dp_group_idx_" + std::to_string(group) + ".optimizer",
                                     CarriedValue{R"({"param_groups":[{"group":)" + std::to_string(group) + "}]}"},
                                     {1},
                                     {0},
                                     ReplicaId::tuple({0, 0, rank})}});
    return entries;
  };
}

// Megatron's own value in an object (the common state of a DistributedOptimizer saved per DP group): no oracle
// string replaces it on either side, and the load must give back what the save world's main replica of the
// retargeted key carried; a key no save rank saved is named, with nothing expected.
TEST(WorldPlan, AnObjectCarryingMegatronsOwnValueIsLeftInPlaceAndHeldToWhatTheSaveCarried) {
  auto s = make_world_scenario("real_gpt_hybrid_distributed_optimizer", 4, 2);
  ASSERT_TRUE(s.ok()) << s.error().message;
  TempDir dir;
  // Every save rank in group 0 (rank 0 its main replica); load rank r in group r: group 1 was never saved.
  const auto group_of = [](std::int64_t ranks, std::int64_t rank) { return ranks == 4 ? 0 : rank; };
  auto stats = write_world_scenario(*s, dir.path, with_carried_object(group_of));
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  for (int r = 0; r < 4; ++r) {
    const Json save = read_json(dir.path / ("save_rank_" + std::to_string(r) + ".json"));
    ASSERT_TRUE(save["objects"].contains("optimizer.carried")) << r;
    EXPECT_TRUE(save["objects"]["optimizer.carried"].is_null()) << r;
  }
  std::map<int, Json> carried;
  for (int r = 0; r < 2; ++r) {
    const Json load = read_json(dir.path / ("load_rank_" + std::to_string(r) + ".json"));
    ASSERT_TRUE(load["objects"].contains("optimizer.carried")) << r;
    EXPECT_TRUE(load["objects"]["optimizer.carried"].is_null()) << r;
    const Json oracle = read_json(dir.path / ("oracle_rank_" + std::to_string(r) + ".json"));
    for (const Json& o : oracle["objects"])
      if (o["path"] == "optimizer.carried") carried[r] = o;
  }
  ASSERT_EQ(carried.size(), 2u);
  EXPECT_EQ(carried[0]["carried"], true);
  EXPECT_EQ(carried[0]["expected"], (Json{{"param_groups", Json::array({Json{{"group", 0}}})}}));
  EXPECT_EQ(carried[1]["key"], "optimizer.distributed.dp_group_idx_1.optimizer/shard_0_1");
  EXPECT_FALSE(carried[1].contains("expected"));
}

TEST(OracleEncoding, Float32TakesTheFewestIndexBitsAndRefusesWhatItCannotHoldExactly) {
  auto e = oracle_encoding(OracleDtype::float32, 16384, 1023);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->key_shift, 14);
  EXPECT_EQ(oracle_encoding(OracleDtype::float32, 16385, 10)->key_shift, 15);
  const auto refused = oracle_encoding(OracleDtype::float32, 16384, 1024);  // 1025 << 14 > 2^24
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, seam_kind::unsupported);
  EXPECT_EQ(oracle_encoding(OracleDtype::float64, 16384, 1 << 20)->key_shift, kOracleKeyShift);
  EXPECT_FALSE(oracle_encoding(OracleDtype::float64, std::int64_t{1} << 25, 3).ok());
}

TEST(WorldPlan, RealGtpInProjIsFilledAndCheckedOnTheParametersShard) {
  // HybridModel M*-M*- at TP 1: the Mamba in_proj has D = 2 x 64 + 2 x 64 + 8 = 264 rows of 64 columns;
  // at p = 16 it pads to 320 over GTP 4 (R = 80) and to 288 over GTP 2 (R = 144).
  auto s = make_world_scenario("real_hybrid_hybrid_gtp", 4, 2);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(s->save.text(), "TP=1 PP=1 GTP=4 (4 ranks)");
  TempDir dir;
  ASSERT_TRUE(write_world_scenario(*s, dir.path, DescribedAsMegatronUnderGtp{}).ok());
  const std::string in_proj = "model.decoder.layers.0.mixer.in_proj.weight";
  const auto rows_of = [](const Json& segments) {
    std::int64_t rows = 0, next = 0;
    for (const Json& seg : segments) {
      EXPECT_EQ(seg[0], next) << segments.dump();  // contiguous from row 0: the pad rows are the tail
      next = seg[0].get<std::int64_t>() + seg[1].get<std::int64_t>();
      rows += seg[1].get<std::int64_t>();
    }
    return rows;
  };
  for (std::int64_t r = 0; r < 4; ++r) {  // save: the parameter's shard, its real rows 80, 80, 80, 24
    const Json plan = read_json(dir.path / ("save_rank_" + std::to_string(r) + ".json"));
    EXPECT_EQ(plan["gtp_params"][in_proj], Json::array({80, 64})) << r;
    EXPECT_EQ(rows_of(plan["fill"][in_proj]), r < 3 ? 80 : 24) << r;
    EXPECT_FALSE(plan["gtp_params"].contains("model.decoder.layers.0.mixer.conv1d_weight"));
  }
  for (std::int64_t r = 0; r < 2; ++r) {  // load: every row of the (144, 64) shard checked, 144 and 120 real
    const Json plan = read_json(dir.path / ("load_rank_" + std::to_string(r) + ".json"));
    EXPECT_EQ(plan["gtp_params"][in_proj], Json::array({144, 64})) << r;
    EXPECT_EQ(plan["prefill"][in_proj], "sentinel");
    const Json oracle = read_json(dir.path / ("oracle_rank_" + std::to_string(r) + ".json"));
    bool found = false;
    for (const Json& t : oracle["tensors"])
      if (t["path"] == in_proj) {
        found = true;
        EXPECT_EQ(t["local_shape"], Json::array({144, 64}));
        EXPECT_EQ(rows_of(t["segments"]), r == 0 ? 144 : 120) << r;
        EXPECT_EQ(t["segments"][0][4][0], r == 0 ? 0 : 144 - 128) << t["segments"].dump();  // B starts at row 128
      }
    EXPECT_TRUE(found) << r;
  }
  // The reference factory and the factory Megatron describes must agree, else Megatron's layout is not the spec's:
  // a verdict on Megatron naming the first piece where they part, not a harness error.
  const auto different = [](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    ModelDumpSpec other = spec;
    other.config.mamba_state = 4;  // B and C of 32 rows, not 64
    return DescribedAsMegatronUnderGtp{}(other, rank);
  };
  const auto refused = write_world_scenario(*s, dir.path, different);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, seam_kind::description_disagrees) << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "gathered pieces are not the reference's")) << refused.error().message;
  const std::string key = "decoder.layers.0.mixer.in_proj.weight";
  // z and x (64 rows each) agree; B is where they part: 32 rows described, 64 laid out.
  EXPECT_TRUE(contains(refused.error().message, "Megatron describes rows [128, 160) hold " + key + ".B from [0,0]"))
      << refused.error().message;
  EXPECT_TRUE(contains(refused.error().message, "the reference lays out rows [128, 192) hold " + key + ".B"))
      << refused.error().message;
  // Two same-shaped pieces traded in Megatron's description (x described where the reference lays out z).
  const auto traded = [](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    IH_TRY_ASSIGN(entries, DescribedAsMegatronUnderGtp{}(spec, rank));
    Json dumped = json::dump_entries_to_json(entries);
    const std::function<void(Json&)> trade = [&](Json& j) {
      if (j.is_object() && j.contains("key") && j["key"].is_string()) {
        const std::string name = j["key"].get<std::string>();
        if (name.ends_with(".in_proj.weight.z")) j["key"] = name.substr(0, name.size() - 1) + "x";
        if (name.ends_with(".in_proj.weight.x")) j["key"] = name.substr(0, name.size() - 1) + "z";
      }
      if (j.is_structured())
        for (Json& v : j) trade(v);
    };
    trade(dumped);
    return json::entries_from_json(dumped);
  };
  const auto swapped = write_world_scenario(*s, dir.path, traded);
  ASSERT_FALSE(swapped.ok());
  EXPECT_EQ(swapped.error().kind, seam_kind::description_disagrees) << swapped.error().message;
  EXPECT_TRUE(contains(swapped.error().message, "Megatron describes rows [0, 64) hold " + key +
                                                    ".x from [0,0], the reference lays out rows [0, 64) hold " + key +
                                                    ".z"))
      << swapped.error().message;
}

/// The reference's description (DescribedByReference) with each dumped entry edited by `edit(entry, path, rank)`:
/// how a changed Megatron might describe its model.
RealModelEntries described_edited(std::function<void(Json& entry, const std::string& path, std::int64_t rank)> edit) {
  return [edit](const ModelDumpSpec& spec, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    IH_TRY_ASSIGN(entries, DescribedByReference{}(spec, rank));
    Json dumped = json::dump_entries_to_json(entries);
    for (Json& item : dumped) edit(item["entry"], item["path"].get<std::string>(), rank);
    return json::entries_from_json(dumped);
  };
}

TEST(WorldPlan, SeveralMainReplicasAreMegatronsFailureInItsDescriptionAndAPlanBugInTheReferences) {
  const std::map<Chunk, std::vector<std::int64_t>> twice{{{"w", {0, 0}}, {0, 2}}, {{"v", {0}}, {1}}};
  const auto reference = expected_writers_json(twice);
  ASSERT_FALSE(reference.ok());
  EXPECT_EQ(reference.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(reference.error().message, "plan bug: 2 main replicas of w at [0,0] (save ranks 0, 2)"))
      << reference.error().message;
  const auto megatron = expected_writers_json(twice, nullptr, DescribedBy::megatron);
  ASSERT_FALSE(megatron.ok());
  EXPECT_EQ(megatron.error().kind, seam_kind::description_disagrees);
  EXPECT_TRUE(contains(megatron.error().message, "describes 2 main replicas of w at [0,0] (save ranks 0, 2)"))
      << megatron.error().message;
  const std::map<Chunk, std::vector<std::int64_t>> once{{{"w", {0, 0}}, {2}}};
  EXPECT_EQ(expected_writers_json(once, nullptr, DescribedBy::megatron)->dump(), R"([["w",[0,0],2]])");
}

TEST(WorldRun, AScenarioMegatronDescribesOtherwiseFailsAloneAndAPlanBugIsItsHarnessError) {
  // GPT at TP 2 x PP 2 with tied embeddings: the last stage's output layer holds the embedding as a replica
  // (replica id (1, 0, dp)). Described as main there too, the embedding's chunks have two writers.
  auto tied = make_world_scenario("real_gpt_hybrid_training_pp", 4, 2);
  auto other = make_world_scenario("real_gpt_hybrid_moe", 4, 2);
  ASSERT_TRUE(tied.ok() && other.ok());
  const RealModelEntries main_on_last_stage = described_edited([](Json& e, const std::string& path, std::int64_t) {
    if (path.ends_with("output_layer.weight") && e["key"] == "embedding.word_embeddings.weight") e["replica_id"][0] = 0;
  });
  TempDir dir;
  WorldRunOptions o;
  o.work = dir.path, o.real_entries = main_on_last_stage;
  const auto report = run_world_roundtrips({*tied}, o);  // planned nothing: no world starts
  ASSERT_TRUE(report.ok()) << report.error().message;
  ASSERT_EQ(report->scenarios.size(), 1u);
  const ScenarioOutcome& failed = report->scenarios[0];
  EXPECT_EQ(failed.name, "real_gpt_hybrid_training_pp");
  EXPECT_EQ(failed.outcome, Outcome::failed);
  EXPECT_EQ(report->exit_code(), kExitCheckFailed);
  ASSERT_EQ(failed.problems.size(), 1u);
  EXPECT_TRUE(contains(failed.problems[0], "Megatron's description disagrees with the reference"));
  EXPECT_TRUE(
      contains(failed.problems[0], "2 main replicas of embedding.word_embeddings.weight at [0,0] (save ranks 0, 2)"))
      << failed.problems[0];
  // Described as the reference lays it out, the same scenario plans (the edit is what failed it).
  EXPECT_TRUE(write_world_scenario(*tied, dir.path / "plain", DescribedByReference{}).ok());
  // A scenario the harness cannot plan (no description of its real models at all) is a harness error of its own.
  WorldRunOptions none;
  none.work = dir.path / "none";
  const auto broken = run_world_roundtrips({*other}, none);
  ASSERT_TRUE(broken.ok()) << broken.error().message;
  ASSERT_EQ(broken->scenarios.size(), 1u);
  EXPECT_EQ(broken->scenarios[0].outcome, Outcome::harness_error);
  EXPECT_EQ(broken->exit_code(), kExitHarnessError);
  EXPECT_TRUE(contains(broken->scenarios[0].problems.at(0), "planning failed: harness_error"))
      << broken->scenarios[0].problems.at(0);
}

TEST(WorldPlan, RealGtpPaddedLinearIsCheckedOnTheUnpaddedRows) {
  // HybridModel M*-M*- at TP 2 x GTP 2, p = 32: the qkv's 96 rows per TP rank pad to 128 (R = 64), so
  // Megatron describes it as a (64, 64) shard at composite offset (t G + g) x 64 of 256 rows,
  // allow_shape_mismatch (as `model dump --target megatron` does; the reference's model does not wrap it).
  auto s = make_world_scenario("real_hybrid_hybrid_gtp_tp2", 4, 2);  // saved at GTP 2, loaded at GTP 1
  ASSERT_TRUE(s.ok()) << s.error().message;
  // Attention and MLP only: the reference keeps the unwrapped in_proj a plain tensor (spec addendum I).
  s->real_save.pattern = s->real_load.pattern = s->pattern = "*-*-";
  const auto padded_qkv = described_under_gtp_edited([](Json& e, const RankLayout& l) {
    if (e["kind"] != "tensor" || !e["key"].get<std::string>().ends_with("linear_qkv.weight")) return;
    e["local_shape"][0] = 64;
    e["global_shape"][0] = 64 * l.tp * l.gtp;
    e["global_offset"][0] = 64 * (l.tp_rank * l.gtp + l.gtp_rank);
    e["axis_fragmentations"][0] = l.tp * l.gtp;
    e["allow_shape_mismatch"] = true;
  });
  TempDir dir;
  auto stats = write_world_scenario(*s, dir.path, padded_qkv);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->uncovered_elements, 0);
  const std::string qkv = "model.decoder.layers.0.self_attention.linear_qkv.weight";
  // Save rank t + 2 g fills real rows 64, 64, 32, 32 of the (64, 64) shard from unpadded rows t x 96 + g x 64;
  // the 32 pad rows of g = 1 stay 0 (no segment).
  const std::int64_t want_rows[] = {64, 64, 32, 32}, want_offset[] = {0, 96, 64, 160};
  for (std::int64_t r = 0; r < 4; ++r) {
    const Json segs = read_json(dir.path / ("save_rank_" + std::to_string(r) + ".json"))["fill"][qkv];
    ASSERT_EQ(segs.size(), 1u) << segs.dump();
    EXPECT_EQ(segs[0][0], 0) << r;
    EXPECT_EQ(segs[0][1], want_rows[r]) << r;
    EXPECT_EQ(segs[0][3], Json::array({192, 64})) << r;  // the unpadded tensor, as the load (GTP 1) asks for it
    EXPECT_EQ(segs[0][4][0], want_offset[r]) << r;
  }
  for (std::int64_t r = 0; r < 2; ++r) {  // load at GTP 1: TP rank r's 96 rows, whole
    const Json oracle = read_json(dir.path / ("oracle_rank_" + std::to_string(r) + ".json"));
    for (const Json& t : oracle["tensors"]) {
      if (t["path"] != qkv) continue;
      EXPECT_EQ(t["segments"][0][4][0], 96 * r) << t["segments"].dump();
    }
  }
}

TEST(WorldPlan, RealGtpPaddedLinearKeepsItsRowsThroughTheRetarget) {
  // GPTModel at GTP 2 -> HybridModel *-*- at GTP 4, p = 32: the attention's linear_proj (64 rows) pads to 128
  // under GTP 4 (R = 32: GTP ranks 0 and 1 hold 32 real rows, 2 and 3 only padding), so Megatron describes
  // the hybrid's entry as a (32, 64) shard at 32 g of 128 rows, allow_shape_mismatch, keyed by hybrid layer.
  auto s = make_world_scenario("real_gpt_hybrid_gtp_p32", 2, 4);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const auto padded_proj = described_under_gtp_edited([](Json& e, const RankLayout& l) {
    if (l.gtp != 4 || e["kind"] != "tensor" || !e["key"].get<std::string>().ends_with("linear_proj.weight")) return;
    e["local_shape"][0] = 32;
    e["global_shape"][0] = 128;
    e["global_offset"][0] = 32 * l.gtp_rank;
    e["axis_fragmentations"][0] = 4;
    e["allow_shape_mismatch"] = true;
  });
  TempDir dir;
  auto stats = write_world_scenario(*s, dir.path, padded_proj);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->uncovered_elements, 0);
  // Hybrid layer 2 (attention) is GPT layer 1: GTP rank g reads rows [32 g, 32 g + 32) of the GPT's unpadded 64 under
  // the retargeted key and layer axis; ranks 2 and 3 read nothing (all padding, zero).
  for (std::int64_t g = 0; g < 4; ++g) {
    const Json oracle = read_json(dir.path / ("oracle_rank_" + std::to_string(g) + ".json"));
    bool found = false;
    for (const Json& t : oracle["tensors"]) {
      if (t["path"] != "model.decoder.layers.2.self_attention.linear_proj.weight") continue;
      found = true;
      if (g >= 2) {
        EXPECT_TRUE(t["segments"].empty()) << g << ": " << t["segments"].dump();
        continue;
      }
      ASSERT_EQ(t["segments"].size(), 1u) << t["segments"].dump();
      const Json& seg = t["segments"][0];
      EXPECT_EQ(seg[1], 32) << g;
      EXPECT_EQ(seg[3], Json::array({2, 64, 64})) << g;  // the GPT's key: layer axis, unpadded rows
      EXPECT_EQ(seg[4], Json::array({1, 32 * g, 0})) << g;
      EXPECT_EQ(seg[5], 1) << g;
    }
    EXPECT_TRUE(found) << g;
  }
}

TEST(WorldPlan, RealGtpSwigluFc1IsFilledFromTheReferenceNotFromMegatronsPieces) {
  // GPTModel at TP 1 x GTP 2, SwiGLU: fc1's TP-local [W; V] has 2 x 128 rows, each GTP rank's parameter
  // 128 of them (R = 128 at p = 16). Megatron's factory cuts W and V out of that shard (finding S): pieces
  // of 64 rows at fragmentation 4, GTP rank g's at rows 64 g (W) and 128 + 64 g (V), each rank's main.
  auto s = make_world_scenario("real_gpt_hybrid_gtp_swiglu", 2, 1);
  ASSERT_TRUE(s.ok()) << s.error().message;
  const std::string fc1_key = "decoder.layers.mlp.linear_fc1.weight";
  const auto megatron_pieces = described_under_gtp_edited([&](Json& e, const RankLayout& l) {
    if (e["kind"] != "factory" || e["key"] != fc1_key) return;
    for (std::int64_t piece = 0; piece < 2; ++piece) {
      Json& t = e["built"][static_cast<std::size_t>(piece)]["entry"];
      t["local_shape"][0] = 64;
      t["global_offset"][1] = 64 * (l.gtp_rank + piece * l.gtp);
      t["axis_fragmentations"][1] = 2 * l.gtp;
      t["replica_id"] = Json::array({0, 0, l.dp_rank});  // every GTP rank's pieces are its own
    }
  });
  TempDir dir;
  auto stats = write_world_scenario(*s, dir.path, megatron_pieces);
  ASSERT_TRUE(stats.ok()) << stats.error().message;
  EXPECT_EQ(stats->uncovered_elements, 0);
  const std::string fc1 = "model.decoder.layers.0.mlp.linear_fc1.weight";
  for (std::int64_t g = 0; g < 2; ++g) {
    const Json save = read_json(dir.path / ("save_rank_" + std::to_string(g) + ".json"));
    // The shard is rows [128 g, 128 g + 128) of [W; V]: W whole on GTP rank 0, V whole on GTP rank 1.
    const Json segs = save["fill"][fc1];
    ASSERT_EQ(segs.size(), 1u) << segs.dump();
    EXPECT_EQ(segs[0][0], 0);
    EXPECT_EQ(segs[0][1], 128);
    EXPECT_EQ(segs[0][4], Json::array({0, 128 * g, 0})) << segs.dump();
    EXPECT_EQ(save["reference_rows"], Json::array({fc1, "model.decoder.layers.1.mlp.linear_fc1.weight"}))
        << g;  // the worker skips its pieces check
  }
  // What Megatron writes is still its own pieces: the expected writers are the described chunks.
  std::set<std::int64_t> written_rows;
  const Json catalogue = read_json(dir.path / "catalogue.json");
  for (const Json& w : catalogue["writers"])
    if (w[0].get<std::string>() == fc1_key && w[1][0].get<std::int64_t>() == 0)
      written_rows.insert(w[1][1].get<std::int64_t>());
  EXPECT_EQ(written_rows, (std::set<std::int64_t>{0, 64, 128, 192}));
  // The load at GTP 1 is Megatron's own layout (not wrapped): nothing taken from the reference.
  EXPECT_EQ(read_json(dir.path / "load_rank_0.json")["reference_rows"], Json::array());
}

TEST(WorldPlan, ARealScenarioTheTargetCannotDescribeEndsAloneWithItsOwnOutcome) {
  // The target answers for three of four scenarios' models; for the others it raises, lacks the
  // configuration or breaks: only that scenario ends, as Megatron's finding, not run, or no verdict.
  std::vector<WorldScenario> scenarios;
  for (const char* name :
       {"real_gpt_hybrid_tp", "real_hybrid_hybrid_gdp_tp", "real_gpt_hybrid_moe", "real_hybrid_hybrid_gtp"}) {
    auto s = make_world_scenario(name, 2, 1);
    ASSERT_TRUE(s.ok()) << name;
    scenarios.push_back(std::move(*s));
  }
  const DescribedByReference reference;
  auto split = buildable_real_scenarios(
      std::move(scenarios), [&](const ModelDumpSpec& m, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
        if (m.config.ssm_mixer == mixer_word(GtpMixer::gdp))
          return make_error(seam_kind::unsupported, "no GatedDeltaProductMixer here");
        if (m.config.num_experts > 0 && rank == 1)
          return make_error(ErrorKind::invalid_argument, "[megatron_error] SequentialMLP raised AssertionError");
        if (m.sizes.gtp > 1) return make_error(seam_kind::harness_error, "world worker pipe broken");
        return reference(m, rank);
      });
  ASSERT_EQ(split.runnable.size(), 1u);
  EXPECT_EQ(split.runnable[0].name, "real_gpt_hybrid_tp");
  ASSERT_EQ(split.not_run.size(), 1u);
  EXPECT_EQ(split.not_run[0].first, "real_hybrid_hybrid_gdp_tp");
  ASSERT_EQ(split.undescribed.size(), 2u);
  EXPECT_EQ(split.undescribed[0].name, "real_gpt_hybrid_moe");
  EXPECT_EQ(split.undescribed[0].outcome, Outcome::failed);  // Megatron raised on its own model
  ASSERT_EQ(split.undescribed[0].problems.size(), 1u);
  EXPECT_NE(split.undescribed[0].problems[0].find("save rank 1's real model"), std::string::npos)
      << split.undescribed[0].problems[0];
  EXPECT_EQ(split.undescribed[1].name, "real_hybrid_hybrid_gtp");
  EXPECT_EQ(split.undescribed[1].outcome, Outcome::harness_error);
}

/// A training scenario's worlds at 4 -> 2 (a GPT run's checkpoint into a hybrid run with a layout change of its
/// kind): save TP, PP, GTP, EP, load TP, PP, GTP, and whether it keeps an optimizer.
struct TrainingLayout {
  std::int64_t save_tp, save_pp, save_gtp, save_ep, load_tp, load_pp, load_gtp;
  bool optimizer;
};

TEST(WorldPlan, OnlyTheTrainingScenariosLoadThroughMegatronsTrainingEntryPoints) {
  const std::map<std::string, TrainingLayout> training = {
      {"real_gpt_hybrid_training", {4, 1, 1, 1, 2, 1, 1, false}},
      {"real_gpt_hybrid_training_optimizer", {4, 1, 1, 1, 2, 1, 1, true}},
      {"real_gpt_hybrid_training_moe", {1, 1, 1, 4, 2, 1, 1, false}},
      {"real_gpt_hybrid_training_pp", {2, 2, 1, 1, 1, 2, 1, false}},
      {"real_gpt_hybrid_training_gtp", {1, 1, 4, 1, 1, 1, 2, false}}};
  const std::set<std::string> fully_parallel = {"real_hybrid_hybrid_dp_parallel"};
  std::set<std::string> seen;
  for (const std::string& name : real_world_scenario_names()) {
    auto s = make_world_scenario(name, 4, 2);
    ASSERT_TRUE(s.ok()) << name << ": " << s.error().message;
    auto plan = world_plan_json({&*s}, Device::cpu);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    const auto expected = training.find(name);
    const bool is_training = expected != training.end();
    // The one scenario of Megatron's fully parallel strategies saves and loads through dist_checkpointing too.
    const LoadPath path = is_training                     ? LoadPath::training
                          : fully_parallel.contains(name) ? LoadPath::fully_parallel
                                                          : LoadPath::dist_checkpointing;
    EXPECT_EQ(s->load_path, path) << name;
    EXPECT_EQ((*plan)["scenarios"][0]["load_path"], std::string(to_string(path))) << name;
    if (!is_training) continue;
    seen.insert(name);
    const TrainingLayout& t = expected->second;
    EXPECT_EQ(s->kind, ScenarioKind::real_gpt_hybrid);
    EXPECT_EQ(s->real_save.model, ModelKind::gpt);
    EXPECT_EQ(s->real_load.model, ModelKind::hybrid);
    EXPECT_EQ(s->save.tp, t.save_tp) << name;
    EXPECT_EQ(s->save.pp, t.save_pp) << name;
    EXPECT_EQ(s->save.gtp, t.save_gtp) << name;
    EXPECT_EQ(s->real_save.sizes.ep, t.save_ep) << name;
    EXPECT_EQ(s->load.tp, t.load_tp) << name;
    EXPECT_EQ(s->load.pp, t.load_pp) << name;
    EXPECT_EQ(s->load.gtp, t.load_gtp) << name;
    EXPECT_EQ(s->real_save.optimizer, t.optimizer) << name;
  }
  EXPECT_EQ(seen.size(), training.size());  // every training scenario is in `--real --all`
  EXPECT_EQ(to_string(LoadPath::training), "training");
  EXPECT_EQ(to_string(LoadPath::dist_checkpointing), "dist_checkpointing");
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
  refused(make_world_scenario("real_gpt_hybrid_pp", 1, 2), seam_kind::unsupported, "both worlds need PP=2");
  refused(make_world_scenario("real_no_such", 2, 2), ErrorKind::invalid_argument, "unknown scenario 'real_no_such'");
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
