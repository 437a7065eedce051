// Pins spec 2.4-2.7 examples; expected values are written from the spec text.
#include "models/retarget.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

GptCompatLayerMaps maps_of(const char* text) { return gpt_compatible_layer_maps(std::string_view(text)).value(); }

ShardedTensor plain_tensor(std::string key, Shape local) {
  return ShardedTensor::from_rank_offsets(std::move(key), std::move(local), {}).value();
}

StateNode one(std::string path, Leaf leaf) {
  return StateNode(StateDict{{std::move(path), StateNode(std::move(leaf))}});
}

const Leaf& only_leaf(const StateNode& tree) { return tree.dict().front().value.leaf(); }

TEST(Retarget, AttentionTensorGainsLayerAxis) {
  StateNode tree = one("a", plain_tensor("decoder.layers.1.self_attention.linear_qkv.weight", {4}));
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-")).ok());
  const auto& t = std::get<ShardedTensor>(only_leaf(tree));
  EXPECT_EQ(t.key, "decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(t.prepend_axis_num, 1);
  EXPECT_EQ(t.global_shape, (Shape{1, 4}));
  EXPECT_EQ(t.global_offset, (Shape{0, 0}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{1, 1}));
  EXPECT_EQ(t.local_shape, (Shape{4}));
  EXPECT_TRUE(t.validate_metadata_integrity().ok());
}

TEST(Retarget, ShardedObjectPlaceholderIsReplacedOtherShapesPrepended) {
  StateNode tree(StateDict{
      {"fc2", StateNode(ShardedObject{"decoder.layers.5.mlp.linear_fc2._extra_state", ObjectRef{7}, {1}, {0}, {}})},
      {"experts", StateNode(ShardedObject{"decoder.layers.4.mlp.experts.linear_fc1._extra_state", {}, {8}, {3}, {}})},
  });
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-M*-")).ok());
  const auto& fc2 = std::get<ShardedObject>(tree.dict()[0].value.leaf());
  EXPECT_EQ(fc2.key, "decoder.layers.mlp.linear_fc2._extra_state");
  EXPECT_EQ(fc2.unique_key(), "decoder.layers.mlp.linear_fc2._extra_state/shard_1_2");
  const auto& experts = std::get<ShardedObject>(tree.dict()[1].value.leaf());
  EXPECT_EQ(experts.unique_key(), "decoder.layers.mlp.experts.linear_fc1._extra_state/shard_1.3_2.8");
}

TEST(Retarget, OptimizerKeysKeepPrefixAndAxis) {
  StateNode tree =
      one("opt", plain_tensor("optimizer.state.exp_avg.decoder.layers.1.self_attention.linear_qkv.weight", {4}));
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-")).ok());
  const auto& t = std::get<ShardedTensor>(only_leaf(tree));
  EXPECT_EQ(t.key, "optimizer.state.exp_avg.decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(t.global_offset, (Shape{0, 0}));
}

TEST(Retarget, FreshLayersAndOmittedKeysBecomeLocalWithTheirData) {
  ShardedTensor mamba = plain_tensor("decoder.layers.0.mixer.in_proj.weight", {3});
  mamba.data = TensorValue::of_storage(42, {3});
  StateNode tree(StateDict{
      {"m", StateNode(mamba)},
      {"mo", StateNode(ShardedObject{
                 "optimizer.state.exp_avg.decoder.layers.3.mixer.D._extra_state", ObjectRef{9}, {1}, {0}, {}})},
      {"extra", StateNode(ShardedObject{"output_layer._extra_state", ObjectRef{5}, {1}, {0}, {}})},
      {"out", StateNode(plain_tensor("output_layer.weight", {2}))},
  });
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-M*-")).ok());
  EXPECT_EQ(std::get<LocalNonpersistent>(tree.dict()[0].value.leaf()).payload,
            Payload(TensorValue::of_storage(42, {3})));
  EXPECT_EQ(std::get<LocalNonpersistent>(tree.dict()[1].value.leaf()).payload, Payload(ObjectRef{9}));
  EXPECT_EQ(std::get<LocalNonpersistent>(tree.dict()[2].value.leaf()).payload, Payload(ObjectRef{5}));
  EXPECT_EQ(std::get<ShardedTensor>(tree.dict()[3].value.leaf()).key, "output_layer.weight");
}

TEST(Retarget, FinalNormIsRenamedAnywhereInTheKey) {
  StateNode tree(StateDict{
      {"n", StateNode(plain_tensor("decoder.final_norm.weight", {4}))},
      {"o", StateNode(plain_tensor("optimizer.state.fp32_param.decoder.final_norm.weight", {4}))},
  });
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-")).ok());
  EXPECT_EQ(std::get<ShardedTensor>(tree.dict()[0].value.leaf()).key, "decoder.final_layernorm.weight");
  EXPECT_EQ(std::get<ShardedTensor>(tree.dict()[1].value.leaf()).key,
            "optimizer.state.fp32_param.decoder.final_layernorm.weight");
  EXPECT_EQ(std::get<ShardedTensor>(tree.dict()[0].value.leaf()).global_shape, (Shape{4}));  // no layer axis
}

TEST(Retarget, UnknownLayerIsAnError) {
  StateNode tree = one("x", plain_tensor("decoder.layers.7.mlp.linear_fc1.weight", {2}));
  auto status = retarget_sharded_state_dict(tree, maps_of("M*-"));
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind, ErrorKind::unknown_hybrid_layer);
  EXPECT_NE(status.error().message.find("refers to hybrid layer 7"), std::string::npos);
}

TEST(Retarget, UnevenTensorCannotGainTheAxis) {
  ShardedTensor uneven = plain_tensor("decoder.layers.1.self_attention.linear_qkv.weight", {3});
  uneven.axis_fragmentations.reset();
  StateNode tree = one("x", uneven);
  EXPECT_EQ(retarget_sharded_state_dict(tree, maps_of("M*-")).error().kind, ErrorKind::uneven_prepend);
}

TEST(Retarget, LayerIndexIsParsedLikePythonInt) {
  const auto match = find_decoder_layer("model.decoder.layers.01.decoder.layers.2.x");
  ASSERT_TRUE(match.has_value());
  EXPECT_EQ(match->index, 1);  // first match, leading zero allowed
  EXPECT_EQ(match->begin, 6u);
  EXPECT_FALSE(find_decoder_layer("decoder.layers.x.1.").has_value());
  EXPECT_FALSE(find_decoder_layer("decoder.layers.12").has_value());
}

/// A factory whose build emits two row halves of its data under one key, like SwiGLU's W and V.
class TwoHalvesBuilder : public FactoryBuilder {
 public:
  std::string name() const override { return "two_halves"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>&,
                          const ReplicaId& replica) const override {
    StateList halves;
    for (std::int64_t half = 0; half < 2; ++half) {
      IH_TRY_ASSIGN(t, ShardedTensor::from_rank_offsets(key, {2, 4}, {{0, half, 2}}, replica));
      halves.push_back(StateNode(t));
    }
    return StateNode(std::move(halves));
  }
  Result<TensorValue> merge(const StateNode&) const override { return TensorValue::zeros({4, 4}); }
};

TEST(Retarget, FactoryBuildIsWrappedExactlyOnce) {
  ShardedTensorFactory factory{
      "decoder.layers.2.mlp.linear_fc1.weight", std::nullopt, {}, std::make_shared<TwoHalvesBuilder>(), {}};
  StateNode tree = one("fc1", factory);
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps_of("M*-M*-")).ok());
  const auto& wrapped = std::get<ShardedTensorFactory>(only_leaf(tree));
  EXPECT_EQ(wrapped.key, "decoder.layers.mlp.linear_fc1.weight");
  auto built = wrapped.build();
  ASSERT_TRUE(built.ok());
  for (const StateNode& piece : built->list()) {
    const auto& t = std::get<ShardedTensor>(piece.leaf());
    EXPECT_EQ(t.key, "decoder.layers.mlp.linear_fc1.weight");
    EXPECT_EQ(t.global_shape, (Shape{2, 4, 4}));
    EXPECT_EQ(t.global_offset[0], 0);
    EXPECT_EQ(t.prepend_axis_num, 1);
  }
}

