// Pins the shard-split and gather factories on spec 4.9 (example B) and 4.8 (all-padding rank).
#include <gtest/gtest.h>

#include <set>

#include "models/gtp_layout.h"
#include "models/split_factory.h"

namespace ih {
namespace {

constexpr std::int64_t kCols = 2;

std::uint64_t shard_storage(std::int64_t t, std::int64_t g) { return 100 + 2 * t + g; }

GtpFactoryParams example_b(std::int64_t t, std::int64_t g) {
  GtpFactoryParams p;
  p.key = "w";
  p.layout = gdp_in_proj_layout({10, 3, 2, 3}).value();
  p.tp_size = 2, p.tp_rank = t, p.gtp_size = 2, p.gtp_rank = g, p.pad_alignment = 16, p.cols = kCols;
  p.shard = TensorValue::of_storage(shard_storage(t, g), {32, kCols}, "bfloat16");
  return p;
}

// (key suffix, rows, global row offset, global rows, first shard row) from the spec 4.9 table.
struct Expected {
  std::string name;
  std::int64_t rows, offset, global_rows, shard_row;
};

std::vector<Expected> table(std::int64_t t, std::int64_t g) {
  if (g == 0)
    return {
        {"z", 10, 10 * t, 20, 0}, {"V0", 10, 10 * t, 20, 10}, {"V1", 10, 10 * t, 20, 20}, {"V2", 2, 10 * t, 20, 30}};
  return {{"V2", 8, 2 + 10 * t, 20, 0}, {"K0", 3, 3 * t, 6, 8},  {"K1", 3, 3 * t, 6, 11},
          {"K2", 3, 3 * t, 6, 14},      {"Q", 3, 3 * t, 6, 17},  {"b0", 2, 2 * t, 4, 20},
          {"b1", 2, 2 * t, 4, 22},      {"b2", 2, 2 * t, 4, 24}, {"a", 2, 2 * t, 4, 26}};
}

TEST(GtpShardSplit, ExampleBTableEveryPiece) {
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t g = 0; g < 2; ++g) {
      const StateNode built = make_gtp_factory(GtpSaveDesign::shard_split, example_b(t, g)).value().build().value();
      const auto expected = table(t, g);
      ASSERT_EQ(built.list().size(), expected.size()) << t << "," << g;
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const auto& piece = std::get<ShardedTensor>(built.list()[i].leaf());
        const Expected& e = expected[i];
        EXPECT_EQ(piece.key, "w." + e.name);
        EXPECT_EQ(piece.local_shape, (Shape{e.rows, kCols}));
        EXPECT_EQ(piece.global_shape, (Shape{e.global_rows, kCols}));
        EXPECT_EQ(piece.global_offset, (Shape{e.offset, 0})) << "(" << t << "," << g << ") " << e.name;
        EXPECT_FALSE(piece.axis_fragmentations.has_value());
        EXPECT_FALSE(piece.allow_shape_mismatch);
        EXPECT_EQ(piece.replica_id, ReplicaId::tuple({0, 0, 0}));
        // A view of the shard's own storage, no copy.
        EXPECT_EQ(piece.data->blocks, (std::vector<RowBlock>{{shard_storage(t, g), e.shard_row, e.rows}}));
      }
    }
}

TEST(GtpShardSplit, ExampleBMergeRestoresTheShardWithFourZeroTailRows) {
  const auto factory = make_gtp_factory(GtpSaveDesign::shard_split, example_b(1, 1)).value();
  const StateNode built = factory.build().value();
  StateList loaded;
  for (const StateNode& piece : built.list()) loaded.emplace_back(*std::get<ShardedTensor>(piece.leaf()).data);
  const TensorValue merged = factory.without_data().merge(StateNode(loaded)).value();  // merge never reads data
  EXPECT_EQ(merged.shape, (Shape{32, kCols}));
  EXPECT_EQ(merged.dtype, "bfloat16");
  EXPECT_EQ(merged.blocks, (std::vector<RowBlock>{{shard_storage(1, 1), 0, 28}, {0, 0, 4}}));
}

