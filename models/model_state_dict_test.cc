// `model dump`'s reference side: the rank decomposition of a layout and typed errors for invalid
// configurations (docs/cli.md, model dump).
#include "models/model_state_dict.h"

#include <gtest/gtest.h>

#include <map>

#include "models/flat_state.h"

namespace ih {
namespace {

TEST(ModelDump, DataParallelSizeLetsExpertsTileTheRanks) {
  EXPECT_EQ(data_parallel_size({.tp = 2}), 1);
  EXPECT_EQ(data_parallel_size({.tp = 1, .ep = 2}), 2);
  EXPECT_EQ(data_parallel_size({.tp = 2, .ep = 2}), 1);
  EXPECT_EQ(data_parallel_size({.tp = 2, .ep = 4}), 2);
  EXPECT_EQ(data_parallel_size({.tp = 4, .ep = 2}), 1);
  EXPECT_EQ(data_parallel_size({.tp = 2, .ep = 3, .etp = 2}), 3);
  EXPECT_EQ(world_size({.tp = 2, .pp = 2, .ep = 4, .gtp = 2}), 16);
  // A DP size asked for: the least multiple of it that the expert grid allows.
  EXPECT_EQ(data_parallel_size({.tp = 1, .dp = 2}), 2);
  EXPECT_EQ(data_parallel_size({.tp = 1, .ep = 4, .dp = 2}), 4);
  EXPECT_EQ(data_parallel_size({.tp = 2, .ep = 4, .dp = 3}), 6);
  EXPECT_EQ(world_size({.tp = 1, .dp = 2, .gtp = 2}), 4);
  EXPECT_FALSE(rank_layout({.dp = 0}, 0).ok());
}

TEST(ModelDump, ContextParallelRanksSitBetweenGtpAndDp) {
  EXPECT_EQ(world_size({.tp = 2, .dp = 2, .cp = 2}), 8);
  // rank = t + T*(g + G*(c + C*(d + D*p))); dp_rank is the DP x CP rank c + C*d (Megatron's dp_cp group).
  auto r = rank_layout({.tp = 2, .pp = 2, .gtp = 2, .cp = 2}, 13);  // t 1, g 0, c 1, p 1
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tp_rank, 1);
  EXPECT_EQ(r->gtp_rank, 0);
  EXPECT_EQ(r->dp_rank, 1);
  EXPECT_EQ(r->pp_rank, 1);
  EXPECT_FALSE(rank_layout({.cp = 0}, 0).ok());
  ModelDumpSpec mamba{.model = ModelKind::hybrid, .pattern = "M-"};
  mamba.sizes.tp = 4, mamba.sizes.cp = 4;  // 8 Mamba heads over TP x CP 16
  EXPECT_NE(validate_model_dump(mamba, 0).error().message.find("mamba_heads by tp x cp"), std::string::npos);
}

// Spec: each chunk of the saved state has exactly one main replica in the world. Under GTP x DP the GTP ranks
// hold different shards (each its own writer) and the DP replicas of one shard share it: one of them is main;
// the CP ranks hold the same parameters, replicas like DP's.
void expect_one_main_replica_per_chunk(const ModelDumpSpec& spec) {
  std::map<std::pair<std::string, Shape>, int> mains, holders;
  for (std::int64_t rank = 0; rank < world_size(spec.sizes); ++rank) {
    auto dict = model_state_dict(spec, rank);
    ASSERT_TRUE(dict.ok()) << dict.error().message;
    for (const FlatEntry& e : flatten(StateNode(*dict)))
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        ++holders[{t->key, t->global_offset}];
        mains[{t->key, t->global_offset}] += t->is_main_replica() ? 1 : 0;
      }
  }
  ASSERT_FALSE(holders.empty());
  for (const auto& [chunk, held] : holders) {
    EXPECT_GE(held, 2) << chunk.first;  // every chunk is held by its DP replicas at least
    EXPECT_EQ(mains[chunk], 1) << chunk.first << " [" << chunk.second.size() << " dims]";
  }
}

TEST(ModelDump, GtpTimesDpAndCpWorldsHaveOneMainReplicaPerChunk) {
  ModelDumpSpec gtp_dp{.model = ModelKind::hybrid, .pattern = "M*-"};
  gtp_dp.sizes.gtp = 2, gtp_dp.sizes.dp = 2;
  expect_one_main_replica_per_chunk(gtp_dp);
  ModelDumpSpec cp{.model = ModelKind::hybrid, .pattern = "M-M-"};
  cp.sizes.tp = 2, cp.sizes.cp = 2;
  expect_one_main_replica_per_chunk(cp);
}