TEST(Retarget, SecondPassChangesNothing) {
  StateNode tree(StateDict{
      {"a", StateNode(plain_tensor("decoder.layers.1.self_attention.linear_qkv.weight", {4}))},
      {"n", StateNode(plain_tensor("decoder.final_norm.weight", {4}))},
      {"m", StateNode(plain_tensor("decoder.layers.0.mixer.D", {4}))},
  });
  const GptCompatLayerMaps maps = maps_of("M*-");
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps).ok());
  const StateNode once = tree;
  ASSERT_TRUE(retarget_sharded_state_dict(tree, maps).ok());
  EXPECT_EQ(tree, once);
}

TEST(FsdpRetarget, SpecExampleRecoversModulePrefix) {
  const std::vector<std::string> checkpoint_keys = {
      "optimizer.state.module.module.decoder.layers.0.self_attention.linear_qkv.weight"};
  auto key =
      retarget_fsdp_key(DictKey(std::string("module.module.module.decoder.layers.1.self_attention.linear_qkv.weight")),
                        maps_of("M*-"), &checkpoint_keys);
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(to_string(key->value()), "module.module.decoder.layers.0.self_attention.linear_qkv.weight");

  StateNode tree(StateDict{
      {"module.module.module.decoder.layers.1.self_attention.linear_qkv.weight", StateNode(PlainValue{"T"})}});
  auto out = retarget_fsdp_state_dict(tree, maps_of("M*-"), checkpoint_keys, "optimizer.state");
  ASSERT_TRUE(out.ok());
  ASSERT_EQ(out->dict().size(), 1u);
  EXPECT_EQ(to_string(out->dict()[0].key), "module.module.decoder.layers.0.self_attention.linear_qkv.weight");
}

