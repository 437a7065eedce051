// GDP layers and GTP in the synthetic hybrid model (spec 4.11, addendum H): the in_proj factory a
// GDP or Mamba mixer builds under GTP, its optimizer entries, and what GPT->Hybrid retargeting
// makes of a fresh layer's factory.
#include <gtest/gtest.h>

#include "models/flat_state.h"
#include "models/retarget.h"
#include "models/synthetic_model.h"

namespace ih {
namespace {

const StateNode* entry(const StateNode& tree, const std::string& path) {
  const StateNode* node = tree.find(path);
  return node;
}

ModelConfig gdp_config(GtpSaveDesign design) {
  ModelConfig c;
  c.ssm_mixer = "gdp", c.gdp_design = design, c.pad_alignment = 32;
  return c;
}

// Dims: d_inner 256, ngroups*d_state 64, heads 8, M 3: D = 4*256 + 4*64 + 4*8 = 1312 rows at TP 1.
TEST(SyntheticGtp, GdpInProjIsTheShardSplitFactory) {
  RankLayout l;
  l.gtp = 4, l.gtp_rank = 3;
  const StateNode tree =
      hybrid_sharded_state_dict(gdp_config(GtpSaveDesign::shard_split), "M*-", l, OptimizerStates::adam()).value();
  const auto* f = entry(tree, "model.decoder.layers.0.mixer.in_proj.weight")->leaf_if<ShardedTensorFactory>();
  ASSERT_NE(f, nullptr);
  // A = 32*4 = 128; 1312 mod 128 = 32, pad 96, D' = 1408, R = 352; rank 3 holds rows 1056..1407: 256 real.
  EXPECT_EQ(f->data->shape, (Shape{352, 256}));
  const StateNode built = f->build().value();
  ASSERT_TRUE(built.is_list());
  std::int64_t rows = 0;
  for (const StateNode& n : built.list()) rows += n.leaf_if<ShardedTensor>()->local_shape[0];
  EXPECT_EQ(rows, 256);
  const auto* opt =
      entry(tree, "optimizer.state.model.decoder.layers.0.mixer.in_proj.weight.exp_avg")->leaf_if<ShardedTensor>();
  ASSERT_NE(opt, nullptr);
  EXPECT_EQ(opt->key, "optimizer.state.exp_avg.decoder.layers.0.mixer.in_proj.weight");
  EXPECT_EQ(opt->global_shape, (Shape{1408, 256}));  // the padded per-shard description (4.7.7)
  EXPECT_EQ(opt->global_offset, (Shape{3 * 352, 0}));
  EXPECT_TRUE(opt->allow_shape_mismatch);
}

// Spec 4.11: a fresh layer's in_proj factory becomes LNP(factory.data). With the shard split that
// is the (R, C) parameter shard; with the gather design (Mamba, or GDP on the baseline) it is the
// gathered (D, C) tensor, which load_state_dict would be handed for an (R, C) parameter.
TEST(SyntheticGtp, FreshInProjUnderGtpBecomesLnpOfFactoryData) {
  RankLayout l;
  l.gtp = 2, l.gtp_rank = 1;
  const GptCompatLayerMaps maps = gpt_compatible_layer_maps(std::string_view("M*-")).value();
  for (const auto& [config, rows] :
       std::vector<std::pair<ModelConfig, std::int64_t>>{{gdp_config(GtpSaveDesign::shard_split), 672},
                                                         {gdp_config(GtpSaveDesign::gather), 1312},
                                                         {ModelConfig{}, 648}}) {
    StateNode tree = hybrid_sharded_state_dict(config, "M*-", l).value();
    const ShardedTensorFactory before =
        *entry(tree, "model.decoder.layers.0.mixer.in_proj.weight")->leaf_if<ShardedTensorFactory>();
    ASSERT_TRUE(retarget_sharded_state_dict(tree, maps).ok());
    const auto* lnp = entry(tree, "model.decoder.layers.0.mixer.in_proj.weight")->leaf_if<LocalNonpersistent>();
    ASSERT_NE(lnp, nullptr);
    EXPECT_EQ(lnp->payload, Payload(*before.data));
    EXPECT_EQ(std::get<TensorValue>(lnp->payload).shape[0], rows) << config.ssm_mixer;
  }
}

TEST(SyntheticGtp, AllRanksEnumeratesGtp) {
  RankLayout sizes;
  sizes.tp = 2, sizes.gtp = 4;
  EXPECT_EQ(all_ranks(sizes).size(), 8u);
  ModelConfig bad;
  bad.ssm_mixer = "gdn";
  EXPECT_EQ(hybrid_sharded_state_dict(bad, "M*-", {}).error().kind, ErrorKind::invalid_argument);
}

}  // namespace
}  // namespace ih
