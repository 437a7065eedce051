// DCP's save-plan validation (spec addendum D): what it rejects, and where it is weaker or
// stronger than Megatron's validate_sharding_integrity and the exact box check.
#include "models/dcp_plan.h"

#include <gtest/gtest.h>

#include "models/gtp_layout.h"

namespace ih {
namespace {

ShardedTensor rows(const std::string& key, std::int64_t offset, std::int64_t n, std::int64_t global, bool grid = false,
                   ReplicaId replica = ReplicaId::tuple({0, 0, 0})) {
  ShardedTensor t;
  t.key = key, t.dtype = "float32";
  t.local_shape = {n, 2}, t.global_shape = {global, 2}, t.global_offset = {offset, 0};
  if (grid) t.axis_fragmentations = Shape{global / n, 1};
  t.replica_id = replica;
  return t;
}

bool mentions(const std::vector<std::string>& errors, const std::string& text) {
  for (const std::string& e : errors)
    if (e.find(text) != std::string::npos) return true;
  return false;
}

TEST(DcpPlan, UnevenTilingAcceptedHoleAndOverlapRejected) {
  GlobalMetadata ok;
  ok.tensors = {{0, rows("w", 0, 3, 10)}, {1, rows("w", 3, 7, 10)}};
  EXPECT_TRUE(dcp_validate_save_plan(ok).errors.empty());
  EXPECT_TRUE(megatron_validate_sharding(ok).errors.empty());

  GlobalMetadata hole = ok;
  hole.tensors[1].tensor = rows("w", 4, 6, 10);
  const auto h = dcp_validate_save_plan(hole).errors;
  EXPECT_TRUE(mentions(h, "key:w invalid fill tensor-volume: 20 chunks-volume: 18"));
  EXPECT_TRUE(megatron_validate_sharding(hole).errors.empty());  // irregular grid: Megatron skips it
  EXPECT_EQ(dcp_validate_save_plan(hole).status().error().kind, ErrorKind::invalid_sharding_pattern);

  GlobalMetadata overlap = ok;
  overlap.tensors[1].tensor = rows("w", 2, 8, 10);
  EXPECT_TRUE(mentions(dcp_validate_save_plan(overlap).errors, "key:w has overlapping chunks"));

  GlobalMetadata outside = ok;
  outside.tensors[1].tensor = rows("w", 3, 8, 10);
  EXPECT_TRUE(mentions(dcp_validate_save_plan(outside).errors, "out of bounds chunk"));
}

TEST(DcpPlan, WeakerThanMegatron) {
  // Two main replicas writing the same chunk: DCP de-duplicates by (key, offset) and is silent;
  // Megatron's counter sees the cell written twice.
  GlobalMetadata dup;
  dup.tensors = {{0, rows("w", 0, 5, 10, true)}, {1, rows("w", 0, 5, 10, true)}, {2, rows("w", 5, 5, 10, true)}};
  const DcpPlanReport r = dcp_validate_save_plan(dup);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_EQ(r.plans[0].size() + r.plans[1].size(), 1u);
  EXPECT_FALSE(megatron_validate_sharding(dup).errors.empty());

  // One planning rank: no fill check, a hole passes.
  GlobalMetadata single;
  single.tensors = {{0, rows("w", 0, 5, 10)}};
  EXPECT_TRUE(dcp_validate_save_plan(single).errors.empty());
  EXPECT_FALSE(dcp_validate_save_plan(single, 2).errors.empty());

  // Disagreeing global shapes: the first item's size wins, no error; Megatron asserts.
  GlobalMetadata shapes;
  shapes.tensors = {{0, rows("w", 0, 5, 10)}, {1, rows("w", 5, 5, 12)}};
  EXPECT_TRUE(dcp_validate_save_plan(shapes).errors.empty());
  EXPECT_TRUE(megatron_validate_sharding(shapes).assertion.has_value());
}

TEST(DcpPlan, NonMainReplicasAreNotPlanned) {
  GlobalMetadata meta;
  meta.tensors = {{0, rows("w", 0, 10, 10)}, {1, rows("w", 0, 10, 10, false, ReplicaId::tuple({0, 1, 0}))}};
  const DcpPlanReport r = dcp_validate_save_plan(meta);
  EXPECT_TRUE(r.errors.empty());
  EXPECT_TRUE(r.plans[1].empty());
  EXPECT_TRUE(megatron_validate_sharding(meta).dcp_plan_errors.has_value());
}

// Worked example B (spec 4.9) with the shard split: DCP accepts the 4 ranks' uneven pieces and
// rejects the plan once rank (1, 1)'s V2 piece is gone.
TEST(DcpPlan, ExampleBPieces) {
  GlobalMetadata meta;
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t g = 0; g < 2; ++g) {
      GtpFactoryParams p;
      p.key = "w";
      p.layout = gdp_in_proj_layout({10, 3, 2, 3}).value();
      p.tp_size = 2, p.tp_rank = t, p.gtp_size = 2, p.gtp_rank = g, p.pad_alignment = 16, p.cols = 2;
      meta.add_tree(2 * t + g, make_gtp_factory(GtpSaveDesign::shard_split, p).value().build().value());
    }
  EXPECT_TRUE(dcp_validate_save_plan(meta).errors.empty());
  std::erase_if(meta.tensors, [](const RankedTensor& t) { return t.rank == 3 && t.tensor.key == "w.V2"; });
  EXPECT_TRUE(
      mentions(dcp_validate_save_plan(meta).errors, "key:w.V2 invalid fill tensor-volume: 40 chunks-volume: 24"));
}

}  // namespace
}  // namespace ih

namespace ih {
namespace {

TEST(DcpPlan, HostileSizesDoNotWrap) {
  GlobalMetadata meta;
  ShardedTensor a;
  a.key = "w", a.local_shape = {INT64_MAX}, a.global_shape = {INT64_MAX}, a.global_offset = {1};
  a.replica_id = ReplicaId::tuple({0, 0, 0});
  ShardedTensor b = a;
  b.global_offset = {INT64_MAX - 1};
  meta.tensors = {{0, a}, {1, b}};
  const auto errors = dcp_validate_save_plan(meta).errors;
  ASSERT_FALSE(errors.empty());
  EXPECT_NE(errors.front().find("out of bounds"), std::string::npos);
}

}  // namespace
}  // namespace ih

namespace ih {
namespace {

// Every rank sends a plan, even an empty one: a rank whose only chunk is gone still counts.
TEST(DcpPlan, EmptyTrailingRanksStillPlan) {
  ShardedTensor t;
  t.key = "w", t.local_shape = {4, 1}, t.global_shape = {8, 1}, t.global_offset = {0, 0};
  t.replica_id = ReplicaId::tuple({0, 0, 0});
  GlobalMetadata meta;
  meta.tensors = {{0, t}};
  EXPECT_TRUE(dcp_validate_save_plan(meta).errors.empty());  // looks like a one-rank save
  meta.world_size = 2;
  ASSERT_EQ(dcp_validate_save_plan(meta).errors.size(), 1u);
  EXPECT_EQ(dcp_validate_save_plan(meta).errors[0], "key:w invalid fill tensor-volume: 8 chunks-volume: 4");
}

}  // namespace
}  // namespace ih
