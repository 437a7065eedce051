// The change a base gives the gate's verdicts, from in-memory results: which moves are worse (a new failure, a
// known finding failing differently, a check that stopped running), which are better, which have no verdict,
// the worse ones listed first, the exit code, and the same results on both sides giving no change at all.
#include "harness/gate/gate_delta.h"

#include <gtest/gtest.h>

namespace ih::gate {
namespace {

CheckResult result(const std::string& name, Outcome outcome, const std::string& detail = "",
                   Violations violations = {}) {
  CheckResult r;
  r.group = "g";
  r.name = name;
  r.answer.outcome = outcome;
  r.answer.detail = detail;
  r.answer.violations = std::move(violations);
  if (outcome == Outcome::known_finding) r.known_finding = "pinned [x.finding]";
  return r;
}

/// The one change of a base with check `a` as `base` and a new run with it as `now`.
std::vector<Change> one(const CheckResult& base, const CheckResult& now) { return gate_delta({base}, {now}); }

TEST(GateDelta, SameResultsOnBothSidesAreNoChange) {
  const std::vector<CheckResult> run = {result("a", Outcome::passed),
                                        result("b", Outcome::failed, "rows 3..4 misplaced"),
                                        result("c", Outcome::known_finding, "x", {{"rows_misplaced", "w", "x"}}),
                                        result("d", Outcome::not_run, "no GPU"),
                                        result("e", Outcome::harness_error, "adapter crashed"),
                                        result("f", Outcome::passed, "the known finding ... no longer reproduces")};
  const auto delta = gate_delta(run, run);
  EXPECT_TRUE(delta.empty());
  EXPECT_EQ(exit_with_delta(kExitHarnessError, delta), kExitHarnessError);
  EXPECT_EQ(delta_counts(delta), "against base: 0 worse, 0 better, 0 other");
  EXPECT_NE(change_section("base B", delta).find("none"), std::string::npos);
}

TEST(GateDelta, TheCrossVersionRoundTripsOnlyTheGatedSideRunsAreNoChange) {
  CheckResult cross = result("base-to-new_real_a_4_to_2", Outcome::failed, "12 of 40 elements wrong");
  cross.group = kRealRoundTripCrossGroup;
  const auto delta = gate_delta({result("a", Outcome::passed)}, {result("a", Outcome::passed), cross});
  EXPECT_TRUE(delta.empty());
  // Its failure is the gated tree's own verdict: the exit stays the new tree's.
  EXPECT_EQ(exit_with_delta(kExitCheckFailed, delta), kExitCheckFailed);
}

TEST(GateDelta, ANewFailureIsWorseAndFailsTheGateEvenWhereTheNewTreeAloneWouldGiveNoVerdict) {
  const auto delta = one(result("a", Outcome::passed), result("a", Outcome::failed, "element 7 wrong"));
  ASSERT_EQ(delta.size(), 1u);
  EXPECT_EQ(delta[0].kind, ChangeKind::new_failure);
  EXPECT_TRUE(delta[0].worse());
  EXPECT_EQ(delta[0].base, "ok");
  EXPECT_EQ(delta[0].now, "FAILED");
  EXPECT_EQ(exit_with_delta(kExitHarnessError, delta), kExitCheckFailed);
  EXPECT_EQ(exit_with_delta(kExitOk, delta), kExitCheckFailed);
  // A known finding that reproduces where the base passed is a failure the change brought back.
  EXPECT_EQ(one(result("a", Outcome::passed), result("a", Outcome::known_finding))[0].kind, ChangeKind::new_failure);
  EXPECT_EQ(one(result("a", Outcome::not_run), result("a", Outcome::failed))[0].kind, ChangeKind::new_failure);
}

TEST(GateDelta, FixedAndAStaleFindingAreBetterAndLeaveTheExitToTheNewTree) {
  const auto fixed = one(result("a", Outcome::failed, "x"), result("a", Outcome::passed));
  ASSERT_EQ(fixed.size(), 1u);
  EXPECT_EQ(fixed[0].kind, ChangeKind::fixed);
  EXPECT_FALSE(fixed[0].worse());
  EXPECT_EQ(exit_with_delta(kExitOk, fixed), kExitOk);
  const auto stale = one(result("a", Outcome::known_finding, "x"), result("a", Outcome::passed, "no longer ..."));
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_EQ(stale[0].kind, ChangeKind::finding_stale);
  EXPECT_EQ(stale[0].now, "ok (known finding no longer reproduces)");
  EXPECT_EQ(delta_counts(stale), "against base: 0 worse, 1 better, 0 other");
}

TEST(GateDelta, AKnownFindingFailingDifferentlyIsWorse) {
  const auto delta = one(result("a", Outcome::known_finding, "x", {{"rows_misplaced", "w", "x"}}),
                         result("a", Outcome::failed, "not the known finding: ...", {{"elements_wrong", "w", "y"}}));
  ASSERT_EQ(delta.size(), 1u);
  EXPECT_EQ(delta[0].kind, ChangeKind::failing_differently);
  EXPECT_TRUE(delta[0].worse());
  EXPECT_EQ(delta[0].base, "known finding");
}

TEST(GateDelta, AFailureIsComparedOnItsTypedViolationsNotTheirText) {
  const auto same = one(result("a", Outcome::failed, "t1", {{"rows_misplaced", "w", "rows 1..2 in /tmp/run-a"}}),
                        result("a", Outcome::failed, "t2", {{"rows_misplaced", "w", "rows 1..2 in /tmp/run-b"}}));
  EXPECT_TRUE(same.empty());
  const auto other = one(result("a", Outcome::failed, "t", {{"rows_misplaced", "w", "t"}}),
                         result("a", Outcome::failed, "t", {{"rows_misplaced", "v", "t"}}));
  ASSERT_EQ(other.size(), 1u);
  EXPECT_EQ(other[0].kind, ChangeKind::failing_differently);
  // A simple check (no typed violations) is compared on its detail.
  EXPECT_EQ(one(result("a", Outcome::failed, "x"), result("a", Outcome::failed, "y")).size(), 1u);
}

TEST(GateDelta, NotRunChanges) {
  const auto stopped = one(result("a", Outcome::passed), result("a", Outcome::not_run, "module gone"));
  ASSERT_EQ(stopped.size(), 1u);
  EXPECT_EQ(stopped[0].kind, ChangeKind::stopped_running);
  EXPECT_TRUE(stopped[0].worse()) << "a check that did not run is never a pass";
  EXPECT_EQ(exit_with_delta(kExitOk, stopped), kExitCheckFailed);
  const auto runs = one(result("a", Outcome::not_run, "no factory"), result("a", Outcome::passed));
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0].kind, ChangeKind::runs_now);
  EXPECT_FALSE(runs[0].worse());
  // A NOT RUN reason that changed is no change of verdict.
  EXPECT_TRUE(one(result("a", Outcome::not_run, "r1"), result("a", Outcome::not_run, "r2")).empty());
}

