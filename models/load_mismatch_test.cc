// allow_shape_mismatch at load (spec 3.9, addendum B): the request is zero-filled and only the
// overlap with what was stored is read; without the flag a different global shape is refused.
#include <gtest/gtest.h>

#include "models/checkpoint_model.h"
#include "models/gtp_layout.h"

namespace ih {
namespace {

ShardedTensor row_entry(std::int64_t offset, std::int64_t rows, std::int64_t global, std::uint64_t storage,
                        bool allow = false) {
  ShardedTensor t;
  t.key = "w", t.dtype = "bfloat16";
  t.local_shape = {rows, 2}, t.global_shape = {global, 2}, t.global_offset = {offset, 0};
  t.axis_fragmentations = Shape{global / rows, 1};
  t.replica_id = ReplicaId::tuple({0, 0, 0});
  t.allow_shape_mismatch = allow;
  if (storage) t.data = TensorValue::of_storage(storage, {rows, 2}, "bfloat16");
  return t;
}

// Saved: 20 rows by two ranks of 10 (storages 1 and 2).
Checkpoint saved() {
  std::vector<StateNode> trees;
  for (std::int64_t r = 0; r < 2; ++r)
    trees.push_back(StateNode(StateDict{{std::string("w"), StateNode(row_entry(10 * r, 10, 20, 1 + r, true))}}));
  return save_checkpoint(trees).value();
}

TEST(AllowShapeMismatch, LargerRequestIsZeroFilled) {
  const Checkpoint c = saved();
  // Requested global 24 rows (another padding); rank 1 of 2 asks rows [12, 24).
  const TensorValue v = read_value(c.index, row_entry(12, 12, 24, 0, true)).value();
  EXPECT_EQ(v.shape, (Shape{12, 2}));
  EXPECT_EQ(v.blocks, (std::vector<RowBlock>{{2, 2, 8}, {0, 0, 4}}));  // stored rows 12..19, then 4 zero rows
  const LoadPlan plan = resolve_load_plan(c.index, row_entry(12, 12, 24, 0, true)).value();
  EXPECT_EQ(plan.stored_shape, (Shape{20, 2}));
  ASSERT_EQ(plan.zero_fill.size(), 1u);
  EXPECT_EQ(plan.zero_fill[0], (Box{{8, 0}, {12, 2}}));
}

TEST(AllowShapeMismatch, SmallerRequestReadsTheOverlap) {
  const Checkpoint c = saved();
  const TensorValue v = read_value(c.index, row_entry(8, 8, 16, 0, true)).value();
  EXPECT_EQ(v.blocks, (std::vector<RowBlock>{{1, 8, 2}, {2, 0, 6}}));
}

TEST(AllowShapeMismatch, WithoutTheFlagAShapeChangeIsRefused) {
  const Checkpoint c = saved();
  const auto refused = read_value(c.index, row_entry(12, 12, 24, 0, false));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().kind, ErrorKind::global_shape_mismatch);
  EXPECT_NE(refused.error().message.find("stored shapes: (20, 2)"), std::string::npos);
  ShardedTensor other = row_entry(0, 10, 20, 0, true);
  other.key = "absent";
  EXPECT_EQ(read_value(c.index, other).error().kind,
            ErrorKind::load_not_covered);  // a missing key is never zero-filled
}

GtpFactoryParams composite(std::int64_t t, std::int64_t g, std::int64_t gtp, std::int64_t pad, std::uint64_t storage) {
  GtpFactoryParams p;
  p.key = "in_proj";
  p.layout = gdp_in_proj_layout({10, 3, 2, 3}).value();  // D = 60 per TP rank (spec 4.9)
  p.tp_size = 2, p.tp_rank = t, p.gtp_size = gtp, p.gtp_rank = g, p.pad_alignment = pad, p.cols = 2;
  p.replica_id = ReplicaId::tuple({0, 0, 0});
  const GtpPadding padding = gtp_padding_of(p).value();
  if (storage) p.shard = TensorValue::of_storage(storage, {padding.shard_rows, 2}, "bfloat16");
  return p;
}

// Addendum B, consequence: the composite entry puts TP rank t at rows t*D'. Saved at T = 2, G = 2,
// p = 16 (D' = 64) and loaded at G = 4, p = 32 (D' = 128), allow_shape_mismatch lifts the shape
// check and the rows land on the wrong TP rank: loader (t=0, g=2) reads saved TP rank 1's first
// shard, loader (t=1, g=0) reads nothing (zeros). Inferred from the code; what Megatron does.
TEST(AllowShapeMismatch, TpBlocksMoveWhenThePaddingChanges) {
  std::vector<StateNode> trees;
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t g = 0; g < 2; ++g)
      trees.push_back(StateNode(StateDict{
          {std::string("w"), StateNode(gtp_composite_tensor(composite(t, g, 2, 16, 10 + 2 * t + g)).value())}}));
  const Checkpoint c = save_checkpoint(trees).value();
  const ShardedTensor t0g2 = gtp_composite_tensor(composite(0, 2, 4, 32, 0)).value();
  EXPECT_EQ(read_value(c.index, t0g2).value().blocks, (std::vector<RowBlock>{{12, 0, 32}}));  // TP rank 1's rows
  const ShardedTensor t1g0 = gtp_composite_tensor(composite(1, 0, 4, 32, 0)).value();
  EXPECT_EQ(read_value(c.index, t1g0).value().blocks, (std::vector<RowBlock>{{0, 0, 32}}));  // all zero
}

}  // namespace
}  // namespace ih
