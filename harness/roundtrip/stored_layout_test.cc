#include "harness/roundtrip/stored_layout.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

constexpr int kShift = 8;  // small: values are written out by hand below

double value(std::int64_t id, std::int64_t linear) { return static_cast<double>((id << kShift) + linear); }

StoredLayout layout_of(std::vector<StoredRemap> remaps = {}) {
  StoredLayout l;
  l.encoding.key_shift = kShift;
  l.keys["fc1"] = {1, {8, 3}};
  l.keys["proj"] = {2, {4, 2}};
  l.remaps = std::move(remaps);
  return l;
}

/// A chunk of rows [first, first + rows) of fc1 (8 x 3) holding fc1's rows from `source_first`.
ReadBackChunk fc1_rows(std::int64_t first, std::int64_t rows, std::int64_t source_first) {
  ReadBackChunk c{"fc1", {first, 0}, {rows, 3}, {}};
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t col = 0; col < 3; ++col) c.values.push_back(value(1, (source_first + r) * 3 + col));
  return c;
}

/// TP rank 0 of 2: the SwiGLU halves (2 rows each) of fc1 (4 fragments of 2 rows), described at fragments w and v.
std::vector<Segment> swiglu_fill(std::int64_t w, std::int64_t v) {
  return {{0, 2, "fc1", {8, 3}, {w * 2, 0}, 0}, {2, 2, "fc1", {8, 3}, {v * 2, 0}, 0}};
}

TEST(StoredLayout, ChunksHoldingTheirOwnElementsPass) {
  ReadBackChunk proj{"proj", {2, 0}, {2, 2}, {value(2, 4), value(2, 5), value(2, 6), value(2, 7)}};
  const StoredVerdict v = judge_stored_chunks({proj, fc1_rows(0, 8, 0)}, layout_of());
  EXPECT_EQ(v.chunks, 2);
  EXPECT_EQ(v.elements_checked, 28);
  EXPECT_EQ(v.wrong, 0);
}

TEST(StoredLayout, AsDescribedSwigluHalvesNeedNoRemap) {
  EXPECT_TRUE(swiglu_reference_remaps(swiglu_fill(0, 2), {3}, {{"fc1", 1}}).empty());
  EXPECT_TRUE(swiglu_reference_remaps(swiglu_fill(1, 3), {3}, {{"fc1", 1}}).empty());
}

TEST(StoredLayout, SwappedSwigluHalvesAreRemappedToTheReferencesFragments) {
  const auto remaps = swiglu_reference_remaps(swiglu_fill(2, 0), {3}, {{"fc1", 1}});
  const std::vector<StoredRemap> want = {{"fc1", {0, 0}, {2, 3}, 1, {8, 3}, {4, 0}},
                                         {"fc1", {4, 0}, {2, 3}, 1, {8, 3}, {0, 0}}};
  EXPECT_EQ(remaps, want);
}

TEST(StoredLayout, TwoKeysAreNoSwiglu) {
  std::vector<Segment> fill = swiglu_fill(2, 0);
  fill[1].key = "proj";
  EXPECT_TRUE(swiglu_reference_remaps(fill, {3}, {{"fc1", 1}, {"proj", 2}}).empty());
}

TEST(StoredLayout, ASelfConsistentSwapFailsNamingKeyChunkAndElement) {
  // The changed tree filled W with the rows it describes at fragment 2 and stored them there: every chunk holds
  // its own elements, yet the reference puts W (fc1's rows 4, 5 as filled) at rows 0, 1.
  const StoredLayout layout =
      layout_of({{"fc1", {0, 0}, {2, 3}, 1, {8, 3}, {4, 0}}, {"fc1", {4, 0}, {2, 3}, 1, {8, 3}, {0, 0}}});
  const StoredVerdict v = judge_stored_chunks({fc1_rows(0, 2, 0), fc1_rows(4, 2, 4), fc1_rows(2, 2, 2)}, layout);
  EXPECT_EQ(v.elements_checked, 18);
  EXPECT_EQ(v.wrong, 12);
  ASSERT_FALSE(v.first_wrong.empty());
  EXPECT_EQ(v.first_wrong[0],
            "fc1 chunk at [0, 0] of [2, 3]: element [0, 0] holds fc1[0, 0], the reference's layout puts fc1[4, 0] "
            "there");
  // The same chunks in the reference's order pass.
  EXPECT_EQ(judge_stored_chunks({fc1_rows(0, 2, 4), fc1_rows(4, 2, 0), fc1_rows(2, 2, 2)}, layout).wrong, 0);
}

TEST(StoredLayout, GarbageAndUnknownKeysAreWrong) {
  ReadBackChunk garbage = fc1_rows(0, 1, 0);
  garbage.values[1] = 0.5;
  ReadBackChunk unknown{"extra", {0}, {2}, {1, 2}};
  const StoredVerdict v = judge_stored_chunks({garbage, unknown}, layout_of());
  EXPECT_EQ(v.wrong, 3);
  ASSERT_EQ(v.first_wrong.size(), 2u);
  EXPECT_NE(v.first_wrong[0].find("element [0, 1] holds the value 0.5"), std::string::npos) << v.first_wrong[0];
  EXPECT_EQ(v.first_wrong[1], "extra chunk at [0] of [2]: a key the plan does not save");
}

TEST(StoredLayout, ReadsTheCatalogueWithAliasesAndTheChunks) {
  const json::Json catalogue = {{"oracle", {{"key_shift", 15}, {"dtype", "float32"}}},
                                {"keys", {{{"id", 1}, {"key", "w"}, {"global_shape", {4}}}}},
                                {"aliases", {{{"key", "optimizer.state.param.w"}, {"id", 1}}}}};
  auto layout = stored_layout_from_json(catalogue, {{"remaps", json::Json::array()}});
  ASSERT_TRUE(layout.ok()) << layout.error().message;
  EXPECT_EQ(layout->encoding.key_shift, 15);
  EXPECT_EQ(layout->keys.at("optimizer.state.param.w").first, 1);
  auto bad =
      stored_chunks_from_json({{"chunks", {{{"key", "w"}, {"offset", {0}}, {"sizes", {3}}, {"values", {1, 2}}}}}});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("do not fill its sizes"), std::string::npos);
}

}  // namespace
}  // namespace ih
