// Each property of the suite as a GoogleTest case against the reference at the CI budget
// (IH_PROPERTY_CASES, default 30 cases; RC_PARAMS seeds and reproduce strings still apply).
#include <gtest/gtest.h>

#include <cstdlib>

#include "seam/reference_implementation.h"
#include "properties/suite.h"

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
  const Outcome o = property.run(reference, params);
  EXPECT_TRUE(o.ok) << o.description << "\ncase: " << o.counterexample << "\ninterop-harness repro "
                    << to_string(Token{property.name, "reference", "rc", o.reproduce});
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

INSTANTIATE_TEST_SUITE_P(All, PropertySuite, ::testing::ValuesIn(names()),
                         [](const auto& info) { return info.param; });

TEST(Tokens, RoundTrip) {
  const Token token{"gtp_pieces_tile_chunks", "mutant.gtp_offset_no_tp_term", "spec", "review_tp2"};
  const auto parsed = parse_token(to_string(token));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(to_string(*parsed), to_string(token));
  EXPECT_FALSE(parse_token("prop:no_such_property:reference:rc=x").ok());
  EXPECT_FALSE(parse_token("reference:-:3").ok());
}

}  // namespace
}  // namespace ih::props
