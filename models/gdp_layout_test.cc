// Pins spec 4.2, 4.3 and 4.10 layouts; expected values are written from the spec text.
#include "models/gdp_layout.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

using Rows = std::vector<std::int64_t>;
using Names = std::vector<std::string>;

TEST(GdpLayout, ExampleBSectionsNamesAndStarts) {
  const SplitLayout layout = gdp_in_proj_layout({10, 3, 2, 3}).value();
  EXPECT_EQ(layout.sections, (Rows{10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2}));
  EXPECT_EQ(layout.names, (Names{"z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"}));
  EXPECT_EQ(layout.total_rows().value(), 60);
  EXPECT_EQ(layout.starts(), (Rows{0, 10, 20, 30, 40, 43, 46, 49, 52, 54, 56, 58}));
  EXPECT_EQ(layout.index_of("V2"), 3);
  EXPECT_EQ(layout.index_of("nope"), -1);
}

TEST(GdpLayout, ExampleCUnitTestMixer) {
  // H = 4, headdim 64, Gr = 2, S = 128, M = 3, T = 1.
  const SplitLayout layout = gdp_in_proj_layout({256, 2 * 128, 4, 3}).value();
  EXPECT_EQ(layout.total_rows().value(), 2064);
  EXPECT_EQ(layout.starts(), (Rows{0, 256, 512, 768, 1024, 1280, 1536, 1792, 2048, 2052, 2056, 2060}));
}

TEST(GdpLayout, TpOrderExampleSections) {
  const SplitLayout layout = gdp_in_proj_layout({2, 1, 1, 3}).value();
  EXPECT_EQ(layout.sections, (Rows{2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1}));
  EXPECT_EQ(layout.total_rows().value(), 16);
}

TEST(GdpLayout, TwoPlusThreeMSections) {
  const SplitLayout layout = gdp_in_proj_layout({4, 2, 1, 1}).value();
  EXPECT_EQ(layout.names, (Names{"z", "V0", "K0", "Q", "b0", "a"}));
}

TEST(GdpLayout, ConvSplit) {
  const SplitLayout layout = gdp_conv_layout({10, 3, 2, 3}).value();
  EXPECT_EQ(layout.sections, (Rows{10, 10, 10, 3, 3, 3, 3}));
  EXPECT_EQ(layout.names, (Names{"V0", "V1", "V2", "K0", "K1", "K2", "Q"}));
}

TEST(MambaLayout, InProjAndConv) {
  const SplitLayout in_proj = mamba_in_proj_layout({8, 4, 2}).value();
  EXPECT_EQ(in_proj.sections, (Rows{8, 8, 4, 4, 2}));
  EXPECT_EQ(in_proj.names, (Names{"z", "x", "B", "C", "dt"}));
  const SplitLayout conv = mamba_conv_layout({8, 4, 2}).value();
  EXPECT_EQ(conv.sections, (Rows{8, 4, 4}));
  EXPECT_EQ(conv.names, (Names{"x", "B", "C"}));
}

void expect_names_parameter(const Status& status, const std::string& parameter) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().kind, ErrorKind::invalid_layout_parameter);
  EXPECT_NE(status.error().message.find(parameter), std::string::npos) << status.error().message;
}

Status status_of(const Result<SplitLayout>& r) { return r.ok() ? Status(Ok{}) : Status(r.error()); }

TEST(GdpLayout, BadInputsNameTheParameter) {
  expect_names_parameter(status_of(gdp_in_proj_layout({0, 3, 2, 3})), "d_inner_local");
  expect_names_parameter(status_of(gdp_in_proj_layout({10, -3, 2, 3})), "group_state_local");
  expect_names_parameter(status_of(gdp_in_proj_layout({10, 3, 0, 3})), "nheads_local");
  expect_names_parameter(status_of(gdp_in_proj_layout({10, 3, 2, 0})), "householder");
  expect_names_parameter(status_of(gdp_conv_layout({10, 3, 2, -1})), "householder");
  expect_names_parameter(status_of(mamba_in_proj_layout({8, -4, 2})), "group_state_local");
  expect_names_parameter(status_of(mamba_conv_layout({0, 4, 2})), "d_inner_local");
}

TEST(GdpLayout, HugeSizesOverflowInsteadOfWrapping) {
  const auto r = gdp_in_proj_layout({INT64_MAX / 2, 1, 1, 3});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::overflow);
}

TEST(SplitLayoutValidation, NamesAndSectionsMustAgree) {
  expect_names_parameter(validate_layout({{1, 2}, {"a"}}, "custom"), "custom");
  expect_names_parameter(validate_layout({{1, 0}, {"a", "b"}}, "custom"), "section 'b'");
}

// Sections {4, 2} (TP 1 rows: s0 0-3, s1 4-5). At TP 2 rank 0 holds s0 rows 0-1 then s1 row 0, rank 1 s0
// rows 2-3 then s1 row 1: three rows each, so a rank's row 3 on is padding.
TEST(RowAtTpSize, ARowKeepsItsSectionAndItsPlaceInIt) {
  const std::vector<std::int64_t> sections{4, 2};
  const auto at = [&](std::int64_t from_tp, TpRow row, std::int64_t to_tp) {
    return row_at_tp_size(sections, from_tp, row, to_tp).value();
  };
  EXPECT_EQ(at(2, {1, 2}, 1), (TpRow{0, 5}));  // s1's second row
  EXPECT_EQ(at(2, {1, 0}, 1), (TpRow{0, 2}));  // s0's third row
  EXPECT_EQ(at(2, {0, 1}, 1), (TpRow{0, 1}));
  EXPECT_EQ(at(1, {0, 4}, 2), (TpRow{0, 2}));  // s1's first row is rank 0's third
  EXPECT_EQ(at(1, {0, 3}, 2), (TpRow{1, 1}));
  EXPECT_EQ(at(2, {1, 1}, 2), (TpRow{1, 1}));  // the same size: the same row
  EXPECT_EQ(at(2, {0, 3}, 1), std::nullopt);   // padding past the rank's three real rows
  EXPECT_EQ(at(1, {0, 6}, 2), std::nullopt);
}

TEST(RowAtTpSize, RefusesSectionsThatDoNotSplitAndRanksThatDoNotExist) {
  for (const auto& result : {row_at_tp_size({4, 3}, 1, {0, 0}, 2), row_at_tp_size({4, 2}, 2, {2, 0}, 1),
                             row_at_tp_size({4, 2}, 0, {0, 0}, 1), row_at_tp_size({4, 2}, 1, {0, -1}, 2)}) {
    ASSERT_FALSE(result.ok());
    EXPECT_EQ(result.error().kind, ErrorKind::invalid_layout_parameter) << result.error().message;
  }
}

}  // namespace
}  // namespace ih
