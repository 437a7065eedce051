#include "harness/roundtrip/description_diff.h"

#include <gtest/gtest.h>

#include "codec/json_codec.h"

namespace ih {
namespace {

ShardedTensor tensor(const std::string& key, Shape local, std::int64_t rank_offset, std::int64_t fragments) {
  auto t = ShardedTensor::from_rank_offsets(key, std::move(local), {{0, rank_offset, fragments}});
  EXPECT_TRUE(t.ok());
  return *t;
}

/// A SwiGLU fc1 factory as a real model's dump gives it (built tensors only): TP rank 0 of 2, its two halves at
/// fragments `w` and `v` of 4.
FlatEntry swiglu(std::int64_t w, std::int64_t v) {
  json::Json built = json::Json::array();
  for (std::int64_t frag : {w, v})
    built.push_back(
        {{"path", std::to_string(built.size())}, {"entry", json::leaf_to_json(tensor("fc1", {4, 8}, frag, 4))}});
  auto leaf = json::leaf_from_json({{"kind", "factory"}, {"key", "fc1"}, {"built", built}});
  EXPECT_TRUE(leaf.ok()) << leaf.error().message;
  return {"decoder.layers.0.mlp.linear_fc1.weight", *leaf};
}

FlatEntry plain(const std::string& path, Shape local, std::int64_t rank_offset) {
  return {path, tensor(path, std::move(local), rank_offset, 2)};
}

TEST(DescriptionDifference, TheSameDescriptionHasNone) {
  const std::vector<FlatEntry> model = {plain("a.weight", {4, 8}, 0), swiglu(0, 2)};
  EXPECT_FALSE(description_difference(model, model).has_value());
}

TEST(DescriptionDifference, SwappedSwigluHalvesAreALayoutDifferenceNamingTheBuiltTensor) {
  const auto d = description_difference({plain("a.weight", {4, 8}, 0), swiglu(0, 2)},
                                        {plain("a.weight", {4, 8}, 0), swiglu(2, 0)});
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->structural);
  EXPECT_NE(d->text.find("decoder.layers.0.mlp.linear_fc1.weight (built tensor 0)"), std::string::npos) << d->text;
}

TEST(DescriptionDifference, AnotherOffsetOfAPlainTensorIsALayoutDifference) {
  const auto d = description_difference({plain("a.weight", {4, 8}, 0)}, {plain("a.weight", {4, 8}, 1)});
  ASSERT_TRUE(d.has_value());
  EXPECT_FALSE(d->structural);
  EXPECT_EQ(d->text.rfind("a.weight: the save tree describes", 0), 0u) << d->text;
}

TEST(DescriptionDifference, AnotherLocalShapeOrAMissingPathIsStructural) {
  const auto shape = description_difference({plain("a.weight", {4, 8}, 0)}, {plain("a.weight", {8, 8}, 0)});
  ASSERT_TRUE(shape.has_value());
  EXPECT_TRUE(shape->structural);
  const auto only_load = description_difference({plain("a.weight", {4, 8}, 0)},
                                                {plain("a.weight", {4, 8}, 0), plain("b.weight", {4, 8}, 0)});
  ASSERT_TRUE(only_load.has_value());
  EXPECT_TRUE(only_load->structural);
  EXPECT_EQ(only_load->text, "b.weight: described by the load tree only");
}

TEST(DescriptionDifference, AStructuralDifferenceWinsOverAnEarlierLayoutOne) {
  const auto d = description_difference({plain("a.weight", {4, 8}, 0), plain("b.weight", {4, 8}, 0)},
                                        {plain("a.weight", {4, 8}, 1), plain("b.weight", {2, 8}, 0)});
  ASSERT_TRUE(d.has_value());
  EXPECT_TRUE(d->structural);
  EXPECT_EQ(d->text.rfind("b.weight", 0), 0u) << d->text;
}

}  // namespace
}  // namespace ih
