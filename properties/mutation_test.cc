// Every MutantImplementation must be killed by at least one property (spec section 6): a property
// that no planted bug can fail proves nothing, and a mutant no property kills is a blind spot.
#include <gtest/gtest.h>

#include <iostream>

#include "mutants/mutant_implementation.h"
#include "properties/suite.h"
#include "seam/reference_implementation.h"

namespace ih::props {
namespace {

class MutantKilled : public ::testing::TestWithParam<std::string> {};

TEST_P(MutantKilled, BySomeProperty) {
  auto mutant = MutantImplementation::create(GetParam());
  ASSERT_TRUE(mutant.ok());
  std::vector<std::string> killers;
  for (const Property& p : all_properties()) {
    bool killed = false;
    for (const auto& [name, fixture] : p.fixtures) killed = killed || !fixture(**mutant).second.empty();
    RunParams params;
    params.cases = 40;
    if (!killed) killed = p.run(**mutant, params).outcome == ih::Outcome::failed;
    if (killed) killers.push_back(p.name);
  }
  std::cout << "mutant " << GetParam() << " killed by:";
  for (const std::string& k : killers) std::cout << " " << k;
  std::cout << (killers.empty() ? " NOTHING" : "") << "\n";
  EXPECT_FALSE(killers.empty()) << "mutant " << GetParam() << " survives every property";
}

// A property that types its verdict (typed_verdict) hands the kind to its failed spec case and to
// its shrunk generated case: the gate's typed violation, which known findings match. A case that
// holds carries none.
TEST(TypedVerdicts, ReachTheSpecCaseAndTheShrunkCase) {
  auto mutant = MutantImplementation::create("load_to_state_dict_baseline");
  ASSERT_TRUE(mutant.ok());
  const Property& property = **property_of(ReproToken{"property/load_orders_agree", {}});
  const Replay spec_case = run_spec_case(**mutant, property, "all_padding_rank");
  EXPECT_EQ(spec_case.outcome, ih::Outcome::failed);
  EXPECT_EQ(spec_case.failure_kind, "to_state_dict_failed") << spec_case.verdict;
  RunParams params;
  params.cases = 40;
  const PropertyRun run = property.run(**mutant, params);
  EXPECT_EQ(run.outcome, ih::Outcome::failed);
  EXPECT_EQ(run.failure_kind, "to_state_dict_failed") << run.description;
  ReferenceImplementation reference;
  const Replay holds = run_spec_case(reference, property, "all_padding_rank");
  EXPECT_EQ(holds.outcome, ih::Outcome::passed) << holds.verdict;
  EXPECT_EQ(holds.failure_kind, "");
}

std::vector<std::string> names() {
  std::vector<std::string> out;
  for (const MutantInfo& m : mutant_catalogue()) out.push_back(m.name);
  return out;
}

INSTANTIATE_TEST_SUITE_P(All, MutantKilled, ::testing::ValuesIn(names()), [](const auto& info) { return info.param; });

}  // namespace
}  // namespace ih::props
