// Writer election for GTP parameter entries (spec addendum A): grids as RankGenerator builds
// them, the replica chain of gtp_replica_rank, and Mamba's in_proj staying on the gather design.
#include "models/gtp_election.h"

#include <gtest/gtest.h>

#include "models/gtp_layout.h"
#include "models/integrity.h"

namespace ih {
namespace {

TEST(ParallelGrid, RankGeneratorOrder) {
  // tp2-gtp_remat2-cp1-ep1-dp2: rank = t + 2g + 4d.
  const ParallelGrid g = ParallelGrid::make(kDenseGridOrder, 2, 2, 1, 1, 2).value();
  EXPECT_EQ(g.world_size(), 8);
  EXPECT_EQ(g.coordinate(5, "tp"), 1);
  EXPECT_EQ(g.coordinate(5, "gtp_remat"), 0);
  EXPECT_EQ(g.coordinate(5, "dp"), 1);
  EXPECT_EQ(g.group_rank(7, {"dp", "cp"}), 1);               // GTP-excluded DP x CP
  EXPECT_EQ(g.group_rank(7, {"gtp_remat", "dp", "cp"}), 3);  // GTP-inclusive: g + G*d
  EXPECT_EQ(ParallelGrid::make("tp-dp", 2, 2, 1, 1, 1).error().kind, ErrorKind::invalid_layout_parameter);
  EXPECT_EQ(ParallelGrid::make("tp-xx", 1, 1, 1, 1, 1).error().kind, ErrorKind::invalid_layout_parameter);
}

TEST(ParallelGrid, ExpertGridDerivesExpertDp) {
  const WorldGrids w = default_world_grids(2, 2, 1, 2, 1, 2, 2).value();  // world 8, expert dp 2
  EXPECT_EQ(w.expert.world_size(), 8);
  EXPECT_EQ(w.expert.size("dp"), 2);
  // tp1-cp1-ep2-gtp_remat2-dp2: rank 6 = ep 0, egtp 1, edp 1.
  EXPECT_EQ(w.expert.coordinate(6, "ep"), 0);
  EXPECT_EQ(w.expert.coordinate(6, "gtp_remat"), 1);
  EXPECT_EQ(w.expert.group_rank(6, {"dp"}), 1);
  EXPECT_EQ(default_world_grids(2, 1, 1, 1, 1, 4, 1).error().kind, ErrorKind::invalid_layout_parameter);
}

TEST(GtpReplicaRank, ResolutionOrder) {
  const WorldGrids caller = default_world_grids(1, 2, 2, 2, 1, 1, 1).value();  // world 8
  GtpElection e;
  e.global_rank = 7;  // g 1, cp 1, dp 1 -> dp_cp rank 1 + 2*1 = 3
  e.caller = caller;
  EXPECT_EQ(gtp_replica_rank(e).value(), 3);
  // The globals describe another world (no GTP: dp 4): the stamped group still wins.
  e.globals = default_world_grids(1, 1, 2, 4, 1, 1, 1).value();
  EXPECT_EQ(gtp_replica_rank(e).value(), 3);
  e.caller.reset();
  EXPECT_EQ(gtp_replica_rank(e).value(), 7);  // rank 7 of the globals: cp 1, dp 3 -> 1 + 2*3
  e.globals.reset();
  EXPECT_EQ(gtp_replica_rank(e).error().kind, ErrorKind::gtp_replica_group_unknown);
  e.explicit_replica_id = ReplicaId::tuple({0, 0, 0});
  EXPECT_EQ(gtp_entry_replica_id(e).error().kind, ErrorKind::gtp_replica_group_unknown);  // elected first
  e.distributed = false;
  e.global_rank = 0;
  EXPECT_EQ(gtp_replica_rank(e).value(), 0);
  EXPECT_EQ(gtp_entry_replica_id(e).value(), ReplicaId::tuple({0, 0, 0}));
}

GtpFactoryParams entry_params(const GtpElection& e, std::int64_t tp, std::int64_t gtp, std::int64_t t, std::int64_t g) {
  GtpFactoryParams p;
  p.key = "decoder.layers.0.mlp.experts.linear_fc1.weight";
  p.layout = {{30}, {"w"}};
  p.tp_size = tp, p.tp_rank = t, p.gtp_size = gtp, p.gtp_rank = g, p.pad_alignment = 16, p.cols = 2;
  p.election = e;
  return p;
}

// Every rank of a TP1 x GTP2 x DP2 world with EP2 experts: exactly one writer per expert shard.
TEST(GtpParamEntry, ExpertEntriesElectOverExpertDp) {
  const WorldGrids w = default_world_grids(1, 2, 1, 4, 1, 2, 2).value();  // world 8, edp 2
  GlobalMetadata meta;
  for (std::int64_t r = 0; r < 8; ++r) {
    GtpElection e;
    e.expert = true, e.global_rank = r, e.caller = w;
    const std::int64_t g = w.expert.coordinate(r, "gtp_remat");
    const ShardedTensor t = gtp_composite_tensor(entry_params(e, 1, 2, 0, g)).value();
    EXPECT_EQ(t.prepend_axis_num, 1);
    EXPECT_EQ(t.global_shape, (Shape{2, 32, 2}));  // E = 2, T*G*R = 2 * 16 (D = 30, D' = 32)
    EXPECT_EQ(t.global_offset[0], w.expert.coordinate(r, "ep"));
    EXPECT_EQ(t.replica_id, ReplicaId::tuple({0, 0, w.expert.group_rank(r, {"dp"})}));
    meta.tensors.push_back({r, t});
  }
  EXPECT_TRUE(check_integrity(meta).ok());
  // Electing over the dense DP x CP group instead (dense dp 4) leaves holes and duplicates.
  for (RankedTensor& t : meta.tensors)
    t.tensor.replica_id = ReplicaId::tuple({0, 0, w.dense.group_rank(t.rank, {"dp", "cp"})});
  EXPECT_FALSE(check_integrity(meta).ok());
}

TEST(GtpParamEntry, ParamsMustMatchTheGrid) {
  GtpElection e;
  e.global_rank = 1, e.caller = default_world_grids(1, 2, 1, 1, 1, 1, 1).value();
  EXPECT_EQ(gtp_composite_tensor(entry_params(e, 1, 2, 0, 0)).error().kind, ErrorKind::invalid_layout_parameter);
  EXPECT_TRUE(gtp_composite_tensor(entry_params(e, 1, 2, 0, 1)).ok());
}

// Spec 4.10 / addendum E: Mamba's in_proj asked for the shard split still gathers, and its gathered
// tensor carries the GTP-inclusive id (g + G*d), so only GTP peer 0 of DP replica 0 writes.
TEST(MambaInProj, ShardSplitRequestStillGathers) {
  GtpFactoryParams p;
  p.key = "decoder.layers.1.mixer.in_proj.weight";
  p.layout = mamba_in_proj_layout({16, 8, 4}).value();
  p.tp_size = 1, p.gtp_size = 2, p.gtp_rank = 1, p.pad_alignment = 16, p.cols = 2;
  p.replica_id = ReplicaId::tuple({0, 0, 1});  // GTP-excluded DP rank 1
  p.shard = TensorValue::of_storage(5, {32, 2});
  p.mixer = GtpMixer::mamba;
  const StateNode split = make_gtp_factory(GtpSaveDesign::shard_split, p).value().build().value();
  GtpFactoryParams gather = p;
  gather.replica_id = ReplicaId::tuple({0, 0, 3});  // g + G*d = 1 + 2*1
  const StateNode gathered = make_gtp_factory(GtpSaveDesign::gather, gather).value().build().value();
  EXPECT_EQ(split, gathered);
  ASSERT_TRUE(split.is_list());
  const auto* first = split.list().front().leaf_if<ShardedTensor>();
  ASSERT_NE(first, nullptr);
  EXPECT_TRUE(first->has_regular_grid());
  EXPECT_NE(first->data->blocks.front().storage, 5u);  // a gathered buffer, not the shard
  p.mixer = GtpMixer::gdp;
  EXPECT_NE(make_gtp_factory(GtpSaveDesign::shard_split, p).value().build().value(), gathered);
}

}  // namespace
}  // namespace ih
