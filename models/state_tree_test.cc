// The tree utilities of spec 3.4-3.5 and 2.5: extract_matching_values, merge, the factory build and
// merge passes, and _prepend_gpt_layer_axis, with their error cases. Expected trees are written
// out by hand from the spec's rules.
#include "models/state_tree.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

StateNode plain(const std::string& repr) { return StateNode(PlainValue{repr}); }

ShardedTensor tensor(const std::string& key, Shape local = {4}) {
  return ShardedTensor::from_rank_offsets(key, std::move(local), {}).value();
}

ShardedObject object(const std::string& key) { return ShardedObject{key, std::nullopt, {1}, {0}, {}}; }

StateNode dict(std::vector<std::pair<DictKey, StateNode>> items) {
  StateDict out;
  for (auto& [key, value] : items) out.push_back({key, std::move(value)});
  return StateNode(std::move(out));
}

StateNode list(std::vector<StateNode> items) { return StateNode(StateList(std::move(items))); }

// Builds two row halves "<key>.0" and "<key>.1" of a 4-row tensor; merge returns storage 99
// with as many rows as the loaded list has entries and counts its calls.
class HalvesBuilder : public FactoryBuilder {
 public:
  std::string name() const override { return "halves"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>&,
                          const ReplicaId& replica) const override {
    ++builds;
    if (key == "fail") return make_error(ErrorKind::invalid_argument, "planted build failure");
    StateList out;
    for (std::int64_t k = 0; k < 2; ++k)
      out.push_back(StateNode(
          ShardedTensor::from_rank_offsets(key + "." + std::to_string(k), {2}, {{0, k, 2}}, replica).value()));
    return StateNode(std::move(out));
  }
  Result<TensorValue> merge(const StateNode& loaded) const override {
    ++merges;
    if (!loaded.is_list()) return make_error(ErrorKind::invalid_argument, "merge expects a list");
    return TensorValue::of_storage(99, {static_cast<std::int64_t>(loaded.list().size())});
  }
  mutable int builds = 0, merges = 0;
};

// A factory whose build output contains another factory (spec 3.4: not built again).
class NestingBuilder : public FactoryBuilder {
 public:
  explicit NestingBuilder(std::shared_ptr<const FactoryBuilder> inner) : inner_(std::move(inner)) {}
  std::string name() const override { return "nesting"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>&, const ReplicaId&) const override {
    return dict({{"inner", StateNode(ShardedTensorFactory{key + ".inner", std::nullopt, {}, inner_, {}})}});
  }
  Result<TensorValue> merge(const StateNode&) const override { return TensorValue::zeros({1}); }

 private:
  std::shared_ptr<const FactoryBuilder> inner_;
};

ShardedTensorFactory factory(const std::string& key, std::shared_ptr<const FactoryBuilder> builder) {
  return ShardedTensorFactory{key, TensorValue::of_storage(5, {4}), ReplicaId::scalar(0), std::move(builder), {}};
}

std::vector<std::string> leaf_paths(const StateNode& tree) {
  std::vector<std::string> out;
  visit_leaves(tree, [&](const std::string& path, const Leaf&) { out.push_back(path); });
  return out;
}

// ---------------------------------------------------------------------------------------------

TEST(StateNode, FindAndKinds) {
  const StateNode tree = dict({{"a", plain("1")}, {std::int64_t{3}, list({plain("2")})}});
  ASSERT_NE(tree.find("a"), nullptr);
  EXPECT_EQ(*tree.find("a"), plain("1"));
  ASSERT_NE(tree.find(std::int64_t{3}), nullptr);
  EXPECT_TRUE(tree.find(std::int64_t{3})->is_list());
  EXPECT_EQ(tree.find("3"), nullptr);  // an int key is not its string
  EXPECT_EQ(tree.find("b"), nullptr);
  EXPECT_EQ(plain("x").find("a"), nullptr);  // a leaf has no children
  EXPECT_EQ(to_string(DictKey{std::int64_t{-7}}), "-7");
  EXPECT_TRUE(StateNode().is_dict());  // the default node is an empty dict
}

