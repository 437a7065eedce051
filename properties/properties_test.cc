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
}

}  // namespace
}  // namespace ih::props
