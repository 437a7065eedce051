// Pins spec 2.2: examples and the exact check order; values taken from the spec text.
#include "models/gpt_layer_maps.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

GptCompatLayerMaps maps_of(const char* text) {
  auto result = gpt_compatible_layer_maps(std::string_view(text));
  EXPECT_TRUE(result.ok()) << text << ": " << (result.ok() ? "" : result.error().message);
  return result.ok() ? *result : GptCompatLayerMaps{};
}

ErrorKind error_of(std::optional<std::string_view> text) {
  auto result = gpt_compatible_layer_maps(text);
  EXPECT_FALSE(result.ok()) << text.value_or("<None>");
  return result.ok() ? ErrorKind{0xFFFF} : result.error().kind;  // 0xFFFF: no kind (the call succeeded)
}

TEST(GptLayerMaps, SpecExamples) {
  const GptCompatLayerMaps m = maps_of("M*-M*-");
  EXPECT_EQ(m.attention_to_gpt, (pattern::IndexMap{{1, 0}, {4, 1}}));
  EXPECT_EQ(m.mlp_to_gpt, (pattern::IndexMap{{2, 0}, {5, 1}}));
  EXPECT_EQ(m.fresh_init, (std::vector<std::int64_t>{0, 3}));
  EXPECT_EQ(m.num_gpt_layers, 2);
  EXPECT_EQ(maps_of("M*-|M*-"), m);

  const GptCompatLayerMaps stacked = maps_of("**--");
  EXPECT_EQ(stacked.attention_to_gpt, (pattern::IndexMap{{0, 0}, {1, 1}}));
  EXPECT_EQ(stacked.mlp_to_gpt, (pattern::IndexMap{{2, 0}, {3, 1}}));
  EXPECT_TRUE(stacked.fresh_init.empty());

  const GptCompatLayerMaps five = maps_of("M*-M*-*-M*-*-");
  EXPECT_EQ(five.attention_to_gpt, (pattern::IndexMap{{1, 0}, {4, 1}, {6, 2}, {9, 3}, {11, 4}}));
  EXPECT_EQ(five.mlp_to_gpt, (pattern::IndexMap{{2, 0}, {5, 1}, {7, 2}, {10, 3}, {12, 4}}));
  EXPECT_EQ(five.fresh_init, (std::vector<std::int64_t>{0, 3, 8}));
  EXPECT_EQ(five.num_gpt_layers, 5);

  const GptCompatLayerMaps moe = maps_of("*E*E");
  EXPECT_EQ(moe.mlp_to_gpt, (pattern::IndexMap{{1, 0}, {3, 1}}));
  EXPECT_EQ(maps_of("M*-M*-/").num_gpt_layers, 2);  // trailing '/' is depth 0
}

TEST(GptLayerMaps, CheckOrder) {
  EXPECT_EQ(error_of("M*-M*E"), ErrorKind::mixed_mlp_kinds);  // mixed is checked before counts
  EXPECT_EQ(error_of("M**-"), ErrorKind::unbalanced_attention_mlp);
  EXPECT_EQ(error_of("MMMM"), ErrorKind::unbalanced_attention_mlp);
  EXPECT_EQ(error_of("MD-"), ErrorKind::untranslatable_layer_types);
  EXPECT_EQ(error_of("M*-/MM"), ErrorKind::mtp_present);
  EXPECT_EQ(error_of("/MM/MM"), ErrorKind::mtp_present);  // caught before the empty check
  EXPECT_EQ(error_of(std::nullopt), ErrorKind::empty_pattern);
  EXPECT_EQ(error_of(""), ErrorKind::empty_pattern);
  EXPECT_EQ(error_of("|"), ErrorKind::empty_pattern);
  EXPECT_EQ(error_of("M*-G"), ErrorKind::untranslatable_layer_types);
  EXPECT_EQ(error_of("+-"), ErrorKind::untranslatable_layer_types);
  EXPECT_EQ(error_of("M*X"), ErrorKind::invalid_symbol);  // parse errors propagate unchanged
  EXPECT_EQ(error_of("*D-"), ErrorKind::attention_with_mla_dsa);
}

TEST(GptLayerMaps, UntranslatableMessageListsSortedTypes) {
  auto result = gpt_compatible_layer_maps(std::string_view("GMD-"));
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("contains layer types ['D', 'G'] that cannot be translated"), std::string::npos)
      << result.error().message;
}

TEST(GptLayerMaps, Lookups) {
  const GptCompatLayerMaps m = maps_of("M*-M*-");
  EXPECT_EQ(m.gpt_layer_of(4), 1);
  EXPECT_EQ(m.gpt_layer_of(5), 1);
  EXPECT_EQ(m.gpt_layer_of(0), std::nullopt);
  EXPECT_TRUE(m.is_fresh(3));
  EXPECT_FALSE(m.is_fresh(4));
}

}  // namespace
}  // namespace ih
