// Exact integrity on boxes: planted holes and overlaps are named with key, box and ranks, and
// Megatron's own validation (spec 3.7) is shown to miss what it skips.
#include "models/integrity.h"

#include <gtest/gtest.h>

#include "models/gtp_layout.h"

namespace ih {
namespace {

// Example B (spec 4.9): T = 2, G = 2, p = 16; rank = 2t + g.
GlobalMetadata example_b(ReplicaId (*replica)(std::int64_t g)) {
  GlobalMetadata meta;
  for (std::int64_t t = 0; t < 2; ++t)
    for (std::int64_t g = 0; g < 2; ++g) {
      GtpFactoryParams p;
      p.key = "w";
      p.layout = gdp_in_proj_layout({10, 3, 2, 3}).value();
      p.tp_size = 2, p.tp_rank = t, p.gtp_size = 2, p.gtp_rank = g, p.pad_alignment = 16, p.cols = 2;
      p.replica_id = replica(g);
      meta.add_tree(2 * t + g, make_gtp_factory(GtpSaveDesign::shard_split, p).value().build().value());
    }
  return meta;
}

ReplicaId replicate_group(std::int64_t) { return ReplicaId::tuple({0, 0, 0}); }
ReplicaId gtp_inclusive_group(std::int64_t g) { return ReplicaId::tuple({0, 0, g}); }

ShardedTensor* find(GlobalMetadata& meta, std::int64_t rank, const std::string& key) {
  for (RankedTensor& e : meta.tensors)
    if (e.rank == rank && e.tensor.key == key) return &e.tensor;
  return nullptr;
}

TEST(Integrity, ExampleBTilesEveryKeyExactlyOnce) {
  const std::vector<std::string> keys{"w.z",  "w.V0", "w.V1", "w.V2", "w.K0", "w.K1",
                                      "w.K2", "w.Q",  "w.b0", "w.b1", "w.b2", "w.a"};
  const IntegrityReport report = check_integrity(example_b(replicate_group), keys);
  EXPECT_TRUE(report.ok()) << testing::PrintToString(report.messages());
  const auto missing = check_integrity(example_b(replicate_group), std::vector<std::string>{"w.z", "w.extra"});
  ASSERT_EQ(missing.problems.size(), 12u);  // w.extra missing, 11 unexpected
  EXPECT_EQ(missing.problems.front().kind, ProblemKind::missing_key);
}

TEST(Integrity, PlantedHoleIsNamed) {
  GlobalMetadata meta = example_b(replicate_group);
  std::erase_if(meta.tensors, [](const RankedTensor& e) { return e.rank == 3 && e.tensor.key == "w.V2"; });
  const IntegrityReport report = check_integrity(meta);
  ASSERT_EQ(report.problems.size(), 1u) << testing::PrintToString(report.messages());
  const IntegrityProblem& p = report.problems[0];
  EXPECT_EQ(p.kind, ProblemKind::hole);
  EXPECT_EQ(p.key, "w.V2");
  EXPECT_EQ(p.box, (Box{{12, 0}, {20, 2}}));
  EXPECT_EQ(p.ranks, (std::vector<std::int64_t>{2}));  // (t, g) = (1, 0) holds V2 rows 10-11
  EXPECT_NE(p.message.find("key w.V2: hole at offset (12, 0) shape (8, 2)"), std::string::npos) << p.message;
  // Megatron skips irregular grids: it sees nothing wrong.
  EXPECT_TRUE(megatron_validate_sharding(meta).status().ok());
}

TEST(Integrity, PlantedOverlapAndItsHoleAreBothReported) {
  GlobalMetadata meta = example_b(replicate_group);
  find(meta, 3, "w.K0")->global_offset = {2, 0};  // should be 3: now [2, 5) overlaps [0, 3), leaves [5, 6)
  const IntegrityReport report = check_integrity(meta);
  ASSERT_EQ(report.problems.size(), 2u) << testing::PrintToString(report.messages());
  EXPECT_EQ(report.problems[0].kind, ProblemKind::hole);
  EXPECT_EQ(report.problems[0].box, (Box{{5, 0}, {6, 2}}));
  EXPECT_EQ(report.problems[1].kind, ProblemKind::overlap);
  EXPECT_EQ(report.problems[1].box, (Box{{2, 0}, {3, 2}}));
  EXPECT_EQ(report.problems[1].ranks, (std::vector<std::int64_t>{1, 3}));
  EXPECT_NE(report.problems[1].message.find("written by ranks 1 and 3"), std::string::npos);
}

TEST(Integrity, DroppedTpTermCollidesAcrossTpRanks) {
  GlobalMetadata meta = example_b(replicate_group);
  for (RankedTensor& e : meta.tensors)
    if (e.rank >= 2) e.tensor.global_offset[0] -= e.tensor.global_shape[0] / 2;  // remove t * s_j
  const IntegrityReport report = check_integrity(meta);
  std::size_t holes = 0, overlaps = 0;
  for (const IntegrityProblem& p : report.problems) (p.kind == ProblemKind::hole ? holes : overlaps) += 1;
  EXPECT_EQ(holes, 12u);  // the upper half of every key
  EXPECT_GE(overlaps, 12u);
}

TEST(Integrity, ReplicaFromTheGtpInclusiveGroupLeavesSilentHoles) {
  const GlobalMetadata meta = example_b(gtp_inclusive_group);  // only g = 0 pieces are main
  EXPECT_FALSE(check_integrity(meta).ok());
  EXPECT_TRUE(megatron_validate_sharding(meta).status().ok());
}

RankedTensor grid_piece(std::int64_t rank, std::int64_t row, std::int64_t col) {
  // (4, 6) tensor on a 2 x 3 grid of (2, 2) blocks.
  return {rank, ShardedTensor::from_rank_offsets("g", {2, 2}, {{0, row, 2}, {1, col, 3}}).value()};
}

TEST(Integrity, RegularGridHoleOutOfBoundsAndMegatronCounter) {
  GlobalMetadata meta;
  for (std::int64_t r = 0; r < 2; ++r)
    for (std::int64_t c = 0; c < 3; ++c)
      if (!(r == 1 && c == 2)) meta.tensors.push_back(grid_piece(3 * r + c, r, c));
  meta.tensors.push_back(grid_piece(6, 0, 0));  // duplicate writer of block (0, 0)
  const IntegrityReport report = check_integrity(meta);
  ASSERT_EQ(report.problems.size(), 2u) << testing::PrintToString(report.messages());
  EXPECT_EQ(report.problems[0].box, (Box{{2, 4}, {4, 6}}));
  EXPECT_EQ(report.problems[1].ranks, (std::vector<std::int64_t>{0, 6}));
  const Status megatron = megatron_validate_sharding(meta).status();
  EXPECT_EQ(megatron.error().kind, ErrorKind::invalid_sharding_pattern);
  EXPECT_NE(megatron.error().message.find("1 chunks never written, 1 written more than once"), std::string::npos);
}

TEST(Integrity, DisagreementsAndBoundsAreCollected) {
  GlobalMetadata meta = example_b(replicate_group);
  find(meta, 1, "w.Q")->dtype = "float32";
  find(meta, 1, "w.a")->global_shape = {5, 2};  // (t, g) = (0, 1): its rows [0, 2) become a hole
  find(meta, 3, "w.b2")->local_shape = {3, 2};  // [2, 5) exceeds (4, 2) and overlaps nothing else
  const IntegrityReport report = check_integrity(meta);
  std::vector<ProblemKind> kinds;
  for (const IntegrityProblem& p : report.problems) kinds.push_back(p.kind);
  EXPECT_EQ(kinds, (std::vector<ProblemKind>{ProblemKind::dtype_mismatch, ProblemKind::shape_mismatch,
                                             ProblemKind::hole, ProblemKind::out_of_bounds}));
  // Megatron stops at its first assert.
  EXPECT_EQ(megatron_validate_sharding(meta).status().error().kind, ErrorKind::sharding_assertion);
}

TEST(Integrity, MixedRegularAndIrregularEntriesTripMegatronsAssert) {
  GlobalMetadata meta = example_b(replicate_group);
  find(meta, 0, "w.z")->axis_fragmentations = Shape{2, 1};
  const MegatronValidation v = megatron_validate_sharding(meta);
  ASSERT_TRUE(v.assertion.has_value());
  EXPECT_NE(v.assertion->find("has_regular_grid"), std::string::npos);
  EXPECT_TRUE(check_integrity(meta).ok());  // the boxes still tile; grid kind is Megatron's concern
}

TEST(Integrity, ShardedObjectsDuplicateAndMissing) {
  GlobalMetadata meta;
  meta.objects.push_back({0, ShardedObject{"o", std::nullopt, {3}, {0}, {}}});
  meta.objects.push_back({1, ShardedObject{"o", std::nullopt, {3}, {0}, {}}});
  meta.objects.push_back({2, ShardedObject{"o", std::nullopt, {3}, {2}, ReplicaId::scalar(1)}});  // not main
  const IntegrityReport report = check_integrity(meta);
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_EQ(report.problems[0].kind, ProblemKind::duplicate_object);
  EXPECT_EQ(report.problems[0].ranks, (std::vector<std::int64_t>{0, 1}));
  EXPECT_EQ(report.problems[1].kind, ProblemKind::missing_object);
  EXPECT_NE(report.problems[1].message.find("2 of 3"), std::string::npos);
  EXPECT_NE(report.problems[1].message.find("(1), (2)"), std::string::npos);
  const MegatronValidation v = megatron_validate_sharding(meta);
  ASSERT_EQ(v.errors.size(), 2u);  // duplicates and holes cancel in the count: 3 - 2 = 1 missing
  EXPECT_EQ(v.errors[1], "Invalid access pattern: 1 ShardedObject are missing.");
}

TEST(Integrity, TheEntryPointMustRefuseWhatThePerKeyChecksRefuse) {
  MegatronValidation broken;
  broken.errors = {"Invalid access pattern for ShardedTensor(key='w')"};
  EXPECT_TRUE(broken.entry_disagreement().empty());  // the entry not run: nothing to compare
  broken.entry_accepted = false;
  EXPECT_TRUE(broken.entry_disagreement().empty());
  broken.entry_accepted = true;  // a save path that skips keys or ranks
  EXPECT_EQ(broken.entry_disagreement(), "validate_sharding_integrity accepted it");
  MegatronValidation valid;
  valid.entry_accepted = true;
  EXPECT_TRUE(valid.entry_disagreement().empty());
  valid.entry_accepted = false;
  EXPECT_EQ(valid.entry_disagreement(), "validate_sharding_integrity refused it");
  MegatronValidation asserted;
  asserted.assertion = "global shapes differ", asserted.entry_accepted = true;
  EXPECT_EQ(asserted.entry_disagreement(), "validate_sharding_integrity accepted it");
}

TEST(BoxTiling, ScalarAndEmptyCases) {
  EXPECT_EQ(find_holes_and_overlaps(Box{{}, {}}, {}).holes.size(), 1u);
  EXPECT_TRUE(find_holes_and_overlaps(Box{{0}, {0}}, {}).holes.empty());
  const auto found = find_holes_and_overlaps(Box{{0}, {10}}, {Box{{0}, {4}}, Box{{6}, {10}}, Box{{3}, {5}}});
  EXPECT_EQ(found.holes, (std::vector<Box>{Box{{5}, {6}}}));
  EXPECT_EQ(found.overlaps, (std::vector<std::pair<std::size_t, std::size_t>>{{0, 2}}));
}

}  // namespace
}  // namespace ih
