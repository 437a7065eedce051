// Pins spec 1.3-1.7: every table row and worked example, values taken from the spec text.
#include "models/hybrid_pattern.h"

#include <gtest/gtest.h>

namespace ih::pattern {
namespace {

ParsedPattern parsed(const char* text) {
  auto result = parse(std::string_view(text));
  EXPECT_TRUE(result.ok()) << text << ": " << (result.ok() ? "" : result.error().message);
  return result.ok() ? *result : ParsedPattern{};
}

ErrorKind parse_error(const char* text) {
  auto result = parse(std::string_view(text));
  EXPECT_FALSE(result.ok()) << text;
  return result.ok() ? ErrorKind{0xFFFF} : result.error().kind;  // 0xFFFF: no kind (the call succeeded)
}

TEST(ParsePattern, SpecTable) {
  EXPECT_EQ(parsed("M*M*"), (ParsedPattern{"M*M*", std::nullopt, 0}));
  EXPECT_EQ(parsed("M*M*/MM/MM"), (ParsedPattern{"M*M*", "MM", 2}));
  EXPECT_EQ(parsed("/MM/MM"), (ParsedPattern{std::nullopt, "MM", 2}));
  EXPECT_EQ(parsed("M*M*/"), (ParsedPattern{"M*M*", std::nullopt, 0}));
  EXPECT_EQ(parsed("M*M*//"), (ParsedPattern{"M*M*", std::nullopt, 0}));
  EXPECT_EQ(parse_error("M*M*/MM/"), ErrorKind::mtp_not_identical);
  EXPECT_EQ(parse_error("M*//MM"), ErrorKind::mtp_not_identical);
  EXPECT_EQ(parse_error("M*M*/MM/Ma"), ErrorKind::mtp_not_identical);
  EXPECT_EQ(parse_error("M*M*/Ma/Ma"), ErrorKind::invalid_symbol);
  EXPECT_EQ(parse_error("M*M*/MX"), ErrorKind::invalid_symbol);
  EXPECT_EQ(parse_error("M*X*"), ErrorKind::invalid_symbol);
  EXPECT_EQ(parsed("M*/D"), (ParsedPattern{"M*", "D", 1}));
  EXPECT_EQ(parse_error("MD*"), ErrorKind::attention_with_mla_dsa);
  EXPECT_EQ(parsed(""), (ParsedPattern{"", std::nullopt, 0}));
  EXPECT_EQ(parse_error("M*M*/M|M/M|M"), ErrorKind::invalid_symbol);
  EXPECT_EQ(parse(std::nullopt).value(), ParsedPattern{});
}

TEST(ParsePattern, MessagesNameTheOffendingInput) {
  auto bad = parse(std::string_view("M*X*"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("In main pattern, 'X' is not a valid layer symbol"), std::string::npos);
  auto mtp = parse(std::string_view("M*M*/MM/Ma"));
  ASSERT_FALSE(mtp.ok());
  EXPECT_NE(mtp.error().message.find("Pattern 1 is 'MM', but pattern 2 is 'Ma'"), std::string::npos);
  auto utf8 = parse(std::string_view("M\xc3\xa9"));
  ASSERT_FALSE(utf8.ok());
  EXPECT_NE(utf8.error().message.find("'\xc3\xa9'"), std::string::npos);
}

TEST(Counting, SpecExamples) {
  EXPECT_EQ(total_layer_count("").value(), 0);
  EXPECT_EQ(total_layer_count("M-M-|M-M*-").value(), 9);
  EXPECT_EQ(total_layer_count("||M").value(), 1);
  EXPECT_EQ(total_layer_count("M*M*/MM/MM").value(), 4);
  EXPECT_EQ(pipeline_segment_count(""), 1);
  EXPECT_EQ(pipeline_segment_count("||M"), 3);
  EXPECT_EQ(pipeline_segment_count("M-M-|M-M*-/MM/MM"), 2);
  // Order * D G M + - E.
  EXPECT_EQ(layer_counts("M-M-|M-M*-/MM/MM").value(), (LayerCounts{1, 0, 0, 8, 0, 4, 0}));
}

TEST(SelectSegment, SpecWorkedExampleFourSegmentsTwoStages) {
  const std::string_view main = "M*-M*-|*-|M*-|*-";
  const struct {
    std::int64_t rank, vp;
    SegmentSelection expected;
  } rows[] = {{0, 0, {"M*-M*-", 0}}, {1, 0, {"*-", 6}}, {0, 1, {"M*-", 8}}, {1, 1, {"*-", 11}}};
  for (const auto& row : rows) {
    auto got = select_segment(main, {row.rank, 2, row.vp, std::nullopt, std::nullopt});
    ASSERT_TRUE(got.ok()) << got.error().message;
    EXPECT_EQ(*got, row.expected) << "rank " << row.rank << " vp " << row.vp;
  }
}

TEST(SelectSegment, ErrorsAndLegacyPath) {
  EXPECT_EQ(select_segment("M*|M*", {0, 2, std::nullopt, 1, std::nullopt}).error().kind,
            ErrorKind::pipe_with_first_last);
  EXPECT_EQ(select_segment("M*M*", {0, 2, 0, std::nullopt, std::nullopt}).error().kind, ErrorKind::vpp_without_pipes);
  EXPECT_EQ(select_segment("M*M*M", {0, 2, std::nullopt, std::nullopt, std::nullopt}).error().kind,
            ErrorKind::layers_not_divisible_by_pp);
  EXPECT_EQ(select_segment("M*|M*|M*", {0, 2, std::nullopt, std::nullopt, std::nullopt}).error().kind,
            ErrorKind::segments_not_divisible_by_pp);
  EXPECT_EQ(select_segment("M*|M*", {0, 2, 1, std::nullopt, std::nullopt}).error().kind,
            ErrorKind::segment_out_of_range);
  EXPECT_EQ(select_segment("MMMMMM", {1, 3, std::nullopt, 1, std::nullopt}).error().kind,
            ErrorKind::middle_not_divisible);
  EXPECT_EQ(select_segment("M|X", {1, 2, std::nullopt, std::nullopt, std::nullopt}).error().kind,
            ErrorKind::invalid_symbol);
  // Even legacy split: 4 layers over 2 stages.
  EXPECT_EQ(select_segment("M*M-", {1, 2, std::nullopt, std::nullopt, std::nullopt}).value(),
            (SegmentSelection{"M-", 2}));
  // first=1, last=1 with P=3: middle rank shifted by one.
  EXPECT_EQ(select_segment("MMMMM*", {1, 3, std::nullopt, 1, 1}).value(), (SegmentSelection{"MMMM", 1}));
  // The unchecked hazard of spec 1.6: MMMM, P=2, f=1, l=1 builds layers 0 and 3 only.
  EXPECT_EQ(select_segment("MMMM", {0, 2, std::nullopt, 1, 1}).value(), (SegmentSelection{"M", 0}));
  EXPECT_EQ(select_segment("MMMM", {1, 2, std::nullopt, 1, 1}).value(), (SegmentSelection{"M", 3}));
  // first = 0 counts as given.
  EXPECT_EQ(select_segment("MMMM", {0, 2, std::nullopt, 0, std::nullopt}).value(), (SegmentSelection{"", 0}));
  // Pipes with P = 1 and no vp stage: only segment 0.
  EXPECT_EQ(select_segment("M*|-", {0, 1, std::nullopt, std::nullopt, std::nullopt}).value(),
            (SegmentSelection{"M*", 0}));
  EXPECT_EQ(select_segment("", {0, 1, std::nullopt, std::nullopt, std::nullopt}).value(), (SegmentSelection{"", 0}));
}

TEST(LayerTypeMaps, OrdinalsPerType) {
  auto maps = layer_maps_from_types("*M-E");
  ASSERT_TRUE(maps.ok());
  EXPECT_EQ((*maps)[symbol_index('*')], (IndexMap{{0, 0}}));
  EXPECT_EQ((*maps)[symbol_index('M')], (IndexMap{{1, 0}}));
  EXPECT_EQ((*maps)[symbol_index('-')], (IndexMap{{2, 0}}));
  EXPECT_EQ((*maps)[symbol_index('E')], (IndexMap{{3, 0}}));
  EXPECT_TRUE((*maps)[symbol_index('D')].empty());
  EXPECT_EQ(layer_maps_from_types("M|M").error().kind, ErrorKind::unknown_layer_symbol);
  EXPECT_EQ(kNameSortedSymbols, (std::array<char, 7>{'*', 'D', 'G', 'M', '+', '-', 'E'}));
}

}  // namespace
}  // namespace ih::pattern