TEST(GateDelta, AHarnessErrorNowIsNoVerdictNotWorse) {
  const auto delta = one(result("a", Outcome::passed), result("a", Outcome::harness_error, "plan bug"));
  ASSERT_EQ(delta.size(), 1u);
  EXPECT_EQ(delta[0].kind, ChangeKind::no_verdict_now);
  EXPECT_FALSE(delta[0].worse());
  EXPECT_EQ(exit_with_delta(kExitHarnessError, delta), kExitHarnessError);
  EXPECT_EQ(one(result("a", Outcome::timeout), result("a", Outcome::passed))[0].kind, ChangeKind::verdict_again);
}

TEST(GateDelta, ACheckOnOneSideOnlyIsListed) {
  const auto delta = gate_delta({result("gone", Outcome::passed)}, {result("added", Outcome::failed, "x")});
  ASSERT_EQ(delta.size(), 2u);
  EXPECT_EQ(delta[0].check, "gate/g/added");
  EXPECT_EQ(delta[0].kind, ChangeKind::new_failure);
  EXPECT_EQ(delta[0].base, "absent");
  EXPECT_EQ(delta[1].check, "gate/g/gone");
  EXPECT_EQ(delta[1].kind, ChangeKind::only_on_base);
  EXPECT_EQ(delta[1].now, "absent");
  EXPECT_FALSE(delta[1].worse());
  // A passing check the base lacked is listed, and is no worse.
  const auto added = gate_delta({}, {result("added", Outcome::passed)});
  ASSERT_EQ(added.size(), 1u);
  EXPECT_EQ(added[0].kind, ChangeKind::runs_now);
}

TEST(GateDelta, WorseChangesComeFirstInTheSection) {
  const std::vector<CheckResult> base = {result("fixed", Outcome::failed, "x"), result("broke", Outcome::passed),
                                         result("crashed", Outcome::passed)};
  const std::vector<CheckResult> now = {result("fixed", Outcome::passed),
                                        result("broke", Outcome::failed, "element 3 wrong\nmore"),
                                        result("crashed", Outcome::harness_error, "adapter died")};
  const auto delta = gate_delta(base, now);
  ASSERT_EQ(delta.size(), 3u);
  EXPECT_EQ(delta[0].check, "gate/g/broke");
  EXPECT_EQ(delta[1].check, "gate/g/crashed");
  EXPECT_EQ(delta[2].check, "gate/g/fixed");
  const std::string section = change_section("megatron at /base", delta);
  EXPECT_EQ(section,
            "CHANGE against base megatron at /base: 3 checks differ\n"
            "WORSE gate/g/broke: FAILED (base: ok) new_failure\n"
            "      element 3 wrong\n"
            "NO VERDICT gate/g/crashed: HARNESS ERROR (base: ok) no_verdict_now\n"
            "      adapter died\n"
            "CHANGED gate/g/fixed: ok (base: FAILED) fixed\n");
  EXPECT_EQ(delta_counts(delta), "against base: 1 worse, 1 better, 1 other");
}

}  // namespace
}  // namespace ih::gate