TEST(GtpShardSplit, KeysAndShapesEqualTheNonGtpFactory) {
  for (std::int64_t t = 0; t < 2; ++t) {
    std::set<std::pair<std::string, Shape>> gtp, plain;
    for (std::int64_t g = 0; g < 2; ++g) {
      const StateNode built = make_gtp_factory(GtpSaveDesign::shard_split, example_b(t, g)).value().build().value();
      for (const StateNode& n : built.list()) {
        const auto& piece = std::get<ShardedTensor>(n.leaf());
        gtp.insert({piece.key, piece.global_shape});
      }
    }
    const ShardedTensor orig = tp_row_sharded("w", 60, kCols, 2, t).value();
    const auto chunks = split_chunks(orig, example_b(t, 0).layout).value();
    for (const ShardedTensor& chunk : chunks) plain.insert({chunk.key, chunk.global_shape});
    EXPECT_EQ(gtp, plain);
  }
}

GtpFactoryParams example_a_rank63() {
  GtpFactoryParams p;
  p.key = "decoder.layers.0.mixer.in_proj.weight";
  p.layout = gdp_in_proj_layout({10'240, 5'120, 80, 3}).value();
  p.gtp_size = 64, p.gtp_rank = 63, p.pad_alignment = 32, p.cols = kCols;
  p.shard = TensorValue::of_storage(7, {992, kCols}, "bfloat16");
  return p;
}

TEST(GtpShardSplit, AllPaddingRankBuildsOneLnpWithAZeroElementView) {
  const auto factory = make_gtp_factory(GtpSaveDesign::shard_split, example_a_rank63()).value();
  const StateNode built = factory.build().value();
  const auto* lnp = built.leaf_if<LocalNonpersistent>();
  ASSERT_NE(lnp, nullptr);
  const auto& empty = std::get<TensorValue>(lnp->payload);
  EXPECT_EQ(empty.shape, (Shape{0, kCols}));
  EXPECT_EQ(empty.dtype, "bfloat16");
  // Merge of the unwrapped LNP: zeros (992, 2), the review's two-column case.
  const TensorValue merged = factory.without_data().merge(StateNode(empty)).value();
  EXPECT_EQ(merged, TensorValue::zeros({992, kCols}, "bfloat16"));
  // The one-element-list variant of the ambiguity is accepted too.
  EXPECT_EQ(factory.merge(StateNode(StateList{StateNode(empty)})).value(), merged);
  // An empty list is not (the key would have been lost).
  EXPECT_FALSE(factory.merge(StateNode(StateList{})).ok());
}

TEST(GtpShardSplit, MergeRejectsTheWrongRowCount) {
  const auto factory = make_gtp_factory(GtpSaveDesign::shard_split, example_b(0, 1)).value();
  const auto r = factory.merge(StateNode(StateList{StateNode(TensorValue::of_storage(1, {27, kCols}, "bfloat16"))}));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("expected r = 28"), std::string::npos) << r.error().message;
}

TEST(GtpGather, BuildIsTheNonGtpSplitOfTheGatheredBuffer) {
  GtpFactoryParams p = example_b(1, 1);
  p.replica_id = ReplicaId::tuple({0, 0, 1});  // GTP-inclusive dp_cp rank: not the main replica
  p.gather_storage = 55;
  const StateNode built = make_gtp_factory(GtpSaveDesign::gather, p).value().build().value();
  const ShardedTensor orig =
      tp_row_sharded("w", 60, kCols, 2, 1, p.replica_id, TensorValue::of_storage(55, {60, kCols}, "bfloat16")).value();
  const auto chunks = split_chunks(orig, p.layout).value();
  ASSERT_EQ(built.list().size(), chunks.size());
  for (std::size_t i = 0; i < chunks.size(); ++i) EXPECT_EQ(std::get<ShardedTensor>(built.list()[i].leaf()), chunks[i]);
  EXPECT_FALSE(std::get<ShardedTensor>(built.list()[0].leaf()).is_main_replica());
}

TEST(GtpGather, MergeConcatenatesPadsAndSlicesRankRows) {
  const auto factory = make_gtp_factory(GtpSaveDesign::gather, example_b(0, 1)).value().without_data();
  StateList loaded;
  const SplitLayout layout = gdp_in_proj_layout({10, 3, 2, 3}).value();
  for (std::int64_t s : layout.sections)
    loaded.emplace_back(TensorValue::of_storage(9, {s, kCols}, "bfloat16"));  // stand-in chunks
  const TensorValue merged = factory.merge(StateNode(loaded)).value();
  EXPECT_EQ(merged.shape, (Shape{32, kCols}));
  std::int64_t zero_rows = 0;
  for (const RowBlock& b : merged.blocks) zero_rows += b.is_zero() ? b.rows : 0;
  EXPECT_EQ(zero_rows, 4);  // rows 60..63 of the padded (64, C) tensor
}

}  // namespace
}  // namespace ih