TEST(FsdpRetarget, RenumbersDropsFreshAndKeepsIntKeys) {
  const GptCompatLayerMaps maps = maps_of("M*-M*-");
  EXPECT_EQ(
      to_string(
          retarget_fsdp_key(DictKey(std::string("decoder.layers.5.mlp.linear_fc2.weight")), maps, nullptr)->value()),
      "decoder.layers.1.mlp.linear_fc2.weight");
  EXPECT_FALSE(retarget_fsdp_key(DictKey(std::string("decoder.layers.3.mixer.D")), maps, nullptr)->has_value());
  EXPECT_FALSE(retarget_fsdp_key(DictKey(std::string("output_layer._extra_state")), maps, nullptr)->has_value());
  EXPECT_EQ(retarget_fsdp_key(DictKey(std::int64_t{3}), maps, nullptr)->value(), DictKey(std::int64_t{3}));
  EXPECT_EQ(to_string(retarget_fsdp_key(DictKey(std::string("decoder.final_norm.weight")), maps, nullptr)->value()),
            "decoder.final_layernorm.weight");
  EXPECT_EQ(retarget_fsdp_key(DictKey(std::string("decoder.layers.9.x")), maps, nullptr).error().kind,
            ErrorKind::unknown_hybrid_layer);
}

TEST(FsdpRetarget, AmbiguousOrMissingCapturesLeaveTheKey) {
  const GptCompatLayerMaps maps = maps_of("M*-");
  const std::vector<std::string> two = {"a.module.decoder.layers.0.self_attention.x",
                                        "b.decoder.layers.0.self_attention.x"};
  EXPECT_EQ(
      to_string(retarget_fsdp_key(DictKey(std::string("decoder.layers.1.self_attention.x")), maps, &two)->value()),
      "decoder.layers.0.self_attention.x");
  // A capture without module. prefixes still counts: "x.decoder..." gives the bare key itself.
  const std::vector<std::string> dotted = {"x.decoder.layers.0.self_attention.x"};
  EXPECT_EQ(
      to_string(
          retarget_fsdp_key(DictKey(std::string("module.decoder.layers.1.self_attention.x")), maps, &dotted)->value()),
      "decoder.layers.0.self_attention.x");
  const std::vector<std::string> glued = {"xdecoder.layers.0.self_attention.x"};  // no match glued to a word char
  EXPECT_EQ(
      to_string(
          retarget_fsdp_key(DictKey(std::string("module.decoder.layers.1.self_attention.x")), maps, &glued)->value()),
      "module.decoder.layers.0.self_attention.x");
}

TEST(FsdpRetarget, ContainersSurviveFilteringLeavesDoNot) {
  StateNode tree(StateDict{
      {"state", StateNode(StateDict{{"decoder.layers.1.self_attention.w", StateNode(PlainValue{"kept"})},
                                    {"decoder.layers.2.mlp.w", StateNode(PlainValue{"dropped"})}})},
      {"groups", StateNode(StateList{StateNode(PlainValue{"g"})})},
  });
  const std::vector<std::string> keys = {"optimizer.state.decoder.layers.0.self_attention.w"};
  auto out = retarget_fsdp_state_dict(tree, maps_of("M*-"), keys, "optimizer");
  ASSERT_TRUE(out.ok());
  const StateNode* state = out->find(DictKey(std::string("state")));
  ASSERT_NE(state, nullptr);
  ASSERT_EQ(state->dict().size(), 1u);
  EXPECT_EQ(to_string(state->dict()[0].key), "decoder.layers.0.self_attention.w");
  const StateNode* groups = out->find(DictKey(std::string("groups")));
  ASSERT_NE(groups, nullptr);
  EXPECT_EQ(groups->list().size(), 1u);  // list leaves are never filtered
}

}  // namespace
}  // namespace ih