TEST(StateTree, IsShardedBase) {
  EXPECT_TRUE(is_sharded_base(Leaf(tensor("t"))));
  EXPECT_TRUE(is_sharded_base(Leaf(object("o"))));
  EXPECT_TRUE(is_sharded_base(Leaf(factory("f", std::make_shared<HalvesBuilder>()))));
  EXPECT_FALSE(is_sharded_base(Leaf(LocalNonpersistent{})));
  EXPECT_FALSE(is_sharded_base(Leaf(PlainValue{"1"})));
  EXPECT_FALSE(is_sharded_base(Leaf(TensorValue::zeros({1}))));
}

TEST(StateTree, VisitLeavesInTreeOrderWithDottedPaths) {
  const StateNode tree = dict({{"b", plain("1")},
                               {"a", dict({{"x", plain("2")}, {std::int64_t{0}, list({plain("3"), plain("4")})}})},
                               {"e", list({})}});
  EXPECT_EQ(leaf_paths(tree), (std::vector<std::string>{"b", "a.x", "a.0.0", "a.0.1"}));
  EXPECT_EQ(leaf_paths(plain("1")), (std::vector<std::string>{""}));  // a root leaf has the empty path
}

TEST(StateTree, MapLeavesStopsAtTheFirstError) {
  StateNode tree = dict({{"a", plain("1")}, {"b", list({plain("2"), plain("3")})}, {"c", plain("4")}});
  int calls = 0;
  const Status s = map_leaves_inplace(tree, [&](Leaf& leaf) -> Status {
    ++calls;
    if (std::get<PlainValue>(leaf).repr == "2") return make_error(ErrorKind::invalid_argument, "stop");
    std::get<PlainValue>(leaf).repr += "!";
    return Ok{};
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "stop");
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(tree, dict({{"a", plain("1!")}, {"b", list({plain("2"), plain("3")})}, {"c", plain("4")}}));
}

// ---------------------------------------------------------------------------------------------
// extract_matching_values (spec 3.5)

TEST(ExtractMatchingValues, DictKeepsHierarchyAndEmptyContainers) {
  const StateNode tree = dict({{"a", StateNode(tensor("a"))},
                               {"b", plain("1")},
                               {"c", dict({})},
                               {"d", dict({{"e", StateNode(tensor("e"))}})},
                               {"f", dict({{"g", plain("2")}})},
                               {"h", list({})},
                               {"i", dict({{"j", StateNode(object("j"))}, {"k", plain("3")}})}});
  const auto [match, rest] = extract_matching_values(tree, is_sharded_base);
  // Matching parts of containers only when non-empty; non-matching parts when non-empty or when
  // the original container was empty (c and h).
  EXPECT_EQ(match, dict({{"a", StateNode(tensor("a"))},
                         {"d", dict({{"e", StateNode(tensor("e"))}})},
                         {"i", dict({{"j", StateNode(object("j"))}})}}));
  EXPECT_EQ(rest, dict({{"b", plain("1")},
                        {"c", dict({})},
                        {"f", dict({{"g", plain("2")}})},
                        {"h", list({})},
                        {"i", dict({{"k", plain("3")}})}}));
}

TEST(ExtractMatchingValues, ListsKeepOrderOrBecomeIndexDicts) {
  const StateNode tree = list({StateNode(tensor("t0")), plain("1"), StateNode(tensor("t2")),
                               dict({{"x", StateNode(tensor("x"))}, {"y", plain("2")}})});
  const auto [match, rest] = extract_matching_values(tree, is_sharded_base);
  EXPECT_EQ(match, list({StateNode(tensor("t0")), StateNode(tensor("t2")), dict({{"x", StateNode(tensor("x"))}})}));
  EXPECT_EQ(rest, list({plain("1"), dict({{"y", plain("2")}})}));
  const auto [match_d, rest_d] = extract_matching_values(tree, is_sharded_base, /*lists_as_dicts=*/true);
  EXPECT_EQ(match_d, dict({{std::int64_t{0}, StateNode(tensor("t0"))},
                           {std::int64_t{2}, StateNode(tensor("t2"))},
                           {std::int64_t{3}, dict({{"x", StateNode(tensor("x"))}})}}));
  EXPECT_EQ(rest_d, dict({{std::int64_t{1}, plain("1")}, {std::int64_t{3}, dict({{"y", plain("2")}})}}));
}

TEST(ExtractMatchingValues, SplitAndMergeGiveTheTreeBack) {
  // A tree without empty containers: merge(matching, non-matching) has every leaf again.
  const StateNode tree = dict({{"a", StateNode(tensor("a"))},
                               {"b", dict({{"c", plain("1")}, {"d", StateNode(object("d"))}})},
                               {"e", plain("2")}});
  auto [match, rest] = extract_matching_values(tree, is_sharded_base);
  ASSERT_TRUE(merge_into(match, rest).ok());
  // Order: the matching side's keys first, then new keys of the other side (dict merge appends).
  EXPECT_EQ(match, dict({{"a", StateNode(tensor("a"))},
                         {"b", dict({{"d", StateNode(object("d"))}, {"c", plain("1")}})},
                         {"e", plain("2")}}));
  EXPECT_EQ(leaf_paths(match).size(), leaf_paths(tree).size());
}

// ---------------------------------------------------------------------------------------------
// merge (spec 3.5)

TEST(Merge, DictsAddMissingKeysAndRecurse) {
  StateNode x1 = dict({{"a", plain("1")}, {"n", dict({{"p", plain("2")}})}});
  ASSERT_TRUE(merge_into(x1, dict({{"n", dict({{"q", plain("3")}})}, {"b", plain("4")}})).ok());
  EXPECT_EQ(x1, dict({{"a", plain("1")}, {"n", dict({{"p", plain("2")}, {"q", plain("3")}})}, {"b", plain("4")}}));
}

TEST(Merge, ListsMergeElementwise) {
  StateNode x1 = list({dict({{"a", plain("1")}}), dict({})});
  ASSERT_TRUE(merge_into(x1, list({dict({{"b", plain("2")}}), dict({{"c", plain("3")}})})).ok());
  EXPECT_EQ(x1, list({dict({{"a", plain("1")}, {"b", plain("2")}}), dict({{"c", plain("3")}})}));
}

TEST(Merge, ErrorCases) {
  StateNode lists = list({plain("1")});
  Status s = merge_into(lists, list({plain("1"), plain("2")}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::merge_list_length);
  EXPECT_NE(s.error().message.find("Cannot merge two lists with different lengths"), std::string::npos);

  StateNode leaves = dict({{"a", plain("1")}});
  s = merge_into(leaves, dict({{"a", plain("1")}}));  // two leaves at one path, even equal ones
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::merge_duplicate_leaf);
  EXPECT_NE(s.error().message.find("Duplicate non-dict and non-list values encountered"), std::string::npos);

  StateNode mixed = dict({{"a", dict({})}});
  EXPECT_EQ(merge_into(mixed, dict({{"a", list({})}})).error().kind, ErrorKind::merge_duplicate_leaf);
  StateNode deep = dict({{"a", list({dict({{"x", plain("1")}})})}});
  EXPECT_EQ(merge_into(deep, dict({{"a", list({dict({{"x", plain("2")}})})}})).error().kind,
            ErrorKind::merge_duplicate_leaf);
}

// ---------------------------------------------------------------------------------------------
// Factories: build, apply_factories, apply_factory_merges (spec 3.4)

TEST(Factory, BuildUsesTheFactorysOwnFields) {
  const auto builder = std::make_shared<HalvesBuilder>();
  ShardedTensorFactory f = factory("w", builder);
  f.replica_id = ReplicaId::scalar(2);
  const StateNode built = f.build().value();
  ASSERT_TRUE(built.is_list());
  ASSERT_EQ(built.list().size(), 2u);
  const ShardedTensor* second = built.list()[1].leaf_if<ShardedTensor>();
  ASSERT_NE(second, nullptr);
  EXPECT_EQ(second->key, "w.1");
  EXPECT_EQ(second->global_offset, (Shape{2}));
  EXPECT_EQ(second->replica_id, ReplicaId::scalar(2));
  EXPECT_EQ(builder->builds, 1);
  ShardedTensorFactory none{"w", std::nullopt, {}, nullptr, {}};
  EXPECT_EQ(none.build().error().kind, ErrorKind::invalid_argument);
  EXPECT_FALSE(f.without_data().data.has_value());
  EXPECT_TRUE(f.data.has_value());
}

TEST(Factory, EqualityComparesWhatTheyBuild) {
  const ShardedTensorFactory a = factory("w", std::make_shared<HalvesBuilder>());
  const ShardedTensorFactory b = factory("w", std::make_shared<HalvesBuilder>());
  EXPECT_EQ(a, b);  // different builder objects, same build
  ShardedTensorFactory c = a;
  c.key = "v";
  EXPECT_NE(a, c);
  const ShardedTensorFactory nesting =
      factory("w", std::make_shared<NestingBuilder>(std::make_shared<HalvesBuilder>()));
  EXPECT_NE(a, nesting);
}

TEST(ApplyFactories, ReplacesFactoriesInPlaceOneLevelOnly) {
  const auto halves = std::make_shared<HalvesBuilder>();
  StateNode tree = dict({{"f", StateNode(factory("w", halves))},
                         {"l", list({plain("1"), StateNode(factory("v", halves))})},
                         {"n", StateNode(factory("u", std::make_shared<NestingBuilder>(halves)))},
                         {"t", StateNode(tensor("t"))}});
  ASSERT_TRUE(apply_factories(tree).ok());
  EXPECT_EQ(halves->builds, 2);  // w and v; u.inner is not built
  EXPECT_EQ(leaf_paths(tree), (std::vector<std::string>{"f.0", "f.1", "l.0", "l.1.0", "l.1.1", "n.inner", "t"}));
  EXPECT_EQ(tree.find("f")->list()[0].leaf_if<ShardedTensor>()->key, "w.0");
  EXPECT_NE(tree.find("n")->find("inner")->leaf_if<ShardedTensorFactory>(), nullptr);
  EXPECT_NE(tree.find("t")->leaf_if<ShardedTensor>(), nullptr);

  StateNode failing = dict({{"a", StateNode(factory("fail", halves))}});
  const Status s = apply_factories(failing);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message, "planted build failure");
}

