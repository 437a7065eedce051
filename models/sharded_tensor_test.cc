// The sharded-tensor data model (spec 3.1-3.4). Expected values come from the spec's examples or
// are worked out by hand in the comments; none is copied from a run of the implementation.
#include "models/sharded_tensor.h"

#include <gtest/gtest.h>

#include <array>
#include <limits>

namespace ih {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// A valid regular-grid tensor: local (4, 6) at block (1, 0) of a (2, 1) grid.
ShardedTensor valid_tensor() {
  ShardedTensor t;
  t.key = "w";
  t.local_shape = {4, 6};
  t.global_shape = {8, 6};
  t.global_offset = {4, 0};
  t.axis_fragmentations = Shape{2, 1};
  return t;
}

// ---------------------------------------------------------------------------------------------
// ReplicaId

TEST(ReplicaId, MainIffEveryCoordinateIsZero) {
  EXPECT_TRUE(ReplicaId{}.is_main());
  EXPECT_TRUE(ReplicaId::scalar(0).is_main());
  EXPECT_FALSE(ReplicaId::scalar(1).is_main());
  EXPECT_FALSE(ReplicaId::scalar(-1).is_main());
  EXPECT_TRUE(ReplicaId::tuple({0, 0, 0}).is_main());
  EXPECT_FALSE(ReplicaId::tuple({0, 1, 0}).is_main());
  EXPECT_FALSE(ReplicaId::tuple({0, 0, 2}).is_main());
}

TEST(ReplicaId, PrintsLikePython) {
  EXPECT_EQ(ReplicaId::scalar(3).to_string(), "3");
  EXPECT_EQ(ReplicaId::tuple({1}).to_string(), "(1,)");
  EXPECT_EQ(ReplicaId::tuple({0, 2, 1}).to_string(), "(0, 2, 1)");
  // A scalar and a one-element tuple are different replica ids.
  EXPECT_NE(ReplicaId::scalar(1), ReplicaId::tuple({1}));
}

// ---------------------------------------------------------------------------------------------
// TensorValue row blocks

TEST(TensorValue, OfStorageAndZerosCoverAllRows) {
  const TensorValue t = TensorValue::of_storage(5, {10, 3}, "bfloat16");
  EXPECT_EQ(t.shape, (Shape{10, 3}));
  EXPECT_EQ(t.dtype, "bfloat16");
  EXPECT_EQ(t.rows(), 10);
  EXPECT_EQ(t.blocks, (std::vector<RowBlock>{{5, 0, 10}}));
  const TensorValue z = TensorValue::zeros({4});
  ASSERT_EQ(z.blocks.size(), 1u);
  EXPECT_TRUE(z.blocks[0].is_zero());
  EXPECT_EQ(z.blocks[0].rows, 4);
  EXPECT_EQ(z.dtype, "float32");
}

TEST(TensorValue, EmptyAndScalarTensors) {
  EXPECT_TRUE(TensorValue::of_storage(5, {0, 3}).blocks.empty());  // no rows, nothing backs it
  const TensorValue scalar = TensorValue::of_storage(9, {});
  EXPECT_EQ(scalar.rows(), 1);  // a 0-d tensor is one row
  EXPECT_EQ(scalar.blocks, (std::vector<RowBlock>{{9, 0, 1}}));
}

TEST(TensorValue, RowViewSharesStorageAcrossBlocks) {
  // Rows 0-3 of storage 1 followed by rows 0-5 of storage 2: ten rows.
  const TensorValue two =
      TensorValue::concat_rows({TensorValue::of_storage(1, {4, 2}), TensorValue::of_storage(2, {6, 2})}).value();
  ASSERT_EQ(two.blocks, (std::vector<RowBlock>{{1, 0, 4}, {2, 0, 6}}));
  // Rows [2, 7): rows 2-3 of storage 1, rows 0-2 of storage 2.
  const TensorValue view = two.row_view(2, 7);
  EXPECT_EQ(view.shape, (Shape{5, 2}));
  EXPECT_EQ(view.blocks, (std::vector<RowBlock>{{1, 2, 2}, {2, 0, 3}}));
  // Rows [5, 9): rows 1-4 of storage 2 only.
  EXPECT_EQ(two.row_view(5, 9).blocks, (std::vector<RowBlock>{{2, 1, 4}}));
  // An empty view has no blocks; the full view is the tensor itself.
  EXPECT_TRUE(two.row_view(4, 4).blocks.empty());
  EXPECT_EQ(two.row_view(4, 4).shape, (Shape{0, 2}));
  EXPECT_EQ(two.row_view(0, 10), two);
}

TEST(TensorValue, RowViewOfZerosStaysZero) {
  const TensorValue padded =
      TensorValue::concat_rows({TensorValue::of_storage(3, {2}), TensorValue::zeros({5})}).value();
  // Rows [1, 4): row 1 of storage 3, then two zero rows (a zero block's first_row stays 0).
  EXPECT_EQ(padded.row_view(1, 4).blocks, (std::vector<RowBlock>{{3, 1, 1}, {0, 0, 2}}));
}

TEST(TensorValue, ConcatJoinsOnlyAdjacentRunsOfOneStorage) {
  const TensorValue base = TensorValue::of_storage(7, {10, 2});
  // Splitting and re-joining a tensor gives it back, one block.
  const TensorValue rejoined = TensorValue::concat_rows({base.row_view(0, 4), base.row_view(4, 10)}).value();
  EXPECT_EQ(rejoined, base);
  // A gap (row 4 skipped) keeps two blocks.
  const TensorValue gapped = TensorValue::concat_rows({base.row_view(0, 4), base.row_view(5, 10)}).value();
  EXPECT_EQ(gapped.shape, (Shape{9, 2}));
  EXPECT_EQ(gapped.blocks, (std::vector<RowBlock>{{7, 0, 4}, {7, 5, 5}}));
  // Out of order runs of one storage are not joined either.
  const TensorValue swapped = TensorValue::concat_rows({base.row_view(4, 10), base.row_view(0, 4)}).value();
  EXPECT_EQ(swapped.blocks, (std::vector<RowBlock>{{7, 4, 6}, {7, 0, 4}}));
  // Zero rows join with zero rows; a zero run never joins a storage run.
  const TensorValue zeros =
      TensorValue::concat_rows({TensorValue::zeros({3, 2}), TensorValue::zeros({2, 2}), base.row_view(0, 1)}).value();
  EXPECT_EQ(zeros.shape, (Shape{6, 2}));
  EXPECT_EQ(zeros.blocks, (std::vector<RowBlock>{{0, 0, 5}, {7, 0, 1}}));
}

TEST(TensorValue, ConcatRejectsMismatchesAndOverflow) {
  const auto kind = [](const Result<TensorValue>& r) {
    return r.ok() ? std::string("ok") : std::string(model_kind_name(r.error().kind));
  };
  EXPECT_EQ(kind(TensorValue::concat_rows({})), "invalid_argument");
  EXPECT_EQ(kind(TensorValue::concat_rows({TensorValue::of_storage(1, {2, 3}), TensorValue::of_storage(2, {2, 4})})),
            "invalid_argument");
  EXPECT_EQ(kind(TensorValue::concat_rows({TensorValue::of_storage(1, {2, 3}), TensorValue::of_storage(2, {2})})),
            "invalid_argument");
  EXPECT_EQ(kind(TensorValue::concat_rows(
                {TensorValue::of_storage(1, {2}, "float32"), TensorValue::of_storage(2, {2}, "bfloat16")})),
            "invalid_argument");
  EXPECT_EQ(kind(TensorValue::concat_rows({TensorValue::of_storage(1, {}), TensorValue::of_storage(2, {})})),
            "invalid_argument");  // 0-d tensors have no rows to join
  TensorValue huge{{kMax}, "float32", {}};
  EXPECT_EQ(kind(TensorValue::concat_rows({huge, TensorValue::zeros({1})})), "overflow");
  EXPECT_EQ(kind(TensorValue::concat_rows({huge})), "ok");
}

// ---------------------------------------------------------------------------------------------
// ShardedTensor::validate_metadata_integrity (spec 3.1 (1)-(5))

TEST(ShardedTensorIntegrity, ValidTensorPasses) {
  ShardedTensor t = valid_tensor();
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
  t.data = TensorValue::of_storage(1, {4, 6});
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
}

TEST(ShardedTensorIntegrity, EachCheckFiresWithItsMessage) {
  const auto message = [](const ShardedTensor& t) {
    const Status s = t.validate_metadata_integrity();
    EXPECT_FALSE(s.ok());
    if (s.ok()) return std::string();
    EXPECT_EQ(s.error().kind, ErrorKind::metadata_integrity);
    return s.error().message;
  };
  ShardedTensor t = valid_tensor();
  t.data = TensorValue::of_storage(1, {4, 6}, "bfloat16");  // (1) dtype
  EXPECT_TRUE(contains(message(t), "Data dtype should match `dtype` attribute for ShardedTensor(key='w')"));
  t = valid_tensor();
  t.data = TensorValue::of_storage(1, {4, 5});  // (1) shape
  EXPECT_TRUE(contains(message(t), "Data shape should match `local_shape`"));
  t = valid_tensor();
  t.global_offset = {4};  // (2)
  EXPECT_TRUE(contains(message(t), "Global offset dimensions should be equal to global shape dimensions"));
  t = valid_tensor();
  t.prepend_axis_num = 1;  // (3): 2 + 1 != 2
  EXPECT_TRUE(contains(message(t), "Local shape together with `prepend_axis_num`"));
  t = valid_tensor();
  t.prepend_axis_num = -1;  // (3) also for a negative prepend count
  EXPECT_TRUE(contains(message(t), "`prepend_axis_num`"));
  t = valid_tensor();
  t.global_offset = {6, 0};  // (4): 6 % 4 = 2
  EXPECT_TRUE(
      contains(message(t), "Global offset (6) must be divisible by local shape (4) for ShardedTensor(key='w')."));
  t = valid_tensor();
  t.has_flattened_range = true;  // (5)
  EXPECT_EQ(message(t), "ShardedTensor.flattened_range is not supported.");
}

TEST(ShardedTensorIntegrity, ChecksRunInMegatronsOrder) {
  ShardedTensor t = valid_tensor();
  t.has_flattened_range = true;                        // (5)
  t.global_offset = {6, 0};                            // (4)
  t.data = TensorValue::of_storage(1, {4, 6}, "f16");  // (1)
  EXPECT_TRUE(contains(t.validate_metadata_integrity().error().message, "Data dtype"));
  t.data.reset();
  EXPECT_TRUE(contains(t.validate_metadata_integrity().error().message, "must be divisible"));
  t.global_offset = {4, 0};
  EXPECT_TRUE(contains(t.validate_metadata_integrity().error().message, "flattened_range"));
}

TEST(ShardedTensorIntegrity, DivisibilityOnlyOnRegularGridsAndNonPrependedAxes) {
  ShardedTensor t = valid_tensor();
  t.global_offset = {6, 0};
  t.axis_fragmentations.reset();  // an uneven layout skips check (4)
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
  // Python's % is a floor modulo: -4 % 4 == 0 passes, -6 % 4 == 2 fails.
  t = valid_tensor();
  t.global_offset = {-4, 0};
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
  t.global_offset = {-6, 0};
  EXPECT_FALSE(t.validate_metadata_integrity().ok());
  // A zero local size is not checked (it would divide by zero).
  t = valid_tensor();
  t.local_shape = {0, 6};
  t.global_offset = {3, 0};
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
  // A prepended axis takes any offset: global (5, 8, 6), offset (3, 4, 0), local (4, 6).
  t = valid_tensor();
  t.prepend_axis_num = 1;
  t.global_shape = {5, 8, 6};
  t.global_offset = {3, 4, 0};
  t.axis_fragmentations = Shape{5, 2, 1};
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
  t.global_offset = {3, 5, 0};  // 5 % 4 != 0 on the first non-prepended axis
  EXPECT_TRUE(contains(t.validate_metadata_integrity().error().message, "Global offset (5)"));
}

TEST(ShardedTensorIntegrity, WhatMegatronDoesNotCheck) {
  // Spec 3.1: offset + local <= global, len(axis_fragmentations), fragments * local == global
  // and non-negative offsets are not checked at construction.
  ShardedTensor t = valid_tensor();
  t.global_offset = {400, 0};
  t.axis_fragmentations = Shape{7};
  t.global_shape = {8, 6};
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
}

TEST(ShardedTensor, LocalChunkOffsetInGlobal) {
  // Spec 3.2 example: offset (1, 384, 0), local (384, 256), p = 1 -> chunk (1, 1, 0).
  ShardedTensor t;
  t.key = "w";
  t.local_shape = {384, 256};
  t.global_shape = {2, 768, 256};
  t.global_offset = {1, 384, 0};
  t.prepend_axis_num = 1;
  EXPECT_EQ(t.local_chunk_offset_in_global().value(), (Shape{1, 1, 0}));
  t.global_offset = {1, -768, 0};  // floor division: -768 // 384 == -2
  EXPECT_EQ(t.local_chunk_offset_in_global().value(), (Shape{1, -2, 0}));
  t.global_offset = {1, 100, 0};
  EXPECT_EQ(t.local_chunk_offset_in_global().error().kind, ErrorKind::metadata_integrity);
  t.global_offset = {1, 0, 0};
  t.local_shape = {0, 256};  // Python would divide by zero; the model reports it
  EXPECT_EQ(t.local_chunk_offset_in_global().error().kind, ErrorKind::metadata_integrity);
  t.local_shape = {384};  // rank mismatch
  EXPECT_FALSE(t.local_chunk_offset_in_global().ok());
}

TEST(ShardedTensor, WithoutDataKeepsMetadata) {
  ShardedTensor t = valid_tensor();
  t.data = TensorValue::of_storage(1, {4, 6});
  const ShardedTensor bare = t.without_data();
  EXPECT_FALSE(bare.data.has_value());
  ShardedTensor expected = t;
  expected.data.reset();
  EXPECT_EQ(bare, expected);
  EXPECT_TRUE(t.data.has_value());  // the original is untouched
}

// ---------------------------------------------------------------------------------------------
// from_rank_offsets (spec 3.2)

TEST(FromRankOffsets, SpecExample) {
  // data (384, 256), p = 1, triples (0, 1, 2), (1, 1, 2) -> global (2, 768, 256), offset (1, 384, 0), frag (2, 2, 1).
  const TensorValue data = TensorValue::of_storage(11, {384, 256}, "bfloat16");
  const ShardedTensor t =
      ShardedTensor::from_rank_offsets("k", {}, {{0, 1, 2}, {1, 1, 2}}, ReplicaId::tuple({0, 1}), 1, data).value();
  EXPECT_EQ(t.key, "k");
  EXPECT_EQ(t.global_shape, (Shape{2, 768, 256}));
  EXPECT_EQ(t.global_offset, (Shape{1, 384, 0}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{2, 2, 1}));
  EXPECT_EQ(t.local_shape, (Shape{384, 256}));  // from the data, not from the (empty) argument
  EXPECT_EQ(t.dtype, "bfloat16");               // likewise
  EXPECT_EQ(t.prepend_axis_num, 1);
  EXPECT_EQ(t.replica_id, ReplicaId::tuple({0, 1}));
  EXPECT_EQ(t.data, data);
  EXPECT_TRUE(t.has_regular_grid());
}

TEST(FromRankOffsets, NoTriplesIsTheWholeTensor) {
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {3, 5}, {}, {}, 2).value();
  EXPECT_EQ(t.global_shape, (Shape{1, 1, 3, 5}));
  EXPECT_EQ(t.global_offset, (Shape{0, 0, 0, 0}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{1, 1, 1, 1}));
  EXPECT_EQ(t.dtype, "float32");
  EXPECT_FALSE(t.data.has_value());
  EXPECT_TRUE(t.is_main_replica());
}

