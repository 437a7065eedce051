#include "harness/roundtrip/stored_layout.h"

#include <gtest/gtest.h>

#include "models/gdp_layout.h"
#include "models/split_factory.h"

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
  EXPECT_EQ(v.elements_checked, 5);  // the unknown key's elements are judged (wrong), never more wrong than judged
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

// The Mamba in_proj [z|x|B|C|dt] of TP rank 1 of 2, 3 columns: the reference's own layout (models/) against a
// description that trades the same-shaped B and C chunks (save and load alike, so every chunk holds its own key).
constexpr char kInProj[] = "l.in_proj.weight";
const MambaDims kMamba{4, 2, 1};  // sections 4, 4, 2, 2, 1

/// The segments of the in_proj's split factory: the reference's build over its data, or as Megatron describes
/// it (no data: its built tensors' rows one after another) with the chunk names `names`.
std::vector<Segment> in_proj_segments(const std::vector<std::string>& names, bool reference) {
  SplitLayout layout = mamba_in_proj_layout(kMamba).value();
  layout.names = names;
  const std::int64_t rows = layout.total_rows().value();
  auto data = reference ? std::optional(TensorValue::of_storage(7, {rows, 3})) : std::nullopt;
  const ShardedTensor orig = tp_row_sharded(kInProj, rows, 3, 2, 1, {}, data).value();
  return factory_segments(make_split_factory(orig, layout).value()).value();
}

const std::vector<std::string> kZxbcdt = {"z", "x", "B", "C", "dt"};
const std::map<std::string, std::int64_t> kInProjIds = {{"l.in_proj.weight.z", 1},
                                                        {"l.in_proj.weight.x", 2},
                                                        {"l.in_proj.weight.B", 3},
                                                        {"l.in_proj.weight.C", 4},
                                                        {"l.in_proj.weight.dt", 5}};

StoredLayout in_proj_layout(std::vector<StoredRemap> remaps) {
  StoredLayout l;
  l.encoding.key_shift = kShift;
  l.keys = {{"l.in_proj.weight.B", {3, {4, 3}}}, {"l.in_proj.weight.C", {4, {4, 3}}}};
  l.remaps = std::move(remaps);
  return l;
}

/// Rank 1's stored chunk of `key` (rows [2, 4) of 4, 3 columns) holding key `source_id`'s same elements.
ReadBackChunk in_proj_chunk(const std::string& key, std::int64_t source_id) {
  ReadBackChunk c{key, {2, 0}, {2, 3}, {}};
  for (std::int64_t e = 0; e < 6; ++e) c.values.push_back(value(source_id, 6 + e));
  return c;
}

TEST(StoredLayout, ASplitDescribedAsTheReferenceBuildsItNeedsNoRemap) {
  const auto remaps =
      reference_remaps(in_proj_segments(kZxbcdt, false), in_proj_segments(kZxbcdt, true), {3}, kInProjIds);
  ASSERT_TRUE(remaps.ok()) << remaps.error().message;
  EXPECT_TRUE(remaps->empty());
}

TEST(StoredLayout, TradedSameShapedSplitChunksAreRemappedToTheReferencesChunks) {
  const auto remaps = reference_remaps(in_proj_segments({"z", "x", "C", "B", "dt"}, false),
                                       in_proj_segments(kZxbcdt, true), {3}, kInProjIds);
  ASSERT_TRUE(remaps.ok()) << remaps.error().message;
  // Local rows 8, 9 (B's) are described as C's rows 2, 3: the reference stores them as B's rows 2, 3.
  const std::vector<StoredRemap> want = {{"l.in_proj.weight.B", {2, 0}, {2, 3}, 4, {4, 3}, {2, 0}},
                                         {"l.in_proj.weight.C", {2, 0}, {2, 3}, 3, {4, 3}, {2, 0}}};
  EXPECT_EQ(*remaps, want);
  // The traded tree stores each chunk with its own key's values: wrong against the reference, named.
  const StoredVerdict v = judge_stored_chunks(
      {in_proj_chunk("l.in_proj.weight.B", 3), in_proj_chunk("l.in_proj.weight.C", 4)}, in_proj_layout(*remaps));
  EXPECT_EQ(v.wrong, 12);
  ASSERT_FALSE(v.first_wrong.empty());
  EXPECT_EQ(v.first_wrong[0],
            "l.in_proj.weight.B chunk at [2, 0] of [2, 3]: element [2, 0] holds l.in_proj.weight.B[2, 0], the "
            "reference's layout puts l.in_proj.weight.C[2, 0] there");
  // The rows stored where the reference puts them pass.
  EXPECT_EQ(judge_stored_chunks({in_proj_chunk("l.in_proj.weight.B", 4), in_proj_chunk("l.in_proj.weight.C", 3)},
                                in_proj_layout(*remaps))
                .wrong,
            0);
}