TEST(ApplyFactoryMerges, FactoryLeavesAreReplacedByTheirMerge) {
  const auto halves = std::make_shared<HalvesBuilder>();
  StateNode loaded = dict({{"f", list({plain("a"), plain("b")})},
                           {"keep", plain("1")},
                           {"l", list({plain("x"), list({plain("c"), plain("d"), plain("e")})})}});
  const StateNode factories =
      dict({{"f", StateNode(factory("w", halves))}, {"l", dict({{std::int64_t{1}, StateNode(factory("v", halves))}})}});
  ASSERT_TRUE(apply_factory_merges(loaded, factories).ok());
  EXPECT_EQ(halves->merges, 2);
  EXPECT_EQ(loaded, dict({{"f", StateNode(TensorValue::of_storage(99, {2}))},
                          {"keep", plain("1")},
                          {"l", list({plain("x"), StateNode(TensorValue::of_storage(99, {3}))})}}));
}

TEST(ApplyFactoryMerges, ListAgainstList) {
  const auto halves = std::make_shared<HalvesBuilder>();
  StateNode loaded = list({list({plain("a")}), plain("k")});
  const StateNode factories = list({StateNode(factory("w", halves)), dict({})});
  // The second pair is a leaf against an (empty) dict: not a dict/dict, list/list or list/dict pair.
  EXPECT_EQ(apply_factory_merges(loaded, factories).error().kind, ErrorKind::merge_duplicate_leaf);
  StateNode ok_loaded = list({list({plain("a")}), dict({{"x", plain("k")}})});
  ASSERT_TRUE(apply_factory_merges(ok_loaded, list({StateNode(factory("w", halves)), dict({})})).ok());
  EXPECT_EQ(ok_loaded, list({StateNode(TensorValue::of_storage(99, {1})), dict({{"x", plain("k")}})}));
}