TEST(FromRankOffsets, DuplicateAxisLastTripleWins) {
  // Local 5 rows: (0, 0, 2) then (0, 3, 4) -> global 4 * 5 = 20, offset 3 * 5 = 15, frag 4.
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {5}, {{0, 0, 2}, {0, 3, 4}}).value();
  EXPECT_EQ(t.global_shape, (Shape{20}));
  EXPECT_EQ(t.global_offset, (Shape{15}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{4}));
}

TEST(FromRankOffsets, PrependedAxisHasLocalSizeOne) {
  // p = 2, local (6,): triple (1, 2, 3) on a prepended axis -> global (1, 3, 6), offset (0, 2, 0).
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {6}, {{1, 2, 3}}, {}, 2).value();
  EXPECT_EQ(t.global_shape, (Shape{1, 3, 6}));
  EXPECT_EQ(t.global_offset, (Shape{0, 2, 0}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{1, 3, 1}));
}

TEST(FromRankOffsets, InvalidTriplesAreRejected) {
  const auto kind = [](std::vector<AxisOffset> triples, std::int64_t prepend = 0) {
    auto r = ShardedTensor::from_rank_offsets("k", {4, 4}, triples, {}, prepend);
    return r.ok() ? std::string("ok") : std::string(model_kind_name(r.error().kind));
  };
  EXPECT_EQ(kind({{-1, 0, 2}}), "invalid_rank_offsets");  // axis < 0
  EXPECT_EQ(kind({{0, -1, 2}}), "invalid_rank_offsets");  // k < 0
  EXPECT_EQ(kind({{0, 0, 0}}), "invalid_rank_offsets");   // n < 1
  EXPECT_EQ(kind({{0, 2, 2}}), "invalid_rank_offsets");   // k >= n
  EXPECT_EQ(kind({{2, 0, 2}}), "invalid_rank_offsets");   // axis beyond the rank (Python: IndexError)
  EXPECT_EQ(kind({{2, 0, 2}}, 1), "ok");                  // ... but not with one prepended axis
  EXPECT_EQ(kind({}, -1), "invalid_rank_offsets");
  EXPECT_EQ(kind({{0, 1, 2}, {1, 0, 1}}), "ok");
  auto r = ShardedTensor::from_rank_offsets("key.w", {4}, {{0, 2, 2}});
  EXPECT_TRUE(contains(r.error().message, "Invalid rank offsets"));
  EXPECT_TRUE(contains(r.error().message, "key.w"));
}

