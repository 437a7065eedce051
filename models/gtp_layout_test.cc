// Pins spec 4.4, 4.5 and 4.7-4.10 (examples A, B, C); expected values are written from the spec.
#include "models/gtp_layout.h"

#include <gtest/gtest.h>

#include "models/split_factory.h"

namespace ih {
namespace {

TEST(GtpPadding, ExampleAProductionCase) {
  const GtpPadding pad = gtp_padding(61'760, 64, 32).value();
  EXPECT_EQ(pad.align_block, 2'048);
  EXPECT_EQ(pad.pad, 1'728);
  EXPECT_EQ(pad.padded_rows, 63'488);
  EXPECT_EQ(pad.shard_rows, 992);
  for (int g = 0; g <= 61; ++g) EXPECT_EQ(pad.real_rows(g), 992) << g;
  EXPECT_EQ(pad.real_rows(62), 256);
  EXPECT_EQ(pad.real_rows(63), 0);
  EXPECT_TRUE(pad.all_padding(63));
  EXPECT_FALSE(pad.all_padding(62));
  EXPECT_EQ(pad.all_padding_ranks(), 1);
}

TEST(GtpPadding, ExampleAWithP16HasNoAllPaddingRank) {
  const GtpPadding pad = gtp_padding(61'760, 64, 16).value();
  EXPECT_EQ(pad.align_block, 1'024);
  EXPECT_EQ(pad.pad, 704);
  EXPECT_EQ(pad.shard_rows, 976);
  EXPECT_EQ(pad.real_rows(63), 272);
  EXPECT_EQ(pad.all_padding_ranks(), 0);
}

TEST(GtpPadding, TinyRowsGiveManyAllPaddingRanks) {
  const GtpPadding pad = gtp_padding(1, 64, 32).value();
  EXPECT_EQ(pad.shard_rows, 32);
  EXPECT_EQ(pad.real_rows(0), 1);
  int all_padding = 0;
  for (int g = 0; g < 64; ++g) all_padding += pad.all_padding(g);
  EXPECT_EQ(all_padding, 63);
  EXPECT_EQ(pad.all_padding_ranks(), 63);
}

TEST(GtpPadding, BaselineTestCases) {
  const GtpPadding none = gtp_padding(1'152, 4, 16).value();
  EXPECT_EQ(none.pad, 0);
  EXPECT_EQ(none.shard_rows, 288);
  const GtpPadding padded = gtp_padding(1'160, 4, 16).value();
  EXPECT_EQ(padded.padded_rows, 1'216);
  EXPECT_EQ(padded.shard_rows, 304);
  const GtpPadding no_alignment = gtp_padding(1'152, 4, 0).value();
  EXPECT_EQ(no_alignment.shard_rows, 288);
}

void expect_error(const Result<GtpPadding>& r, ErrorKind kind, const std::string& text) {
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, kind) << r.error().message;
  EXPECT_NE(r.error().message.find(text), std::string::npos) << r.error().message;
}

TEST(GtpPadding, BadInputs) {
  expect_error(gtp_padding(10, 4, 0), ErrorKind::gtp_indivisible, "not divisible by gtp_size (G) = 4");
  expect_error(gtp_padding(3, 4, 0), ErrorKind::gtp_group_too_large, "gtp_size (G) = 4");
  expect_error(gtp_padding(0, 4, 16), ErrorKind::invalid_layout_parameter, "rows (D)");
  expect_error(gtp_padding(10, 0, 16), ErrorKind::invalid_layout_parameter, "gtp_size (G)");
  expect_error(gtp_padding(10, 2, -1), ErrorKind::invalid_layout_parameter, "pad_alignment (p)");
  expect_error(gtp_padding(10, INT64_MAX / 2, 16), ErrorKind::overflow, "p*G");
}

TEST(GtpDesign, ParsesBothSpellings) {
  EXPECT_EQ(parse_gtp_design("gather").value(), GtpSaveDesign::gather);
  EXPECT_EQ(parse_gtp_design("shard-split").value(), GtpSaveDesign::shard_split);
  EXPECT_EQ(to_string(GtpSaveDesign::shard_split), "shard-split");
  EXPECT_EQ(parse_gtp_design("scatter").error().kind, ErrorKind::invalid_layout_parameter);
}

GtpFactoryParams example_c(std::int64_t g) {
  GtpFactoryParams p;
  p.key = "mixer.in_proj.weight";
  p.layout = gdp_in_proj_layout({256, 256, 4, 3}).value();
  p.gtp_size = 2;
  p.gtp_rank = g;
  p.pad_alignment = 32;
  p.cols = 8;
  return p;
}

TEST(GtpPiecePlan, ExampleCCutsK0) {
  const GtpPadding pad = gtp_padding_of(example_c(0)).value();
  EXPECT_EQ(pad.align_block, 64);
  EXPECT_EQ(pad.pad, 48);
  EXPECT_EQ(pad.padded_rows, 2'112);
  EXPECT_EQ(pad.shard_rows, 1'056);
  const auto g0 = gtp_piece_plan(example_c(0).layout, pad, 1, 0, 0).value();
  ASSERT_EQ(g0.size(), 5u);  // z, V0, V1, V2, K0 rows 0-31
  EXPECT_EQ(g0[4], (GtpPiece{4, 1'024, 32, 256, 0}));
  const auto g1 = gtp_piece_plan(example_c(1).layout, pad, 1, 0, 1).value();
  ASSERT_EQ(g1.size(), 8u);  // K0 rows 32-255, K1, K2, Q, b0-b2, a
  EXPECT_EQ(g1[0], (GtpPiece{4, 0, 224, 256, 32}));
  std::int64_t real = 0;
  for (const GtpPiece& p : g1) real += p.rows;
  EXPECT_EQ(real, 1'008);
  EXPECT_EQ(pad.real_rows(1), 1'008);
}

TEST(GtpPiecePlan, ExampleARank62HoldsTheTailOfB0AndB1B2A) {
  // Illustration of spec 4.8 with nheads_l = 80 (d_inner_l 10,240, group_state_l 5,120).
  const SplitLayout layout = gdp_in_proj_layout({10'240, 5'120, 80, 3}).value();
  ASSERT_EQ(layout.total_rows().value(), 61'760);
  const GtpPadding pad = gtp_padding(61'760, 64, 32).value();
  const auto plan = gtp_piece_plan(layout, pad, 1, 0, 62).value();
  ASSERT_EQ(plan.size(), 4u);
  EXPECT_EQ(plan[0], (GtpPiece{8, 0, 16, 80, 64}));    // b0: last 16 rows
  EXPECT_EQ(plan[1], (GtpPiece{9, 16, 80, 80, 0}));    // b1
  EXPECT_EQ(plan[2], (GtpPiece{10, 96, 80, 80, 0}));   // b2
  EXPECT_EQ(plan[3], (GtpPiece{11, 176, 80, 80, 0}));  // a
  EXPECT_TRUE(gtp_piece_plan(layout, pad, 1, 0, 63).value().empty());
}

TEST(GtpFactoryParamsCheck, BadRanksAndShapes) {
  GtpFactoryParams p = example_c(0);
  p.gtp_rank = 2;
  EXPECT_EQ(make_gtp_factory(GtpSaveDesign::shard_split, p).error().kind, ErrorKind::invalid_layout_parameter);
  p = example_c(0);
  p.tp_rank = 1;
  EXPECT_NE(make_gtp_factory(GtpSaveDesign::gather, p).error().message.find("tp_rank"), std::string::npos);
  p = example_c(0);
  p.cols = 0;
  EXPECT_NE(make_gtp_factory(GtpSaveDesign::shard_split, p).error().message.find("cols (C)"), std::string::npos);
  p = example_c(0);
  p.shard = TensorValue::of_storage(1, {1'000, 8});
  EXPECT_NE(make_gtp_factory(GtpSaveDesign::shard_split, p).error().message.find("expected (R, C) = (1056, 8)"),
            std::string::npos);
}

TEST(GtpCompositeTensor, CompositeAxisZeroTriple) {
  GtpFactoryParams p = example_c(1);
  p.tp_size = 2;
  p.tp_rank = 1;
  const ShardedTensor t = gtp_composite_tensor(p).value();
  EXPECT_EQ(t.local_shape, (Shape{1'056, 8}));
  EXPECT_EQ(t.global_shape, (Shape{4 * 1'056, 8}));  // T*G*R = T*D'
  EXPECT_EQ(t.global_offset, (Shape{3 * 1'056, 0}));
  EXPECT_TRUE(t.allow_shape_mismatch);
}

}  // namespace
}  // namespace ih