TEST(ApplyFactoryMerges, ErrorCases) {
  const auto halves = std::make_shared<HalvesBuilder>();
  const auto kind = [](StateNode x1, const StateNode& x2) {
    const Status s = apply_factory_merges(x1, x2);
    return s.ok() ? std::string("ok") : std::string(model_kind_name(s.error().kind));
  };
  const StateNode f = StateNode(factory("w", halves));
  // A key of the factories tree missing from the loaded tree.
  StateNode x1 = dict({{"a", list({})}});
  const Status missing = apply_factory_merges(x1, dict({{"b", f}}));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().kind, ErrorKind::merge_key_mismatch);
  EXPECT_NE(missing.error().message.find("Different dict keys encountered in `apply_factory_merges`"),
            std::string::npos);
  // A loaded key missing from the factories tree is fine (only x2's keys must exist in x1).
  EXPECT_EQ(kind(dict({{"a", list({})}, {"b", list({})}}), dict({{"b", f}})), "ok");
  EXPECT_EQ(kind(list({list({}), list({})}), list({f})), "merge_list_length");
  EXPECT_EQ(kind(list({list({})}), dict({{"0", f}})), "merge_key_mismatch");  // string key in a list-dict merge
  EXPECT_EQ(kind(list({list({})}), dict({{std::int64_t{1}, f}})), "merge_key_mismatch");  // index == length
  EXPECT_EQ(kind(list({list({})}), dict({{std::int64_t{-1}, f}})), "merge_key_mismatch");
  EXPECT_EQ(kind(list({list({})}), dict({{std::int64_t{0}, f}})), "ok");
  EXPECT_EQ(kind(plain("1"), plain("2")), "merge_duplicate_leaf");
  EXPECT_EQ(kind(dict({}), list({})), "merge_duplicate_leaf");
  // A failing merge_fn is reported with the factory's key and position.
  const Status failed = [&] {
    StateNode loaded = dict({{"a", dict({{"b", plain("not a list")}})}});
    return apply_factory_merges(loaded, dict({{"a", dict({{"b", f}})}}));
  }();
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(failed.error().message.find("'w'"), std::string::npos) << failed.error().message;
  EXPECT_NE(failed.error().message.find("a.b"), std::string::npos) << failed.error().message;
}