TEST(FromRankOffsets, SixtyFourBitSizesAndOverflow) {
  // 2^40 rows on 2^20 ranks: global 2^60, offset (2^20 - 1) * 2^40.
  const std::int64_t rows = std::int64_t{1} << 40, ranks = std::int64_t{1} << 20;
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {rows}, {{0, ranks - 1, ranks}}).value();
  EXPECT_EQ(t.global_shape, (Shape{std::int64_t{1} << 60}));
  EXPECT_EQ(t.global_offset, (Shape{(ranks - 1) * rows}));
  // 2^62 rows on 4 ranks: 2^64 does not fit.
  auto r = ShardedTensor::from_rank_offsets("k", {std::int64_t{1} << 62}, {{0, 1, 4}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::overflow);
}

TEST(FromRankOffsets, RunsTheIntegrityChecks) {
  // Data whose shape disagrees with nothing (local_shape comes from it) passes; a flattened range
  // cannot be expressed. What it can catch: nothing else fails by construction, so the result
  // must always validate.
  for (std::int64_t k = 0; k < 3; ++k) {
    auto t = ShardedTensor::from_rank_offsets("k", {7, 3}, {{0, k, 3}, {1, 0, 1}});
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->validate_metadata_integrity().ok());
    EXPECT_EQ(t->local_chunk_offset_in_global().value(), (Shape{k, 0}));
  }
}

