// The optimizer-resume checks judge each target's loaded rows against the rows the spec puts there
// (harness/gate/gate_invariants.cc): a target that answers the reference's rows, then the same rows with
// one planted change, must give exactly the violation that change makes.
#include <gtest/gtest.h>

#include <functional>

#include "harness/gate/gate.h"
#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

using Edit = std::function<void(OptimizerResumeAnswer&)>;

/// The reference, whose optimizer_resume answer passes through `edit` first.
class EditedResume : public ReferenceImplementation {
 public:
  explicit EditedResume(Edit edit) : edit_(std::move(edit)) {}
  Result<OptimizerResumeAnswer> optimizer_resume(const OptimizerResumeCase& c) override {
    IH_TRY_ASSIGN(answer, ReferenceImplementation::optimizer_resume(c));
    edit_(answer);
    return answer;
  }

 private:
  Edit edit_;
};

/// The spec-invariants check `name` run against the reference with `edit` applied to its answers.
CheckAnswer run_edited(const std::string& name, Edit edit) {
  EditedResume target(std::move(edit));
  for (const Check& check : spec_invariant_checks())
    if (check.name == name) return check.run(target);
  ADD_FAILURE() << "no check " << name;
  return {};
}

/// "kind key" of each violation.
std::vector<std::string> kinds_and_keys(const CheckAnswer& answer) {
  std::vector<std::string> out;
  for (const Violation& v : answer.violations) out.push_back(v.kind + " " + v.key);
  return out;
}

/// The exp_avg rows of load rank (t, g).
std::vector<LoadedRow>& exp_avg_of(OptimizerResumeAnswer& answer, std::int64_t t, std::int64_t g) {
  for (ResumedRank& rank : answer.ranks)
    if (rank.tp_rank == t && rank.gtp_rank == g) return rank.tensors.at(0).rows;
  throw std::out_of_range("no such load rank");
}

// optimizer_resume_tp_change: the GDP in_proj (D = 120 at TP 1: z, V0-V2 of 20 rows, then 6s and 4s) saved
// at TP 2 x GTP 2 (p 16), loaded at TP 1 x GTP 2 (p 16: R = 64). Its TP-local row 10 is z's row 10, which
// TP 2 put on TP rank 1 as its row 0; TP-local row 20 is V0's row 0, TP 2's rank 0 row 10 (spec 4.2).
constexpr const char* kTpChange = "optimizer_resume_tp_change";

TEST(OptimizerResumeCheck, TheReferencesRowsHold) {
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer&) {});
  EXPECT_EQ(answer.outcome, Outcome::passed) << answer.detail;
}

TEST(OptimizerResumeCheck, ARowFromAnotherSavedRowIsMisplaced) {
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer& a) {
    ASSERT_EQ(exp_avg_of(a, 0, 0).at(10).saved, (TpRow{1, 0}));  // the split of the comment above
    ASSERT_EQ(exp_avg_of(a, 0, 0).at(20).saved, (TpRow{0, 10}));
    exp_avg_of(a, 0, 0).at(10).saved = TpRow{0, 10};  // TP rank 0's row 10, as Megatron's R2 loads it
  });
  EXPECT_EQ(kinds_and_keys(answer), std::vector<std::string>{"rows_misplaced exp_avg"});
  EXPECT_NE(answer.detail.find("1 loaded exp_avg rows are not the saved ones (first: rank (t=0, g=0) row 10 "
                               "(TP-local row 10) holds the saved row 10 of TP rank 0, expected the saved row 0 "
                               "of TP rank 1)"),
            std::string::npos)
      << answer.detail;
}

TEST(OptimizerResumeCheck, ZerosOnARealRowValuesOnAPadRowAndStrayValuesAreMisplacedEach) {
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer& a) {
    exp_avg_of(a, 0, 0).at(3) = LoadedRow{};                           // a real row left zero
    exp_avg_of(a, 0, 1).at(63) = LoadedRow{TpRow{1, 59}, ""};          // pad row (TP-local 127) not zero
    exp_avg_of(a, 0, 1).at(0) = LoadedRow{std::nullopt, "value 7.5"};  // values no save wrote
  });
  EXPECT_EQ(kinds_and_keys(answer), std::vector<std::string>{"rows_misplaced exp_avg"});
  EXPECT_NE(answer.detail.find(": 3 loaded exp_avg rows"), std::string::npos) << answer.detail;
}

TEST(OptimizerResumeCheck, EveryTensorATargetReportsIsJudgedUnderItsOwnName) {
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer& a) {
    for (ResumedRank& rank : a.ranks) rank.tensors.insert(rank.tensors.begin(), {"weight", rank.tensors[0].rows});
    a.ranks.at(1).tensors.at(0).rows.at(5) = LoadedRow{};  // the weight alone
  });
  EXPECT_EQ(kinds_and_keys(answer), std::vector<std::string>{"rows_misplaced weight"});
}

TEST(OptimizerResumeCheck, AShiftedShardMisplacesItsRows) {
  // Rank g = 1 read as starting at TP-local row 0 instead of 64: each of its rows is judged against another row.
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer& a) { a.ranks.at(1).first_row = 0; });
  EXPECT_EQ(kinds_and_keys(answer), std::vector<std::string>{"rows_misplaced exp_avg"});
}

TEST(OptimizerResumeCheck, ARankOutsideTheLoadWorldIsAHarnessErrorNeverAVerdict) {
  const CheckAnswer answer = run_edited(kTpChange, [](OptimizerResumeAnswer& a) { a.ranks.at(1).tp_rank = 1; });
  EXPECT_EQ(answer.outcome, Outcome::harness_error) << answer.detail;
}

TEST(OptimizerResumeCheck, TheReferencesPlainLinearMisplacesR2sRows) {
  // Addendum B's worked example: at TP 2, GTP 2 -> 4 (p 32) the composite entry reads TP rank 1's 60 rows
  // into TP rank 0's pad rows and leaves TP rank 1's 60 real rows zero: 120 rows (the reference's R2 pin).
  const CheckAnswer answer = run_edited("gtp_linear_resume_tp2_gtp_change", [](OptimizerResumeAnswer&) {});
  EXPECT_EQ(kinds_and_keys(answer), std::vector<std::string>{"rows_misplaced exp_avg"});
  EXPECT_NE(answer.detail.find(": 120 loaded exp_avg rows"), std::string::npos) << answer.detail;
}

}  // namespace
}  // namespace ih::gate
