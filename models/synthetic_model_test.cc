// Pins the spec 2.3 worked example and the spec 2.9 round trip on synthetic state dicts.
#include "models/synthetic_model.h"

#include <gtest/gtest.h>

#include <map>

#include "models/flat_state.h"
#include "models/retarget.h"

namespace ih {
namespace {

const ShardedTensor& tensor_at(const StateNode& tree, const std::string& path) {
  const StateNode* node = tree.find(DictKey(path));
  EXPECT_NE(node, nullptr) << path;
  return std::get<ShardedTensor>(node->leaf());
}

TEST(SyntheticGpt, SpecWorkedExampleTp2) {
  const ModelConfig config;  // hidden 256, 8 heads, kv 32, FFN 1024, no bias
  for (std::int64_t t = 0; t < 2; ++t) {
    const StateNode gpt = gpt_sharded_state_dict(config, 2, {.tp = 2, .tp_rank = t, .dp_rank = 3}).value();
    const ShardedTensor& qkv = tensor_at(gpt, "model.decoder.layers.1.self_attention.linear_qkv.weight");
    EXPECT_EQ(qkv.key, "decoder.layers.self_attention.linear_qkv.weight");
    EXPECT_EQ(qkv.local_shape, (Shape{384, 256}));
    EXPECT_EQ(qkv.global_shape, (Shape{2, 768, 256}));
    EXPECT_EQ(qkv.global_offset, (Shape{1, 384 * t, 0}));
    EXPECT_EQ(qkv.axis_fragmentations, (Shape{2, 2, 1}));
    EXPECT_EQ(qkv.replica_id, ReplicaId::tuple({0, 0, 3}));
    const ShardedTensor& norm = tensor_at(gpt, "model.decoder.layers.0.self_attention.linear_qkv.layer_norm_weight");
    EXPECT_EQ(norm.global_shape, (Shape{2, 256}));
    EXPECT_EQ(norm.global_offset, (Shape{0, 0}));
    EXPECT_EQ(norm.replica_id, ReplicaId::tuple({0, t, 3}));
    const ShardedTensor& proj = tensor_at(gpt, "model.decoder.layers.1.self_attention.linear_proj.weight");
    EXPECT_EQ(proj.local_shape, (Shape{256, 128}));
    EXPECT_EQ(proj.global_shape, (Shape{2, 256, 256}));
    EXPECT_EQ(proj.global_offset, (Shape{1, 0, 128 * t}));
    EXPECT_EQ(proj.axis_fragmentations, (Shape{2, 1, 2}));
    const ShardedTensor& fc1 = tensor_at(gpt, "model.decoder.layers.1.mlp.linear_fc1.weight");
    EXPECT_EQ(fc1.global_shape, (Shape{2, 1024, 256}));
    EXPECT_EQ(fc1.global_offset, (Shape{1, 512 * t, 0}));
    const ShardedTensor& fc2 = tensor_at(gpt, "model.decoder.layers.1.mlp.linear_fc2.weight");
    EXPECT_EQ(fc2.local_shape, (Shape{256, 512}));
    EXPECT_EQ(fc2.global_offset, (Shape{1, 0, 512 * t}));
    const auto& extra = std::get<ShardedObject>(
        gpt.find(DictKey("model.decoder.layers.1.self_attention.linear_qkv._extra_state"))->leaf());
    EXPECT_EQ(extra.global_shape, (Shape{2}));
    EXPECT_EQ(extra.global_offset, (Shape{1}));
    const ShardedTensor& final_norm = tensor_at(gpt, "model.decoder.final_layernorm.weight");
    EXPECT_EQ(final_norm.global_shape, (Shape{256}));
    EXPECT_EQ(final_norm.replica_id, ReplicaId::tuple({0, t, 3}));
    EXPECT_EQ(gpt.find(DictKey("model.output_layer._extra_state")), nullptr);
  }
}

TEST(SyntheticGpt, GatedFc1BuildsTwoPiecesPerRank) {
  ModelConfig config;
  config.gated_mlp = true;
  for (std::int64_t t = 0; t < 2; ++t) {
    const StateNode gpt = gpt_sharded_state_dict(config, 2, {.tp = 2, .tp_rank = t}).value();
    const auto& factory =
        std::get<ShardedTensorFactory>(gpt.find(DictKey("model.decoder.layers.1.mlp.linear_fc1.weight"))->leaf());
    const StateNode built = factory.build().value();
    ASSERT_EQ(built.list().size(), 2u);
    const auto& w = std::get<ShardedTensor>(built.list()[0].leaf());
    const auto& v = std::get<ShardedTensor>(built.list()[1].leaf());
    EXPECT_EQ(w.local_shape, (Shape{512, 256}));
    EXPECT_EQ(w.global_shape, (Shape{2, 2048, 256}));
    EXPECT_EQ(w.global_offset, (Shape{1, 512 * t, 0}));
    EXPECT_EQ(v.global_offset, (Shape{1, 512 * (t + 2), 0}));
    EXPECT_EQ(w.axis_fragmentations, (Shape{2, 4, 1}));
  }
}

TEST(SyntheticGpt, GatedFc1BiasIsASwigluFactoryLikeItsWeight) {
  // Megatron's MLP applies its SwiGLU factory to fc1's weight and bias alike: the bias' 2F/T values are
  // W's bias (chunk t of 2T) then V's (chunk t + T).
  ModelConfig config;
  config.gated_mlp = config.add_bias = true;
  for (std::int64_t t = 0; t < 2; ++t) {
    const StateNode gpt = gpt_sharded_state_dict(config, 2, {.tp = 2, .tp_rank = t}).value();
    const auto* factory =
        std::get_if<ShardedTensorFactory>(&gpt.find(DictKey("model.decoder.layers.1.mlp.linear_fc1.bias"))->leaf());
    ASSERT_NE(factory, nullptr) << "fc1's bias is not a factory on TP rank " << t;
    const StateNode built = factory->build().value();
    ASSERT_EQ(built.list().size(), 2u);
    const auto& w = std::get<ShardedTensor>(built.list()[0].leaf());
    const auto& v = std::get<ShardedTensor>(built.list()[1].leaf());
    EXPECT_EQ(w.local_shape, (Shape{512}));
    EXPECT_EQ(w.global_shape, (Shape{2, 2048}));
    EXPECT_EQ(w.global_offset, (Shape{1, 512 * t}));
    EXPECT_EQ(v.global_offset, (Shape{1, 512 * (t + 2)}));
  }
}

TEST(SyntheticHybrid, PerLayerKeysWithoutLayerAxis) {
  const StateNode hybrid = hybrid_sharded_state_dict(ModelConfig{}, "M*-M*-", {.tp = 2, .tp_rank = 1}).value();
  const ShardedTensor& qkv = tensor_at(hybrid, "model.decoder.layers.4.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.key, "decoder.layers.4.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.local_shape, (Shape{384, 256}));
  EXPECT_EQ(qkv.global_shape, (Shape{768, 256}));
  EXPECT_EQ(qkv.global_offset, (Shape{384, 0}));
  EXPECT_EQ(qkv.axis_fragmentations, (Shape{2, 1}));
  const auto& extra =
      std::get<ShardedObject>(hybrid.find(DictKey("model.decoder.layers.5.mlp.linear_fc2._extra_state"))->leaf());
  EXPECT_EQ(extra.global_shape, (Shape{1}));
  EXPECT_EQ(extra.global_offset, (Shape{0}));
  EXPECT_NE(hybrid.find(DictKey("model.output_layer._extra_state")), nullptr);
  EXPECT_NE(hybrid.find(DictKey("model.decoder.final_norm.weight")), nullptr);
}

TEST(SyntheticHybrid, PipesSelectVirtualStages) {
  // Spec 1.6 table: rank 1 holds segments 1 (offset 6) and 3 (offset 11).
  const StateNode hybrid =
      hybrid_sharded_state_dict(ModelConfig{}, "M*-M*-|*-|M*-|*-", {.pp = 2, .pp_rank = 1}).value();
  EXPECT_EQ(tensor_at(hybrid, "model0.decoder.layers.0.self_attention.linear_qkv.weight").key,
            "decoder.layers.6.self_attention.linear_qkv.weight");
  EXPECT_EQ(tensor_at(hybrid, "model1.decoder.layers.0.self_attention.linear_qkv.weight").key,
            "decoder.layers.11.self_attention.linear_qkv.weight");
  EXPECT_NE(hybrid.find(DictKey("model1.decoder.final_norm.weight")), nullptr);
}

using Box = std::tuple<std::string, Shape, Shape>;

std::multiset<Box> boxes(const StateNode& tree) {
  StateNode built = tree;
  EXPECT_TRUE(apply_factories(built).ok());
  std::multiset<Box> out;
  visit_leaves(built, [&](const std::string&, const Leaf& leaf) {
    if (const auto* t = std::get_if<ShardedTensor>(&leaf)) out.insert({t->key, t->global_shape, t->global_offset});
    if (const auto* o = std::get_if<ShardedObject>(&leaf)) out.insert({o->unique_key(), {}, {}});
  });
  return out;
}

TEST(SyntheticRoundTrip, RetargetedHybridMatchesGptAtTheSameLayout) {
  for (const bool gated : {false, true}) {
    ModelConfig config;
    config.gated_mlp = gated;
    for (std::int64_t t = 0; t < 2; ++t) {
      const RankLayout layout{.tp = 2, .tp_rank = t, .dp_rank = 1};
      StateNode hybrid = hybrid_sharded_state_dict(config, "M*-M*-", layout, OptimizerStates::adam()).value();
      ASSERT_TRUE(
          retarget_sharded_state_dict(hybrid, gpt_compatible_layer_maps(std::string_view("M*-M*-")).value()).ok());
      const StateNode gpt = gpt_sharded_state_dict(config, 2, layout, OptimizerStates::adam()).value();
      EXPECT_EQ(boxes(hybrid), boxes(gpt)) << "gated " << gated << " tp_rank " << t;
    }
  }
}

TEST(SyntheticRoundTrip, MoeExpertAxisFollowsTheLayerAxis) {
  ModelConfig config;
  config.num_experts = 4;
  const RankLayout layout{.tp = 2, .tp_rank = 0, .ep = 2, .ep_rank = 1, .etp = 2, .etp_rank = 1};
  StateNode hybrid = hybrid_sharded_state_dict(config, "*E*E", layout).value();
  ASSERT_TRUE(retarget_sharded_state_dict(hybrid, gpt_compatible_layer_maps(std::string_view("*E*E")).value()).ok());
  EXPECT_EQ(boxes(hybrid), boxes(gpt_sharded_state_dict(config, 2, layout).value()));
  const auto& extra = std::get<ShardedObject>(
      hybrid.find(DictKey("model.decoder.layers.3.mlp.experts.1.mlp.experts.experts.linear_fc1._extra_state"))->leaf());
  EXPECT_EQ(extra.unique_key(), "decoder.layers.mlp.experts.experts.linear_fc1._extra_state/shard_1.3_2.4");
}

TEST(SyntheticModel, BadLayoutsNameTheParameter) {
  auto bad_tp = gpt_sharded_state_dict(ModelConfig{}, 2, {.tp = 3, .tp_rank = 0});
  ASSERT_FALSE(bad_tp.ok());
  EXPECT_NE(bad_tp.error().message.find("num_attention_heads by tp"), std::string::npos);
  EXPECT_EQ(gpt_sharded_state_dict(ModelConfig{}, 3, {.pp = 2}).error().kind, ErrorKind::invalid_argument);
  EXPECT_EQ(hybrid_sharded_state_dict(ModelConfig{}, "M*G-", {}).error().kind, ErrorKind::invalid_argument);
}

TEST(SyntheticModel, OnlyAModelWithMambaLayersNeedsTpToDivideTheMambaGroups) {
  const ModelConfig config;  // 4 Mamba groups: TP 8 divides every other dimension
  const RankLayout tp8{.tp = 8, .tp_rank = 7};
  EXPECT_TRUE(gpt_sharded_state_dict(config, 2, tp8).ok());
  EXPECT_TRUE(hybrid_sharded_state_dict(config, "*-*-", tp8).ok());
  const auto with_mamba = hybrid_sharded_state_dict(config, "M*-", tp8);
  ASSERT_FALSE(with_mamba.ok());
  EXPECT_EQ(with_mamba.error().message, "mamba_groups by tp: 4 is not divisible by 8");
}

}  // namespace
}  // namespace ih