// ---------------------------------------------------------------------------------------------
// narrow (spec 3.3)

TEST(Narrow, ScalesGlobalShapeAndOffset) {
  // Local 8 rows of rank 1 of 2: global 16, offset 8. narrow(0, 2, 4): local 4,
  // global 16 * 4 / 8 = 8, offset 8 * 4 / 8 = 4; data rows [2, 6) of the local storage.
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {}, {{0, 1, 2}}, ReplicaId::scalar(3), 0,
                                                           TensorValue::of_storage(21, {8, 4}))
                              .value();
  const ShardedTensor n = t.narrow(0, 2, 4).value();
  EXPECT_EQ(n.local_shape, (Shape{4, 4}));
  EXPECT_EQ(n.global_shape, (Shape{8, 4}));
  EXPECT_EQ(n.global_offset, (Shape{4, 0}));
  EXPECT_EQ(n.axis_fragmentations, t.axis_fragmentations);
  EXPECT_EQ(n.replica_id, ReplicaId::scalar(3));
  EXPECT_EQ(n.key, "k");
  ASSERT_TRUE(n.data.has_value());
  EXPECT_EQ(n.data->shape, (Shape{4, 4}));
  EXPECT_EQ(n.data->blocks, (std::vector<RowBlock>{{21, 2, 4}}));  // a view: same storage
  EXPECT_TRUE(n.validate_metadata_integrity().ok());
}

