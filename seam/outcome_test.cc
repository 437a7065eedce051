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
