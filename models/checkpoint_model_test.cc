// Pins spec 3.6/3.8: save/load preprocessing, load plans on boxes, cross-GTP loads, and the
// baseline to_state_dict ordering failure on an all-padding GTP rank versus the fixed order.
#include "models/checkpoint_model.h"

#include <gtest/gtest.h>

#include "models/gtp_layout.h"
#include "models/split_factory.h"

namespace ih {
namespace {

// D = 16 rows (layout {2,1,1,3}), G = 4, p = 3: A = 12, pad = 8, R = 6; g = 2 holds 4 real rows,
// g = 3 is all padding.
constexpr std::int64_t kCols = 2;
const char* const kKey = "mixer.in_proj.weight";

GtpFactoryParams params(std::int64_t gtp_size, std::int64_t g, std::uint64_t storage) {
  GtpFactoryParams p;
  p.key = kKey;
  p.layout = gdp_in_proj_layout({2, 1, 1, 3}).value();
  p.gtp_size = gtp_size, p.gtp_rank = g, p.pad_alignment = 3, p.cols = kCols;
  const std::int64_t R = gtp_padding_of(p).value().shard_rows;
  p.shard = TensorValue::of_storage(storage, {R, kCols}, "bfloat16");
  return p;
}

StateNode rank_tree(GtpSaveDesign design, std::int64_t gtp_size, std::int64_t g, std::uint64_t storage) {
  GtpFactoryParams p = params(gtp_size, g, storage);
  if (design == GtpSaveDesign::gather) p.replica_id = ReplicaId::tuple({0, 0, g});
  const ShardedTensor a_log = ShardedTensor::from_rank_offsets("mixer.A_log", {4}, {}, ReplicaId::tuple({0, g, 0}), 0,
                                                               TensorValue::of_storage(50 + storage, {4}))
                                  .value();
  StateDict mixer{{"in_proj.weight", StateNode(make_gtp_factory(design, p).value())}, {"A_log", StateNode(a_log)}};
  return StateNode(StateDict{{"iteration", StateNode(PlainValue{"7"})}, {"mixer", StateNode(std::move(mixer))}});
}

Checkpoint save_g4(GtpSaveDesign design) {
  std::vector<StateNode> trees;
  for (std::int64_t g = 0; g < 4; ++g) trees.push_back(rank_tree(design, 4, g, 10 + g));
  return save_checkpoint(trees).value();
}

const TensorValue& in_proj_of(const StateNode& loaded) {
  return std::get<TensorValue>(loaded.find(std::string("mixer"))->find(std::string("in_proj.weight"))->leaf());
}

TEST(CheckpointModel, SavePreprocessDropsTheAllPaddingLnpAndLeaksNothingIntoCommon) {
  const SavePreprocessed pre = save_preprocess(rank_tree(GtpSaveDesign::shard_split, 4, 3, 13)).value();
  EXPECT_EQ(pre.common, StateNode(StateDict{{"iteration", StateNode(PlainValue{"7"})}}));
  const StateNode& mixer = *pre.sharded.find(std::string("mixer"));
  EXPECT_EQ(mixer.find(std::string("in_proj.weight")), nullptr);
  EXPECT_NE(mixer.find(std::string("A_log")), nullptr);
}

TEST(CheckpointModel, BaselineToStateDictFailsOnTheAllPaddingRank) {
  const Checkpoint saved = save_g4(GtpSaveDesign::shard_split);
  const StateNode request = rank_tree(GtpSaveDesign::shard_split, 4, 3, 23);
  const auto baseline = load_checkpoint(saved, request, LoadOrder::to_state_dict_baseline);
  ASSERT_FALSE(baseline.ok());
  EXPECT_EQ(baseline.error().kind, ErrorKind::merge_key_mismatch);
  EXPECT_NE(baseline.error().message.find("Different dict keys encountered in `apply_factory_merges`"),
            std::string::npos);
  for (LoadOrder order : {LoadOrder::to_state_dict_fixed, LoadOrder::serialization_load}) {
    const StateNode loaded = load_checkpoint(saved, request, order).value();
    EXPECT_EQ(in_proj_of(loaded), TensorValue::zeros({6, kCols}, "bfloat16")) << to_string(order);
    const auto& a_log = std::get<TensorValue>(loaded.find(std::string("mixer"))->find(std::string("A_log"))->leaf());
    EXPECT_EQ(a_log.blocks, (std::vector<RowBlock>{{60, 0, 4}}));  // rank 0's main replica
    EXPECT_EQ(*loaded.find(std::string("iteration")), StateNode(PlainValue{"7"}));
  }
}

TEST(CheckpointModel, AllOrdersAgreeOnAPartialRank) {
  const Checkpoint saved = save_g4(GtpSaveDesign::shard_split);
  const StateNode request = rank_tree(GtpSaveDesign::shard_split, 4, 2, 22);
  const std::vector<RowBlock> expected{{12, 0, 4}, {0, 0, 2}};  // 4 real rows of rank 2, 2 zero rows
  for (LoadOrder order :
       {LoadOrder::to_state_dict_baseline, LoadOrder::to_state_dict_fixed, LoadOrder::serialization_load})
    EXPECT_EQ(in_proj_of(load_checkpoint(saved, request, order).value()).blocks, expected) << to_string(order);
}

TEST(CheckpointModel, CrossGtpLoadToNonGtpAndToG2) {
  const Checkpoint saved = save_g4(GtpSaveDesign::shard_split);
  const ShardedTensor orig = tp_row_sharded(kKey, 16, kCols, 1, 0).value();
  const StateNode plain(StateDict{
      {"mixer",
       StateNode(StateDict{{"in_proj.weight", StateNode(make_split_factory(orig, params(4, 0, 1).layout).value())}})}});
  EXPECT_EQ(in_proj_of(load_checkpoint(saved, plain, LoadOrder::serialization_load).value()).blocks,
            (std::vector<RowBlock>{{10, 0, 6}, {11, 0, 6}, {12, 0, 4}}));
  // G = 2, p = 3: A = 6, pad = 2, R = 9; g = 1 holds TP-local rows 9..15 then 2 zero rows.
  const StateNode g1 = rank_tree(GtpSaveDesign::shard_split, 2, 1, 31);
  EXPECT_EQ(in_proj_of(load_checkpoint(saved, g1, LoadOrder::serialization_load).value()).blocks,
            (std::vector<RowBlock>{{11, 3, 3}, {12, 0, 4}, {0, 0, 2}}));
}

TEST(CheckpointModel, GatherCheckpointsLoadUnchangedIntoTheShardSplit) {
  const Checkpoint saved = save_g4(GtpSaveDesign::gather);
  // Only GTP peer 0 is a main replica; its gather buffer (derived storage id) holds D rows.
  const std::uint64_t buffer =
      saved.index.find(std::string(kKey) + ".z", {2, kCols})->front().data->blocks.front().storage;
  const StateNode request = rank_tree(GtpSaveDesign::shard_split, 4, 2, 22);
  EXPECT_EQ(in_proj_of(load_checkpoint(saved, request, LoadOrder::serialization_load).value()).blocks,
            (std::vector<RowBlock>{{buffer, 12, 4}, {0, 0, 2}}));
}

ChunkIndex rows_index() {
  ChunkIndex index;
  auto& chunks = index.chunks[{"k", Shape{20, kCols}}];
  for (auto [lo, hi] : std::vector<std::pair<std::int64_t, std::int64_t>>{{0, 2}, {2, 10}, {10, 12}})
    chunks.push_back({0, Box{{lo, 0}, {hi, kCols}}, 0, "float32", TensorValue::of_storage(lo + 1, {hi - lo, kCols})});
  return index;
}

ShardedTensor request_rows(std::int64_t lo, std::int64_t hi, std::int64_t global = 20) {
  ShardedTensor t;
  t.key = "k", t.local_shape = {hi - lo, kCols}, t.global_shape = {global, kCols}, t.global_offset = {lo, 0};
  return t;
}

TEST(LoadPlan, ReadsExactSubBoxes) {
  const LoadPlan plan = resolve_load_plan(rows_index(), request_rows(1, 5)).value();
  ASSERT_EQ(plan.reads.size(), 2u);
  EXPECT_EQ(plan.reads[0].chunk, 0u);
  EXPECT_EQ(plan.reads[0].source, (Box{{1, 0}, {2, kCols}}));
  EXPECT_EQ(plan.reads[0].target, (Box{{0, 0}, {1, kCols}}));
  EXPECT_EQ(plan.reads[1].chunk, 1u);
  EXPECT_EQ(plan.reads[1].source, (Box{{0, 0}, {3, kCols}}));
  EXPECT_EQ(plan.reads[1].target, (Box{{1, 0}, {4, kCols}}));
  EXPECT_EQ(read_value(rows_index(), request_rows(1, 5)).value().blocks, (std::vector<RowBlock>{{1, 1, 1}, {3, 0, 3}}));
}

TEST(LoadPlan, UncoveredRequestsAreNamedErrors) {
  const auto hole = resolve_load_plan(rows_index(), request_rows(8, 14));
  ASSERT_FALSE(hole.ok());
  EXPECT_EQ(hole.error().kind, ErrorKind::load_not_covered);
  EXPECT_NE(hole.error().message.find("key k: requested offset (8, 0) shape (6, 2)"), std::string::npos);
  EXPECT_NE(hole.error().message.find("first uncovered offset (12, 0) shape (2, 2)"), std::string::npos);
  const auto shape = resolve_load_plan(rows_index(), request_rows(0, 2, 21));
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.error().message.find("stored shapes: (20, 2)"), std::string::npos) << shape.error().message;
}

}  // namespace
}  // namespace ih
