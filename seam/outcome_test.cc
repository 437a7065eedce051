#include "seam/outcome.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

TEST(Outcome, ErrorsWithoutAVerdictAreNeverFindings) {
  EXPECT_EQ(outcome_of_error(seam_kind::unsupported), Outcome::not_run);
  EXPECT_EQ(outcome_of_error(seam_kind::timeout), Outcome::timeout);
  EXPECT_EQ(outcome_of_error(seam_kind::harness_error), Outcome::harness_error);
  EXPECT_EQ(outcome_of_error(ErrorKind::mixed_mlp_kinds), Outcome::failed);
  EXPECT_EQ(outcome_of_error(ErrorKind::sharding_assertion), Outcome::failed);
}

TEST(Outcome, EveryOutcomeReadsBackFromItsWordAndAnyOtherWordIsRefusedNamingIt) {
  for (const Outcome outcome : kAllOutcomes) {
    const auto parsed = parse_outcome(to_string(outcome));
    ASSERT_TRUE(parsed.ok()) << to_string(outcome);
    EXPECT_EQ(*parsed, outcome);
  }
  EXPECT_EQ(*parse_outcome("known finding"), Outcome::known_finding);
  const auto snake = parse_outcome("known_finding");  // the enum's identifier is not the report's word
  ASSERT_FALSE(snake.ok());
  EXPECT_EQ(snake.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(snake.error().message.find("'known_finding'"), std::string::npos);
}

TEST(Outcome, ExitCodesRankNoVerdictAboveFindingsAndNothingRanAboveOk) {
  using O = Outcome;
  EXPECT_EQ(exit_code_of({O::passed, O::not_run, O::known_finding}), kExitOk);
  EXPECT_EQ(exit_code_of({O::passed, O::failed}), kExitCheckFailed);
  EXPECT_EQ(exit_code_of({O::failed, O::timeout}), kExitTimeout);
  EXPECT_EQ(exit_code_of({O::timeout, O::harness_error, O::failed}), kExitHarnessError);
  EXPECT_EQ(exit_code_of({O::not_run, O::not_run}), kExitNothingRan);
}

}  // namespace
}  // namespace ih