TEST(Narrow, PrependedAxesShiftTheGlobalAxis) {
  // p = 1, local (6, 10) at column block 2 of 3: global (1, 6, 30), offset (0, 0, 20).
  // narrow(1, 5, 5): global axis 2 becomes 30 * 5 / 10 = 15, offset 20 * 5 / 10 = 10.
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {6, 10}, {{2, 2, 3}}, {}, 1).value();
  const ShardedTensor n = t.narrow(1, 5, 5).value();
  EXPECT_EQ(n.local_shape, (Shape{6, 5}));
  EXPECT_EQ(n.global_shape, (Shape{1, 6, 15}));
  EXPECT_EQ(n.global_offset, (Shape{0, 0, 10}));
}

TEST(Narrow, ZeroLengthAndFullLength) {
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {8}, {{0, 3, 4}}).value();  // global 32, offset 24
  const ShardedTensor empty = t.narrow(0, 8, 0).value();
  EXPECT_EQ(empty.local_shape, (Shape{0}));
  EXPECT_EQ(empty.global_shape, (Shape{0}));
  EXPECT_EQ(empty.global_offset, (Shape{0}));
  EXPECT_EQ(t.narrow(0, 0, 8).value(), t);
}

TEST(Narrow, RejectsOutOfRangeAndIrregular) {
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {8, 4}, {{0, 1, 2}}).value();
  for (auto [dim, start, length] :
       std::vector<std::array<std::int64_t, 3>>{{-1, 0, 1}, {2, 0, 1}, {0, -1, 2}, {0, 0, -1}, {0, 5, 4}, {1, 0, 5}}) {
    auto r = t.narrow(dim, start, length);
    ASSERT_FALSE(r.ok()) << dim << " " << start << " " << length;
    EXPECT_EQ(r.error().kind, ErrorKind::narrow_misaligned);
  }
  // Irregular: a padded shard of 3 rows in a global of 10 (10 % 3 != 0), or offset 4 (4 % 3 != 0).
  ShardedTensor padded = t;
  padded.local_shape = {3, 4};
  padded.global_shape = {10, 4};
  padded.global_offset = {3, 0};
  auto r = padded.narrow(0, 0, 1);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(contains(r.error().message, "Only regular grid of local tensors is supported for narrowing"));
  padded.global_shape = {9, 4};
  padded.global_offset = {4, 0};
  EXPECT_EQ(padded.narrow(0, 0, 1).error().kind, ErrorKind::narrow_misaligned);
  padded.global_offset = {6, 0};
  EXPECT_TRUE(padded.narrow(0, 0, 1).ok());
}

