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

}  // namespace
}  // namespace ih