// ---------------------------------------------------------------------------------------------
// _prepend_gpt_layer_axis (spec 2.5)

TEST(PrependGptLayerAxis, TensorGainsALeadingAxis) {
  // Spec 2.5 example: data shape (4,), no sharding, L = 1, gi = 0 -> prepend 1, global (1, 4),
  // offset (0, 0), fragmentation (1, 1). Here with L = 3, gi = 2 and a (2, 2) grid on a (3, 5) local.
  Leaf leaf = ShardedTensor::from_rank_offsets("k", {3, 5}, {{0, 1, 2}}, ReplicaId::tuple({0, 1}), 0,
                                               TensorValue::of_storage(4, {3, 5}))
                  .value();
  ASSERT_TRUE(prepend_gpt_layer_axis(leaf, {2, 3}).ok());
  const ShardedTensor& t = std::get<ShardedTensor>(leaf);
  EXPECT_EQ(t.global_shape, (Shape{3, 6, 5}));
  EXPECT_EQ(t.global_offset, (Shape{2, 3, 0}));
  EXPECT_EQ(t.axis_fragmentations, (Shape{3, 2, 1}));
  EXPECT_EQ(t.prepend_axis_num, 1);
  EXPECT_EQ(t.local_shape, (Shape{3, 5}));  // unchanged, like data, replica, dtype
  EXPECT_EQ(t.replica_id, ReplicaId::tuple({0, 1}));
  EXPECT_EQ(t.data, TensorValue::of_storage(4, {3, 5}));
  EXPECT_TRUE(t.validate_metadata_integrity().ok());

  Leaf spec = tensor("decoder.layers.self_attention.linear_qkv.weight");
  ASSERT_TRUE(prepend_gpt_layer_axis(spec, {0, 1}).ok());
  EXPECT_EQ(std::get<ShardedTensor>(spec).global_shape, (Shape{1, 4}));
  EXPECT_EQ(std::get<ShardedTensor>(spec).global_offset, (Shape{0, 0}));
  EXPECT_EQ(std::get<ShardedTensor>(spec).axis_fragmentations, (Shape{1, 1}));
}