// Known bug (reported, models/sharded_tensor.cc is not this test's to fix): the range check
// computes start + length in int64, so a huge start wraps past it. narrow(0, INT64_MAX, 2) on an
// 8-row shard succeeds with local 2, global 4, offset 2 instead of failing. Enable once fixed.
TEST(Narrow, HugeStartDoesNotWrapPastTheRangeCheck) {
  const ShardedTensor t = ShardedTensor::from_rank_offsets("k", {8, 4}, {{0, 1, 2}}).value();
  auto r = t.narrow(0, kMax, 2);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::narrow_misaligned);
}

TEST(Narrow, DataNarrowsAlongRowsOnly) {
  const ShardedTensor with_data =
      ShardedTensor::from_rank_offsets("k", {}, {}, {}, 0, TensorValue::of_storage(2, {4, 6})).value();
  EXPECT_EQ(with_data.narrow(1, 0, 3).error().kind, ErrorKind::narrow_misaligned);
  const ShardedTensor bare = with_data.without_data();
  const ShardedTensor n = bare.narrow(1, 3, 3).value();
  EXPECT_EQ(n.local_shape, (Shape{4, 3}));
  EXPECT_EQ(n.global_shape, (Shape{4, 3}));
  EXPECT_EQ(n.global_offset, (Shape{0, 0}));
}

