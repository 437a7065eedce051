// Pins spec 4.3: chunk metadata, the construction error, and the TP2 -> TP1 semantic order.
#include "models/split_factory.h"

#include <gtest/gtest.h>

#include "models/checkpoint_model.h"

namespace ih {
namespace {

const SplitLayout& tp2_layout() {
  static const SplitLayout layout = gdp_in_proj_layout({2, 1, 1, 3}).value();
  return layout;
}

ShardedTensorFactory rank_factory(std::int64_t t) {
  const ShardedTensor orig = tp_row_sharded("w", 16, 1, 2, t, {}, TensorValue::of_storage(t + 1, {16, 1})).value();
  return make_split_factory(orig, tp2_layout()).value();
}

TEST(SplitFactory, ChunkMetadataOfRankOne) {
  const StateNode built = rank_factory(1).build().value();
  ASSERT_EQ(built.list().size(), 12u);
  const auto& v0 = std::get<ShardedTensor>(built.list()[1].leaf());
  EXPECT_EQ(v0.key, "w.V0");
  EXPECT_EQ(v0.local_shape, (Shape{2, 1}));
  EXPECT_EQ(v0.global_shape, (Shape{4, 1}));   // T * s_j
  EXPECT_EQ(v0.global_offset, (Shape{2, 0}));  // t * s_j
  EXPECT_EQ(v0.axis_fragmentations, (Shape{2, 1}));
  EXPECT_EQ(v0.data->blocks, (std::vector<RowBlock>{{2, 2, 2}}));  // a view of rank 1's rows 2-3
  const auto& a = std::get<ShardedTensor>(built.list()[11].leaf());
  EXPECT_EQ(a.key, "w.a");
  EXPECT_EQ(a.global_offset, (Shape{1, 0}));
}

TEST(SplitFactory, SectionsMustCoverTheRows) {
  const ShardedTensor orig = tp_row_sharded("w", 17, 1, 2, 0).value();
  const auto r = make_split_factory(orig, tp2_layout());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::split_sections_mismatch);
  EXPECT_NE(r.error().message.find("Split sections must cover the whole dimension size"), std::string::npos);
  EXPECT_NE(r.error().message.find("dimensions size 17"), std::string::npos);
}

TEST(SplitFactory, BadTpArguments) {
  EXPECT_EQ(tp_row_sharded("w", 16, 1, 2, 2).error().kind, ErrorKind::invalid_layout_parameter);
  EXPECT_NE(tp_row_sharded("w", 16, 0, 2, 0).error().message.find("cols of w"), std::string::npos);
}

TEST(SplitFactory, MergeConcatenatesRows) {
  const auto factory = rank_factory(0).without_data();
  const TensorValue merged = factory
                                 .merge(StateNode(StateList{StateNode(TensorValue::of_storage(5, {3, 1})),
                                                            StateNode(TensorValue::of_storage(5, {1, 1}))}))
                                 .value();
  EXPECT_EQ(merged.shape, (Shape{4, 1}));
  EXPECT_FALSE(factory.merge(StateNode(StateList{StateNode(PlainValue{"x"})})).ok());
}

// Row values of spec 4.3's example, per saving TP rank (storage 1 = rank 0, storage 2 = rank 1).
std::int64_t value_of(std::uint64_t storage, std::int64_t row) {
  static const std::vector<std::int64_t> rank0{0, 1, 10, 11, 20, 21, 30, 31, 40, 50, 60, 70, 80, 90, 100, 110};
  static const std::vector<std::int64_t> rank1{2, 3, 12, 13, 22, 23, 32, 33, 41, 51, 61, 71, 81, 91, 101, 111};
  return (storage == 1 ? rank0 : rank1)[row];
}

TEST(SplitFactory, Tp2ToTp1KeepsSemanticOrder) {
  const Checkpoint saved = save_checkpoint({StateNode(StateDict{{"w", StateNode(rank_factory(0))}}),
                                            StateNode(StateDict{{"w", StateNode(rank_factory(1))}})})
                               .value();
  const SplitLayout tp1 = gdp_in_proj_layout({4, 2, 2, 3}).value();
  const ShardedTensor orig = tp_row_sharded("w", 32, 1, 1, 0).value();
  const StateNode request(StateDict{{"w", StateNode(make_split_factory(orig, tp1).value())}});
  const StateNode loaded = load_checkpoint(saved, request, LoadOrder::serialization_load).value();
  const auto& merged = std::get<TensorValue>(loaded.find(std::string("w"))->leaf());
  std::vector<std::int64_t> values;
  for (const RowBlock& b : merged.blocks)
    for (std::int64_t i = 0; i < b.rows; ++i) values.push_back(value_of(b.storage, b.first_row + i));
  EXPECT_EQ(values, (std::vector<std::int64_t>{0,  1,  2,  3,  10, 11, 12, 13, 20, 21, 22, 23, 30,  31,  32,  33,
                                               40, 41, 50, 51, 60, 61, 70, 71, 80, 81, 90, 91, 100, 101, 110, 111}));
}

}  // namespace
}  // namespace ih