TEST(PrependGptLayerAxis, UnevenTensorIsATypeError) {
  ShardedTensor t = tensor("k");
  t.axis_fragmentations.reset();
  Leaf leaf = t;
  const Status s = prepend_gpt_layer_axis(leaf, {0, 2});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().kind, ErrorKind::uneven_prepend);
  EXPECT_EQ(std::get<ShardedTensor>(leaf), t);  // untouched
}

TEST(PrependGptLayerAxis, ObjectPlaceholderIsReplacedElsePrepended) {
  // Spec 2.5: (1,)/(0,) with L = 2, gi = 1 becomes (2,)/(1,), unique key ".../shard_1_2".
  Leaf placeholder = ShardedObject{"decoder.layers.mlp.linear_fc2._extra_state", std::nullopt, {1}, {0}, {}};
  ASSERT_TRUE(prepend_gpt_layer_axis(placeholder, {1, 2}).ok());
  EXPECT_EQ(std::get<ShardedObject>(placeholder).unique_key(), "decoder.layers.mlp.linear_fc2._extra_state/shard_1_2");
  // An expert axis (E,)/(e,) = (4,)/(3,) becomes (L, E)/(gi, e).
  Leaf expert = ShardedObject{"x", std::nullopt, {4}, {3}, {}};
  ASSERT_TRUE(prepend_gpt_layer_axis(expert, {1, 2}).ok());
  EXPECT_EQ(std::get<ShardedObject>(expert).global_shape, (Shape{2, 4}));
  EXPECT_EQ(std::get<ShardedObject>(expert).global_offset, (Shape{1, 3}));
  // The spec's ambiguity: a genuine one-expert axis (1,)/(0,) collapses to (L,).
  Leaf single = ShardedObject{"x", std::nullopt, {1}, {0}, {}};
  ASSERT_TRUE(prepend_gpt_layer_axis(single, {1, 2}).ok());
  EXPECT_EQ(std::get<ShardedObject>(single).global_shape, (Shape{2}));
}

TEST(PrependGptLayerAxis, FactoryBuildIsWrappedAndOtherLeavesPassThrough) {
  const auto halves = std::make_shared<HalvesBuilder>();
  Leaf leaf = factory("w", halves);
  ASSERT_TRUE(prepend_gpt_layer_axis(leaf, {1, 4}).ok());
  const ShardedTensorFactory& f = std::get<ShardedTensorFactory>(leaf);
  ASSERT_EQ(f.build_wrappers.size(), 1u);
  EXPECT_EQ(halves->builds, 0);  // wrapping does not build
  const StateNode built = f.build().value();
  const ShardedTensor& half = *built.list()[1].leaf_if<ShardedTensor>();
  // The half "w.1" is rows [2, 4) of 4: after the wrap global (4, 4), offset (1, 2).
  EXPECT_EQ(half.global_shape, (Shape{4, 4}));
  EXPECT_EQ(half.global_offset, (Shape{1, 2}));
  EXPECT_EQ(half.prepend_axis_num, 1);

  Leaf local = LocalNonpersistent{TensorValue::zeros({2})};
  Leaf value = PlainValue{"7"};
  ASSERT_TRUE(prepend_gpt_layer_axis(local, {1, 4}).ok());
  ASSERT_TRUE(prepend_gpt_layer_axis(value, {1, 4}).ok());
  EXPECT_EQ(local, Leaf(LocalNonpersistent{TensorValue::zeros({2})}));
  EXPECT_EQ(value, Leaf(PlainValue{"7"}));
}

}  // namespace
}  // namespace ih