TEST(ModelDump, RankDecomposesTpInnermostThenDpThenPp) {
  const RankLayout sizes{.tp = 2, .pp = 2, .ep = 4};  // dp 2: ranks t + 2*(d + 2*p)
  auto r = rank_layout(sizes, 6);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->tp_rank, 0);
  EXPECT_EQ(r->dp_rank, 1);
  EXPECT_EQ(r->pp_rank, 1);
  EXPECT_EQ(r->etp_rank, 0);  // expert grid over the stage's 4 ranks: etp 1, ep 4, edp 1
  EXPECT_EQ(r->ep_rank, 2);
  EXPECT_EQ(r->expert_dp_rank, 0);
  auto r5 = rank_layout(sizes, 5);
  ASSERT_TRUE(r5.ok());
  EXPECT_EQ(r5->tp_rank, 1);
  EXPECT_EQ(r5->ep_rank, 1);
  auto e = rank_layout({.tp = 1, .ep = 2, .etp = 1}, 1);  // dp 2, expert dp 1
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->dp_rank, 1);
  EXPECT_EQ(e->ep_rank, 1);
  EXPECT_EQ(e->expert_dp_rank, 0);
  auto g = rank_layout({.tp = 2, .gtp = 2}, 3);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(g->gtp_rank, 1);
  EXPECT_EQ(g->tp_rank, 1);
  // Megatron injects GTP after TP (tp-gtp_remat-...): rank 1 is t 1 g 0, rank 2 is t 0 g 1; DP outside both.
  auto g1 = rank_layout({.tp = 2, .ep = 4, .gtp = 2}, 1);  // dp 2
  ASSERT_TRUE(g1.ok());
  EXPECT_EQ(g1->tp_rank, 1);
  EXPECT_EQ(g1->gtp_rank, 0);
  auto g6 = rank_layout({.tp = 2, .ep = 4, .gtp = 2}, 6);
  ASSERT_TRUE(g6.ok());
  EXPECT_EQ(g6->tp_rank, 0);
  EXPECT_EQ(g6->gtp_rank, 1);
  EXPECT_EQ(g6->dp_rank, 1);
  EXPECT_EQ(g6->ep_rank, 2);  // the stage's expert grid spans all 8 ranks: etp 1, ep 4, edp 2
  EXPECT_EQ(g6->expert_dp_rank, 1);
}

TEST(ModelDump, InvalidConfigurationsAreTypedErrors) {
  ModelDumpSpec spec;
  spec.sizes.tp = 3;  // 8 heads
  auto heads = validate_model_dump(spec, 0);
  ASSERT_FALSE(heads.ok());
  EXPECT_EQ(heads.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(heads.error().message.find("num_attention_heads"), std::string::npos);
  spec.sizes.tp = 2;
  auto outside = validate_model_dump(spec, 2);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("outside the world of 2 ranks"), std::string::npos);
  spec.sizes.tp = 1, spec.sizes.pp = 2, spec.layers = 3;
  EXPECT_NE(validate_model_dump(spec, 0).error().message.find("not divisible by pp"), std::string::npos);
  ModelDumpSpec hybrid{.model = ModelKind::hybrid, .pattern = "M*X"};
  EXPECT_FALSE(validate_model_dump(hybrid, 0).ok());
  hybrid.pattern = "M*|M*";
  EXPECT_NE(validate_model_dump(hybrid, 0).error().message.find("--pp is 1"), std::string::npos);
  hybrid.pattern = "M*E";
  EXPECT_NE(validate_model_dump(hybrid, 0).error().message.find("--experts is 0"), std::string::npos);
  ModelDumpSpec experts;
  experts.config.num_experts = 4, experts.sizes.ep = 3;
  EXPECT_NE(validate_model_dump(experts, 0).error().message.find("num_experts by ep"), std::string::npos);
  EXPECT_FALSE(rank_layout({.tp = 0}, 0).ok());
  ModelDumpSpec tp8;  // 4 Mamba groups: only a model with Mamba layers is refused at TP 8
  tp8.sizes.tp = 8;
  EXPECT_TRUE(validate_model_dump(tp8, 7).ok());
  tp8.model = ModelKind::hybrid, tp8.pattern = "M*-";
  EXPECT_NE(validate_model_dump(tp8, 7).error().message.find("mamba_groups by tp"), std::string::npos);
}

TEST(ModelDump, DumpsTheRankOfTheLayout) {
  ModelDumpSpec spec;
  spec.sizes.tp = 2;
  auto dict = model_state_dict(spec, 1);
  ASSERT_TRUE(dict.ok()) << dict.error().message;
  const auto& qkv = std::get<ShardedTensor>((*dict)[1].value.leaf());
  EXPECT_EQ(qkv.key, "decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.global_offset, (Shape{0, 384, 0}));  // tp rank 1 of 768 rows
}

}  // namespace
}  // namespace ih
