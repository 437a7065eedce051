// Each property of the suite as a GoogleTest case against the reference at the CI budget
// (IH_PROPERTY_CASES, default 30 cases; RC_PARAMS seeds and reproduce strings still apply).
#include <gtest/gtest.h>

#include <cstdlib>

#include "properties/suite.h"
#include "seam/reference_implementation.h"
#include "seam/repro_token.h"

namespace ih::props {
namespace {

int budget() {
  const char* text = std::getenv("IH_PROPERTY_CASES");
  return text ? std::max(1, std::atoi(text)) : 30;
}

class PropertySuite : public ::testing::TestWithParam<std::string> {};

TEST_P(PropertySuite, HoldsOnTheReference) {
  const Property& property = *find_property(GetParam());
  ReferenceImplementation reference;
  RunParams params;
  params.cases = budget();
  params.seed = rc::detail::configuration().testParams.seed;
  const PropertyRun o = property.run(reference, params);
  ReproToken token{property_check_name(property.name), {}};
  add_case_options(token, params, o);
  EXPECT_EQ(o.outcome, ih::Outcome::passed)
      << o.description << "\ncase: " << o.counterexample << "\ninterop-harness repro " << to_string(token);
  EXPECT_GT(o.cases, 0);
}

TEST_P(PropertySuite, SpecCasesHold) {
  ReferenceImplementation reference;
  for (const auto& [name, fixture] : find_property(GetParam())->fixtures) {
    const auto [printed, verdict] = fixture(reference);
    EXPECT_EQ(verdict, "") << name << ": " << printed;
  }
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const Property& p : all_properties()) out.push_back(p.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, PropertySuite, ::testing::ValuesIn(names()), [](const auto& info) { return info.param; });

TEST(PropertyTokens, StaleAndForeignTokensAreErrors) {
  EXPECT_TRUE(property_of(ReproToken{"property/gtp_pieces_tile_chunks", {}}).ok());
  EXPECT_EQ(property_of(ReproToken{"property/no_such_property", {}}).error().kind, ErrorKind::invalid_argument);
  EXPECT_FALSE(property_of(ReproToken{"gate/pinned-layer-maps/x", {}}).ok());
}

TEST(PropertyTokens, ASpecTokenReplaysItsFixtureAndAnUnknownFixtureIsAnError) {
  ReferenceImplementation reference;
  const Property& property = **property_of(ReproToken{"property/gtp_pieces_tile_chunks", {}});
  const Replay holds =
      replay(reference, property, ReproToken{"property/gtp_pieces_tile_chunks", {{"spec", "review_tp2"}}});
  EXPECT_EQ(holds.outcome, ih::Outcome::passed) << holds.verdict;
  const Replay stale = replay(reference, property, ReproToken{"property/gtp_pieces_tile_chunks", {{"spec", "nope"}}});
  EXPECT_EQ(stale.outcome, ih::Outcome::harness_error);
  // The CLI refuses it before any target starts (exit 2), naming the spec cases there are.
  const Status checked = check_case(property, ReproToken{"property/gtp_pieces_tile_chunks", {{"spec", "nope"}}});
  ASSERT_FALSE(checked.ok());
  EXPECT_NE(checked.error().message.find("review_tp2"), std::string::npos) << checked.error().message;
  EXPECT_FALSE(check_case(property, ReproToken{"property/gtp_pieces_tile_chunks", {}}).ok());
}

// A token's checksum can be recomputed by anyone, so the rc= value itself is checked: RapidCheck
// asserts (aborts the process) on a Random it would never start a case with. Every single-character
// substitution of a real reproduce string is either refused or replayed to a verdict, in-process.
TEST(PropertyTokens, NoEditedReproduceStringAbortsTheReplay) {
  const std::string shrunk =
      "BYxZ0B3XwlWZjV2cfRXasV2XjhWdut2cAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgACIEAoRGAAAAFAAAAEQA";
  const Property& property = **property_of(ReproToken{"property/gtp_pieces_tile_chunks", {}});
  ASSERT_TRUE(check_reproduce(property.name, shrunk).ok());
  EXPECT_FALSE(check_reproduce("gtp_merge_restores_shard", shrunk).ok());
  EXPECT_FALSE(check_reproduce(property.name, shrunk.substr(0, 50)).ok());
  EXPECT_FALSE(check_reproduce(property.name, shrunk + " seed=3").ok());
  ReferenceImplementation reference;
  int refused = 0, replayed = 0;
  for (std::size_t i = 0; i < shrunk.size(); ++i)
    for (const char c : {'A', 'B', 'Q', 'g', 'w', '9', '_', '-'}) {
      std::string edited = shrunk;
      edited[i] = c;
      if (!check_reproduce(property.name, edited).ok()) {
        ++refused;
        continue;
      }
      ++replayed;
      replay(reference, property, ReproToken{"property/gtp_pieces_tile_chunks", {{"rc", edited}}});
    }
  // RapidCheck reads a truncated string past its end: every truncation is refused first.
  for (std::size_t length = 0; length < shrunk.size(); ++length)
    EXPECT_FALSE(check_reproduce(property.name, shrunk.substr(0, length)).ok()) << length;
  EXPECT_GT(refused, 0);
  EXPECT_GT(replayed, 0);
}

}  // namespace
}  // namespace ih::props