TEST(StoredLayout, ASplitChunkTheSaveDoesNotWriteIsADescriptionDisagreement) {
  std::map<std::string, std::int64_t> ids = kInProjIds;
  ids.erase("l.in_proj.weight.dt");
  std::vector<Segment> fill = in_proj_segments(kZxbcdt, false);
  fill.back().key = "l.in_proj.weight.z";
  const auto remaps = reference_remaps(fill, in_proj_segments(kZxbcdt, true), {3}, ids);
  ASSERT_FALSE(remaps.ok());
  EXPECT_EQ(remaps.error().kind, seam_kind::description_disagrees);
  EXPECT_NE(remaps.error().message.find("l.in_proj.weight.dt is not saved"), std::string::npos);
}

TEST(StoredLayout, APadRowStoredIsWrong) {
  // GTP rank 1 of 2's shard of a gathered Mamba in_proj at TP 1 (13 rows, p = 4: R = 8, 3 pad rows): the
  // reference's gathered segments leave the pad rows to no chunk; a description that stores them as more rows
  // of dt is remapped to no element there.
  GtpFactoryParams params;
  params.key = kInProj, params.layout = mamba_in_proj_layout(kMamba).value();
  params.gtp_size = 2, params.gtp_rank = 1, params.pad_alignment = 4, params.cols = 3, params.dtype = "float32";
  params.mixer = GtpMixer::mamba;
  const GatheredShard g = gathered_shard(params).value();
  ASSERT_EQ(g.shard.back().key, "l.in_proj.weight.dt");
  const std::int64_t real_end = g.shard.back().begin + g.shard.back().rows, pad = g.shard_shape[0] - real_end;
  ASSERT_EQ(pad, 3);
  std::vector<Segment> fill = g.shard;
  fill.back().rows += pad;
  fill.back().global_shape[0] += pad;
  const auto remaps = reference_remaps(fill, g.shard, {3}, kInProjIds);
  ASSERT_TRUE(remaps.ok()) << remaps.error().message;
  const Shape dt_rows = g.shard.back().global_shape;
  const std::vector<StoredRemap> want = {{"l.in_proj.weight.dt", {dt_rows[0], 0}, {3, 3}, kNoElement, {}, {}}};
  EXPECT_EQ(*remaps, want);
  StoredLayout layout;
  layout.encoding.key_shift = kShift;
  layout.keys["l.in_proj.weight.dt"] = {5, fill.back().global_shape};
  layout.remaps = *remaps;
  ReadBackChunk padded{"l.in_proj.weight.dt", {0, 0}, fill.back().global_shape, {}};
  for (std::int64_t e = 0; e < numel(padded.sizes); ++e) padded.values.push_back(value(5, e));
  const StoredVerdict v = judge_stored_chunks({padded}, layout);
  EXPECT_EQ(v.wrong, 9);
  ASSERT_FALSE(v.first_wrong.empty());
  EXPECT_NE(v.first_wrong[0].find("a row the reference's layout does not store (padding)"), std::string::npos)
      << v.first_wrong[0];
  // Without the pad rows the same chunk passes.
  padded.sizes = dt_rows;
  padded.values.resize(static_cast<std::size_t>(numel(dt_rows)));
  EXPECT_EQ(judge_stored_chunks({padded}, layout).wrong, 0);
}

}  // namespace
}  // namespace ih