TEST(Narrow, HugeShapesOverflowIsAnError) {
  // Local 2^61 rows, rank 3 of 4: global 2^63 would overflow already in from_rank_offsets; build by hand.
  ShardedTensor t;
  t.key = "k";
  t.local_shape = {std::int64_t{1} << 61};
  t.global_shape = {std::int64_t{1} << 62};
  t.global_offset = {std::int64_t{1} << 61};
  t.axis_fragmentations = Shape{2};
  // narrow(0, 0, 2^60): global 2^62 * 2^60 / 2^61 = 2^61, offset 2^60. Must not wrap silently.
  auto r = t.narrow(0, 0, std::int64_t{1} << 60);
  if (r.ok()) {
    EXPECT_EQ(r->global_shape, (Shape{std::int64_t{1} << 61}));
    EXPECT_EQ(r->global_offset, (Shape{std::int64_t{1} << 60}));
  } else {
    EXPECT_EQ(r.error().kind, ErrorKind::overflow);
  }
}

// ---------------------------------------------------------------------------------------------
// ShardedObject (spec 3.4)

TEST(ShardedObject, UniqueKeySpecExample) {
  ShardedObject o{"decoder.layers.mlp.experts.linear_fc1._extra_state", ObjectRef{5}, {2, 8}, {1, 3}, {}};
  EXPECT_EQ(o.unique_key(), "decoder.layers.mlp.experts.linear_fc1._extra_state/shard_1.3_2.8");
  // Spec 2.5 example: (2,)/(1,) -> ".../shard_1_2".
  ShardedObject layer{"decoder.layers.mlp.linear_fc2._extra_state", std::nullopt, {2}, {1}, {}};
  EXPECT_EQ(layer.unique_key(), "decoder.layers.mlp.linear_fc2._extra_state/shard_1_2");
  EXPECT_EQ(ShardedObject{}.unique_key(), "/shard_0_1");  // the defaults: one shard at 0
}

TEST(ShardedObject, FromUniqueKeyParsesBack) {
  const ShardedObject o = ShardedObject::from_unique_key("a.b_c/shard_1.3_2.8").value();
  EXPECT_EQ(o.key, "a.b_c");
  EXPECT_EQ(o.global_offset, (Shape{1, 3}));
  EXPECT_EQ(o.global_shape, (Shape{2, 8}));
  EXPECT_FALSE(o.data.has_value());
  EXPECT_TRUE(o.is_main_replica());
  EXPECT_EQ(o.unique_key(), "a.b_c/shard_1.3_2.8");
}

TEST(ShardedObject, LegacyKeyGetsMinusOne) {
  const ShardedObject o = ShardedObject::from_unique_key("k/shard_1.3_2").value();
  EXPECT_EQ(o.global_shape, (Shape{2, -1}));
  EXPECT_EQ(o.global_offset, (Shape{1, 3}));
}

TEST(ShardedObject, BadUniqueKeys) {
  for (const std::string key :
       {"a/b/shard_0_1", "no_slash", "k/shard_0", "k/shard_0_1_2", "k/part_0_1", "k/shard_x_1", "k/shard_0_1.y"}) {
    auto r = ShardedObject::from_unique_key(key);
    EXPECT_FALSE(r.ok()) << key;
  }
  // Two fewer shape entries than offsets is not the legacy form: integrity fails.
  auto r = ShardedObject::from_unique_key("k/shard_1.2.3_4");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::metadata_integrity);
}

TEST(ShardedObject, IntegrityOnlyComparesLengths) {
  ShardedObject o{"k", std::nullopt, {2, 8}, {1, 3}, {}};
  EXPECT_TRUE(o.validate_metadata_integrity().ok());
  o.global_offset = {9, 9};  // beyond the shape: not checked
  EXPECT_TRUE(o.validate_metadata_integrity().ok());
  o.global_offset = {1};
  const Status s = o.validate_metadata_integrity();
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::metadata_integrity);
  EXPECT_TRUE(contains(s.error().message, "ShardedObject(key='k')"));
}

}  // namespace
}  // namespace ih
