// The gate's own logic, without Megatron: known findings read from corpus/findings/ and matched on a
// failure's typed violations (kind and key) or its texts, results typed into Outcomes, and the run
// loop's progress words, summary table, verdict line and exit code. Checks here are small lambdas
// that answer what each test needs; the target they get is the reference, which none of them asks.
#include "harness/gate/gate.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

namespace fs = std::filesystem;

/// A corpus folder of its own, removed at the end of the test.
class Corpus {
 public:
  Corpus() {
    char dir[] = "/tmp/ih-gate-test-XXXXXX";
    root_ = mkdtemp(dir) ? dir : "";
    fs::create_directories(root_ / "findings");
  }
  ~Corpus() {
    std::error_code ignored;
    fs::remove_all(root_, ignored);
  }
  /// Writes findings/<file>: the token's pin, a reason, then `lines` as they are.
  void pin(const std::string& file, const ReproToken& token, const std::string& lines) {
    std::ofstream(root_ / "findings" / file) << format_pinned({token, "why it is wrong"}) << lines;
  }
  std::string dir() const { return root_.string(); }

 private:
  fs::path root_;
};

ReproToken token_for(const std::string& check, std::map<std::string, std::string> options = {}) {
  return ReproToken{check, std::move(options)};
}

const std::string kCheck = "gate/spec-invariants/resume";
const ReproToken kMegatron = token_for(kCheck, {{"target", "megatron"}});

KnownFindings loaded(const Corpus& corpus) {
  auto known = load_known_findings(corpus.dir());
  EXPECT_TRUE(known.ok()) << known.error().message;
  return known.ok() ? *known : KnownFindings{};
}

Violation violation(std::string kind, std::string key) { return {kind, key, kind + " at " + key}; }

// ---- reading corpus/findings/*.finding ----------------------------------------------------------------

TEST(GateWithoutTarget, AMegatronThatDoesNotImportFailsOneCheckAndRunsNoOther) {
  const std::vector<Check> checks = {Check::simple("pattern", "a", [](Implementation&) { return std::string(); }),
                                     Check::simple("roundtrip", "b", [](Implementation&) { return std::string(); })};
  ReproToken base;
  base.options["target"] = "megatron";
  const auto results = results_without_target(checks, base, "Megatron does not import: NameError");
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].token.check, "gate/megatron/imports");
  EXPECT_EQ(results[0].answer.outcome, Outcome::failed);
  EXPECT_EQ(results[0].answer.detail, "Megatron does not import: NameError");
  for (std::size_t i = 1; i < results.size(); ++i) {
    EXPECT_EQ(results[i].token.check, checks[i - 1].check_name());
    EXPECT_EQ(results[i].answer.outcome, Outcome::not_run);
    EXPECT_EQ(results[i].token.options.at("target"), "megatron");
  }
  EXPECT_EQ(verdict_line(1, results), "gate: FAILED (1 failed, 0 passed, 2 not run)");
  EXPECT_FALSE(has_repro(results[0]));  // nothing to replay but the gate itself
}

TEST(KnownFindingFiles, ViolationLinesAreKindThenTheRestOfTheLineAsKey) {
  Corpus corpus;
  corpus.pin("r1.megatron.finding", kMegatron,
             "violation: rows_misplaced exp_avg of in_proj\nviolation: load_refused/global_shape_mismatch k\n");
  const KnownFindings known = loaded(corpus);
  ASSERT_EQ(known.findings.size(), 1u);
  const KnownFinding& finding = known.findings[0];
  EXPECT_EQ(finding.file, "r1.megatron.finding");
  EXPECT_EQ(finding.pin.reason, "why it is wrong");
  EXPECT_EQ(finding.violations,
            (std::set<std::pair<std::string, std::string>>{{"rows_misplaced", "exp_avg of in_proj"},
                                                           {"load_refused/global_shape_mismatch", "k"}}));
  EXPECT_TRUE(finding.expect.empty());
}

TEST(KnownFindingFiles, ExpectLinesPinAnUntypedCheckAndOtherFilesAreIgnored) {
  Corpus corpus;
  corpus.pin("b.finding", kMegatron, "expect: first text\nexpect: second text\n");
  corpus.pin("a.finding.txt", kMegatron, "expect: never read\n");
  const KnownFindings known = loaded(corpus);
  ASSERT_EQ(known.findings.size(), 1u);
  EXPECT_EQ(known.findings[0].expect, (std::vector<std::string>{"first text", "second text"}));
}

TEST(KnownFindingFiles, AreReadInNameOrder) {
  Corpus corpus;
  corpus.pin("b.finding", token_for("gate/g/b"), "expect: b\n");
  corpus.pin("a.finding", token_for("gate/g/a"), "expect: a\n");
  const KnownFindings known = loaded(corpus);
  ASSERT_EQ(known.findings.size(), 2u);
  EXPECT_EQ(known.findings[0].file, "a.finding");
  EXPECT_EQ(known.findings[1].file, "b.finding");
}

TEST(KnownFindingFiles, ACorpusWithoutFindingsHasNone) {
  Corpus corpus;
  fs::remove_all(fs::path(corpus.dir()) / "findings");
  EXPECT_TRUE(loaded(corpus).findings.empty());
}

TEST(KnownFindingFiles, APinWithNeitherOrBothKindsOfLineIsRefusedNamingTheFile) {
  for (const std::string lines : {"", "expect: a text\nviolation: kind key\n"}) {
    Corpus corpus;
    corpus.pin("bad.finding", kMegatron, lines);
    const auto known = load_known_findings(corpus.dir());
    ASSERT_FALSE(known.ok()) << "lines: " << lines;
    EXPECT_EQ(known.error().kind, ErrorKind::invalid_argument);
    EXPECT_NE(known.error().message.find("bad.finding"), std::string::npos) << known.error().message;
    EXPECT_NE(known.error().message.find("not both"), std::string::npos) << known.error().message;
  }
}

TEST(KnownFindingFiles, AViolationLineWithoutAKeyIsRefused) {
  for (const std::string line : {"violation: rows_misplaced\n", "violation:  key\n", "violation: kind \n"}) {
    Corpus corpus;
    corpus.pin("bad.finding", kMegatron, line);
    const auto known = load_known_findings(corpus.dir());
    ASSERT_FALSE(known.ok()) << line;
    EXPECT_NE(known.error().message.find("'<kind> <key>'"), std::string::npos) << known.error().message;
  }
}

TEST(KnownFindingFiles, AFileWithoutAValidTokenIsRefusedNamingTheFile) {
  Corpus corpus;
  std::ofstream(fs::path(corpus.dir()) / "findings" / "broken.finding") << "reason: no token\nexpect: x\n";
  const auto known = load_known_findings(corpus.dir());
  ASSERT_FALSE(known.ok());
  EXPECT_NE(known.error().message.find("broken.finding"), std::string::npos) << known.error().message;
}

// ---- which pin a token's check matches --------------------------------------------------------------

KnownFinding pinned(ReproToken token, std::string file) {
  KnownFinding finding;
  finding.pin = {std::move(token), "reason of " + file};
  finding.expect = {"x"};
  finding.file = std::move(file);
  return finding;
}

/// The file of the pin `token` matches among `findings`, if any.
std::optional<std::string> matched(const std::vector<KnownFinding>& findings, const ReproToken& token) {
  const KnownFindings known{findings};
  const KnownFinding* found = known.match(token);
  return found ? std::optional<std::string>(found->file) : std::nullopt;
}

TEST(KnownFindingMatch, SameCheckAndTargetOnly) {
  const std::vector<KnownFinding> findings = {pinned(kMegatron, "m.finding")};
  EXPECT_EQ(matched(findings, kMegatron), "m.finding");
  EXPECT_EQ(matched(findings, token_for(kCheck)), std::nullopt);  // the reference: another target
  EXPECT_EQ(matched(findings, token_for("gate/spec-invariants/other", {{"target", "megatron"}})), std::nullopt);
}

TEST(KnownFindingMatch, OptionsThatAreNotPinnedDoNotMatter) {
  const std::vector<KnownFinding> findings = {pinned(kMegatron, "m.finding")};
  EXPECT_EQ(matched(findings, token_for(kCheck, {{"target", "megatron"},
                                                 {"mutant", "some_mutant"},
                                                 {"candidate", "shard-split"},
                                                 {"megatron-version", "0.19.2"},
                                                 {"seed", "7"}})),
            "m.finding");
}

TEST(KnownFindingMatch, APinnedMutantOrCandidateMatchesOnlyThatOne) {
  for (const char* option : {"mutant", "candidate"}) {
    const std::vector<KnownFinding> findings = {
        pinned(token_for(kCheck, {{"target", "megatron"}, {option, "this"}}), "pinned.finding")};
    EXPECT_EQ(matched(findings, token_for(kCheck, {{"target", "megatron"}, {option, "this"}})), "pinned.finding");
    EXPECT_EQ(matched(findings, token_for(kCheck, {{"target", "megatron"}, {option, "other"}})), std::nullopt);
    EXPECT_EQ(matched(findings, kMegatron), std::nullopt) << option;
  }
}

TEST(KnownFindingMatch, AReleasePinMatchesOnlyItsReleaseAndWinsOverAPinOfEveryVersion) {
  const ReproToken on_release = token_for(kCheck, {{"target", "megatron"}, {"megatron-version", "0.19.2"}});
  const ReproToken elsewhere = token_for(kCheck, {{"target", "megatron"}, {"megatron-version", "0.20.0"}});
  const std::vector<KnownFinding> findings = {pinned(kMegatron, "any-version.finding"),
                                              pinned(on_release, "release.finding"),
                                              pinned(kMegatron, "second-any-version.finding")};
  EXPECT_EQ(matched(findings, on_release), "release.finding");
  EXPECT_EQ(matched(findings, elsewhere), "any-version.finding");  // the first pin of every version
  const std::vector<KnownFinding> release_only = {findings[1]};
  EXPECT_EQ(matched(release_only, elsewhere), std::nullopt);
  EXPECT_EQ(matched(release_only, kMegatron), std::nullopt);  // a token that names no release
}

// ---- whether a failure is exactly the pinned one --------------------------------------------------------

KnownFinding typed_pin(std::set<std::pair<std::string, std::string>> violations) {
  KnownFinding finding;
  finding.pin = {kMegatron, "R1"};
  finding.violations = std::move(violations);
  finding.file = "r1.finding";
  return finding;
}

CheckAnswer failed_with(Violations violations) {
  CheckAnswer answer{Outcome::failed, "detail"};
  answer.violations = std::move(violations);
  return answer;
}

TEST(KnownFindingMismatch, TheSameViolationsInAnyOrderAndRepeatedAreTheFinding) {
  const KnownFinding finding = typed_pin({{"rows_misplaced", "a"}, {"load_refused", "b"}});
  EXPECT_EQ(finding.mismatch(failed_with(
                {violation("load_refused", "b"), violation("rows_misplaced", "a"), violation("rows_misplaced", "a")})),
            std::nullopt);
}

TEST(KnownFindingMismatch, AViolationThePinDoesNotListIsNamed) {
  const KnownFinding finding = typed_pin({{"rows_misplaced", "a"}});
  const auto why = finding.mismatch(failed_with({violation("rows_misplaced", "a"), violation("rows_misplaced", "b")}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("does not expect: rows_misplaced b"), std::string::npos) << *why;
  EXPECT_NE(why->find("r1.finding"), std::string::npos) << *why;
}

TEST(KnownFindingMismatch, SameKeyOtherKindIsAnotherFailure) {
  const auto why = typed_pin({{"rows_misplaced", "a"}}).mismatch(failed_with({violation("load_refused", "a")}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("does not expect: load_refused a"), std::string::npos) << *why;
}

TEST(KnownFindingMismatch, APinnedViolationTheFailureLacksIsNamed) {
  const KnownFinding finding = typed_pin({{"rows_misplaced", "a"}, {"rows_misplaced", "b"}});
  const auto why = finding.mismatch(failed_with({violation("rows_misplaced", "a")}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("expects the violation 'rows_misplaced b', which this failure lacks"), std::string::npos) << *why;
}

TEST(KnownFindingMismatch, ATypedPinNeverMatchesAFailureWithoutViolations) {
  const auto why = typed_pin({{"rows_misplaced", "a"}}).mismatch(failed_with({}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("lacks"), std::string::npos) << *why;
}

TEST(KnownFindingMismatch, AnExpectPinNeverMatchesATypedFailure) {
  KnownFinding finding = pinned(kMegatron, "texts.finding");
  const auto why = finding.mismatch(failed_with({violation("rows_misplaced", "a")}));
  ASSERT_TRUE(why);
  EXPECT_NE(why->find("has no 'violation: ' lines"), std::string::npos) << *why;
}

TEST(KnownFindingMismatch, ExpectTextsMustCoverEveryDetailLineAndEachBeFound) {
  KnownFinding finding = pinned(kMegatron, "texts.finding");
  finding.expect = {"refused key a", "refused key b"};
  const auto answer = [](std::string detail) { return CheckAnswer{Outcome::failed, std::move(detail)}; };
  EXPECT_EQ(finding.mismatch(answer("load refused key a (TP 2)\n      load refused key b\n")), std::nullopt);
  const auto extra = finding.mismatch(answer("refused key a\n      refused key b\n      refused key c"));
  ASSERT_TRUE(extra);
  EXPECT_NE(extra->find("does not expect: refused key c"), std::string::npos) << *extra;
  const auto lacking = finding.mismatch(answer("refused key a"));
  ASSERT_TRUE(lacking);
  EXPECT_NE(lacking->find("expects 'refused key b', which this failure lacks"), std::string::npos) << *lacking;
}

// ---- a check's result typed into an Outcome -------------------------------------------------------------

TEST(CheckOutcome, ASimpleCheckPassesOnEmptyAndFailsWithItsText) {
  EXPECT_EQ(answer_of(std::string()).outcome, Outcome::passed);
  const CheckAnswer failed = answer_of(std::string("rows differ"));
  EXPECT_EQ(failed.outcome, Outcome::failed);
  EXPECT_EQ(failed.detail, "rows differ");
}

TEST(CheckOutcome, AnErrorAnswerIsTypedByItsKind) {
  const std::vector<std::pair<ErrorKind, Outcome>> cases = {
      {seam_kind::unsupported, Outcome::not_run},
      {seam_kind::timeout, Outcome::timeout},
      {seam_kind::harness_error, Outcome::harness_error},
      {ErrorKind::mixed_mlp_kinds, Outcome::failed},  // the target's own refusal: a finding
      {ErrorKind::invalid_argument, Outcome::failed}};
  for (const auto& [kind, outcome] : cases) {
    const CheckAnswer answer = answer_of(Result<std::string>(make_error(kind, "what happened")));
    EXPECT_EQ(answer.outcome, outcome) << to_string(kind);
    EXPECT_EQ(answer.detail, std::string(to_string(kind)) + ": what happened");
  }
}

TEST(CheckOutcome, ATypedCheckJoinsItsViolationsIntoTheDetailAndKeepsThem) {
  ReferenceImplementation target;
  const Check check = Check::typed("g", "n", [](Implementation&) -> Result<Violations> {
    return Violations{violation("rows_misplaced", "a"), violation("load_refused", "b")};
  });
  const CheckAnswer answer = check.run(target);
  EXPECT_EQ(answer.outcome, Outcome::failed);
  EXPECT_EQ(answer.detail, "rows_misplaced at a\n      load_refused at b");
  ASSERT_EQ(answer.violations.size(), 2u);
  EXPECT_EQ(answer.violations[1].key, "b");
  EXPECT_EQ(
      Check::typed("g", "n", [](Implementation&) -> Result<Violations> { return Violations{}; }).run(target).outcome,
      Outcome::passed);
  const CheckAnswer refused = Check::typed("g", "n", [](Implementation&) -> Result<Violations> {
                                return make_error(seam_kind::unsupported, "no GTP here");
                              }).run(target);
  EXPECT_EQ(refused.outcome, Outcome::not_run);
  EXPECT_TRUE(refused.violations.empty());
}

TEST(CheckOutcome, CheckNamesAreUniqueAndSlugged) {
  const auto holds = [](Implementation&) { return CheckAnswer{}; };
  EXPECT_EQ((Check{"spec invariants", "resume", holds}.check_name()), "gate/spec-invariants/resume");
  EXPECT_TRUE(with_unique_names({{"g", "a", holds}, {"g", "b", holds}, {"h", "a", holds}}).ok());
  const auto twice = with_unique_names({{"g", "a", holds}, {"g", "a", holds}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("'gate/g/a'"), std::string::npos) << twice.error().message;
}

// ---- the run loop -------------------------------------------------------------------------------------

Check answering(std::string name, CheckAnswer answer) {
  return {"spec-invariants", std::move(name), [answer](Implementation&) { return answer; }};
}

struct GateRun {
  std::vector<CheckResult> results;
  std::string progress;
};

GateRun run_gate(const std::vector<Check>& checks, const KnownFindings& known = {},
                 const ReproToken& base = kMegatron) {
  ReferenceImplementation target;
  std::ostringstream progress;
  GateRun out;
  out.results = run_checks(target, checks, base, known, progress);
  out.progress = progress.str();
  return out;
}

std::vector<Outcome> outcomes(const std::vector<CheckResult>& results) {
  std::vector<Outcome> out;
  for (const CheckResult& r : results) out.push_back(r.answer.outcome);
  return out;
}

TEST(RunLoop, AFailureThatIsExactlyThePinnedFindingIsAKnownFinding) {
  Corpus corpus;
  corpus.pin("r1.megatron.finding", kMegatron, "violation: rows_misplaced a\n");
  const GateRun r = run_gate({answering("resume", failed_with({violation("rows_misplaced", "a")}))}, loaded(corpus));
  ASSERT_EQ(r.results.size(), 1u);
  EXPECT_EQ(r.results[0].answer.outcome, Outcome::known_finding);
  EXPECT_EQ(r.results[0].known_finding, "why it is wrong [r1.megatron.finding]");
  EXPECT_EQ(r.progress, "INFO: [1/1] spec-invariants: resume ... known finding\n");
  EXPECT_TRUE(has_repro(r.results[0]));
  EXPECT_EQ(exit_code_of(outcomes(r.results)), kExitOk);
  EXPECT_EQ(verdict_line(kExitOk, r.results), "gate: PASSED (0 passed, 1 known finding)");
}

TEST(RunLoop, AFailureOfAPinnedCheckThatFailsDifferentlyStaysFailedAndSaysWhy) {
  Corpus corpus;
  corpus.pin("r1.megatron.finding", kMegatron, "violation: rows_misplaced a\n");
  const GateRun r = run_gate({answering("resume", failed_with({violation("rows_misplaced", "b")}))}, loaded(corpus));
  EXPECT_EQ(r.results[0].answer.outcome, Outcome::failed);
  EXPECT_FALSE(r.results[0].known_finding);
  EXPECT_EQ(r.results[0].answer.detail.rfind("not the known finding: a violation the finding pinned in "
                                             "r1.megatron.finding does not expect: rows_misplaced b\n      detail",
                                             0),
            0u)
      << r.results[0].answer.detail;
  EXPECT_EQ(exit_code_of(outcomes(r.results)), kExitCheckFailed);
  EXPECT_NE(summary_table(r.results).find("FAILED spec-invariants: resume\n      not the known finding"),
            std::string::npos);
}

TEST(RunLoop, APinnedCheckThatPassesIsAStaleFinding) {
  Corpus corpus;
  corpus.pin("r1.megatron.finding", kMegatron, "violation: rows_misplaced a\n");
  const GateRun r = run_gate({answering("resume", CheckAnswer{}), answering("other", CheckAnswer{})}, loaded(corpus));
  EXPECT_EQ(r.results[0].answer.outcome, Outcome::passed);
  EXPECT_EQ(r.results[0].answer.detail,
            "the known finding pinned for this check no longer reproduces (why it is wrong): remove "
            "r1.megatron.finding from corpus/findings/");
  EXPECT_EQ(stale_findings(r.results), 1);
  EXPECT_EQ(r.progress,
            "INFO: [1/2] spec-invariants: resume ... ok (known finding no longer reproduces)\n"
            "INFO: [2/2] spec-invariants: other ... ok\n");
  EXPECT_EQ(verdict_line(exit_code_of(outcomes(r.results)), r.results), "gate: PASSED (2 passed, 1 stale finding)");
  EXPECT_NE(summary_table(r.results).find("STALE FINDING spec-invariants: resume"), std::string::npos);
  EXPECT_FALSE(has_repro(r.results[0]));
}

TEST(RunLoop, APinOnAnotherTargetIsNotMatched) {
  Corpus corpus;
  corpus.pin("r1.reference.finding", token_for(kCheck), "violation: rows_misplaced a\n");
  const GateRun r = run_gate({answering("resume", failed_with({violation("rows_misplaced", "a")}))}, loaded(corpus));
  EXPECT_EQ(r.results[0].answer.outcome, Outcome::failed);
  EXPECT_EQ(r.results[0].answer.detail, "detail");
}

TEST(RunLoop, NoVerdictOutcomesAreNeverMatchedToAFinding) {
  Corpus corpus;
  corpus.pin("r1.megatron.finding", kMegatron, "expect: x\n");
  for (const Outcome outcome : {Outcome::harness_error, Outcome::timeout, Outcome::not_run}) {
    const GateRun r = run_gate({answering("resume", CheckAnswer{outcome, "x"})}, loaded(corpus));
    EXPECT_EQ(r.results[0].answer.outcome, outcome);
    EXPECT_EQ(r.results[0].answer.detail, "x");
    EXPECT_FALSE(r.results[0].known_finding);
  }
}

TEST(RunLoop, ANotRunCheckKeepsItsReasonOnly) {
  CheckAnswer answer{Outcome::not_run, "no GTP here", "a case", ReproToken{"property/p", {{"rc", "x"}}}};
  answer.layout = props::GtpCase{};
  const GateRun r = run_gate({answering("resume", answer)});
  const CheckResult& result = r.results[0];
  EXPECT_EQ(result.answer.detail, "no GTP here");
  EXPECT_TRUE(result.answer.minimal_case.empty());
  EXPECT_FALSE(result.answer.case_token);
  EXPECT_FALSE(result.answer.layout);
  EXPECT_EQ(result.token.check, kCheck);  // the check's own token, not the case's
  EXPECT_FALSE(has_repro(result));
}

TEST(RunLoop, ACaseTokenGetsTheRunsOptionsWithoutLosingItsOwn) {
  CheckAnswer answer{Outcome::failed, "rows differ"};
  answer.case_token = ReproToken{"property/p", {{"rc", "abc"}, {"seed", "9"}}};
  const ReproToken base = token_for("", {{"target", "megatron"}, {"seed", "1"}, {"cases", "5"}});
  const GateRun r = run_gate({answering("p", answer)}, {}, base);
  EXPECT_EQ(r.results[0].token,
            (ReproToken{"property/p", {{"rc", "abc"}, {"seed", "9"}, {"target", "megatron"}, {"cases", "5"}}}));
  const GateRun plain = run_gate({answering("p", CheckAnswer{Outcome::failed, "x"})}, {}, base);
  EXPECT_EQ(plain.results[0].token,
            (ReproToken{"gate/spec-invariants/p", {{"target", "megatron"}, {"seed", "1"}, {"cases", "5"}}}));
}

TEST(RunLoop, EveryOutcomeHasItsProgressWordAndItsSummaryLine) {
  const std::vector<std::tuple<Outcome, std::string, std::string>> cases = {
      {Outcome::passed, "ok", ""},
      {Outcome::failed, "FAILED", "FAILED spec-invariants: c\n      why\n"},
      {Outcome::not_run, "NOT RUN", "NOT RUN spec-invariants: c\n      why\n"},
      {Outcome::harness_error, "HARNESS ERROR", "HARNESS ERROR (no verdict) spec-invariants: c\n      why\n"},
      {Outcome::timeout, "TIMEOUT", "TIMEOUT (no verdict) spec-invariants: c\n      why\n"}};
  for (const auto& [outcome, word, line] : cases) {
    const GateRun r = run_gate({answering("c", CheckAnswer{outcome, outcome == Outcome::passed ? "" : "why"})});
    EXPECT_EQ(r.progress, "INFO: [1/1] spec-invariants: c ... " + word + "\n");
    const std::string table = summary_table(r.results);
    const std::string after_counts = table.substr(table.find('\n', table.find('\n') + 1) + 1);
    EXPECT_EQ(after_counts, line) << word;
  }
}

TEST(RunLoop, TheSummaryCountsEachGroupsOutcomesInFixedColumns) {
  std::vector<Check> checks = {answering("a", CheckAnswer{}), answering("b", CheckAnswer{Outcome::failed, "x"}),
                               answering("c", CheckAnswer{Outcome::not_run, "y"})};
  checks.push_back({"properties", "p", [](Implementation&) { return CheckAnswer{}; }});
  const std::string table = summary_table(run_gate(checks).results);
  std::istringstream lines(table);
  std::string header, first, second;
  std::getline(lines, header), std::getline(lines, first), std::getline(lines, second);
  EXPECT_EQ(header.substr(0, 22), "group                 ");
  EXPECT_NE(header.find("passed         failed  known finding        not run  harness error        timeout"),
            std::string::npos)
      << header;
  std::istringstream counts(first);
  std::string group;
  int passed = -1, failed = -1, known = -1, not_run = -1, harness = -1, timeouts = -1;
  counts >> group >> passed >> failed >> known >> not_run >> harness >> timeouts;
  EXPECT_EQ(group, "spec-invariants");
  EXPECT_EQ(std::vector<int>({passed, failed, known, not_run, harness, timeouts}),
            std::vector<int>({1, 1, 0, 1, 0, 0}));
  EXPECT_EQ(second.substr(0, 10), "properties");
}

TEST(RunLoop, ANoteIsPrintedWhateverTheOutcomeButNotForANotRunCheck) {
  CheckAnswer noted;
  noted.note = "cases drawn within 32 ranks";
  CheckAnswer not_run{Outcome::not_run, "no GTP"};
  not_run.note = "never shown";
  const std::string table = summary_table(run_gate({answering("a", noted), answering("b", not_run)}).results);
  EXPECT_NE(table.find("NOTE spec-invariants: a\n      cases drawn within 32 ranks\n"), std::string::npos) << table;
  EXPECT_EQ(table.find("never shown"), std::string::npos) << table;
}

// ---- verdict words and exit codes ---------------------------------------------------------------------

std::vector<CheckResult> results_of(const std::vector<Outcome>& outcomes) {
  std::vector<Check> checks;
  for (std::size_t i = 0; i < outcomes.size(); ++i)
    checks.push_back(
        answering("c" + std::to_string(i), CheckAnswer{outcomes[i], outcomes[i] == Outcome::passed ? "" : "why"}));
  return run_gate(checks).results;
}

TEST(Verdict, TheExitCodeAndTheVerdictLineFollowFromTheOutcomes) {
  using O = Outcome;
  const std::vector<std::tuple<std::vector<O>, int, std::string>> cases = {
      {{O::passed, O::not_run}, kExitOk, "gate: PASSED (1 passed, 1 not run)"},
      {{O::passed, O::failed, O::failed}, kExitCheckFailed, "gate: FAILED (2 failed, 1 passed)"},
      {{O::not_run, O::not_run}, kExitNothingRan, "gate: NOTHING RAN (0 passed, 2 not run)"},
      {{O::failed, O::timeout}, kExitTimeout, "gate: NO VERDICT (4) (1 failed, 0 passed, 1 timeout)"},
      {{O::failed, O::timeout, O::harness_error, O::harness_error},
       kExitHarnessError,
       "gate: NO VERDICT (3) (1 failed, 0 passed, 2 harness errors, 1 timeout)"},
      {{}, kExitNothingRan, "gate: NOTHING RAN (0 passed)"}};  // no check at all verified nothing
  for (const auto& [outcomes, exit_code, line] : cases) {
    const auto results = results_of(outcomes);
    EXPECT_EQ(exit_code_of(outcomes), exit_code) << line;
    EXPECT_EQ(verdict_line(exit_code_of(outcomes), results), line);
  }
}

TEST(Verdict, CountsNameEveryOutcomeThatOccurredInAFixedOrder) {
  using O = Outcome;
  EXPECT_EQ(verdict_counts(results_of({O::timeout, O::harness_error, O::not_run, O::failed, O::passed, O::passed})),
            "(1 failed, 2 passed, 1 not run, 1 harness error, 1 timeout)");
}

TEST(Verdict, OnlyChecksThatRanWithoutACleanVerdictHaveARepro) {
  const auto results =
      results_of({Outcome::passed, Outcome::failed, Outcome::not_run, Outcome::harness_error, Outcome::timeout});
  std::vector<bool> repro;
  for (const CheckResult& r : results) repro.push_back(has_repro(r));
  EXPECT_EQ(repro, (std::vector<bool>{false, true, false, true, true}));
  CheckResult never_ran = results[1];
  never_ran.never_ran = true;  // --require-all's failure of a check that did not run
  EXPECT_FALSE(has_repro(never_ran));
}

}  // namespace
}  // namespace ih::gate

namespace ih::gate {
namespace {

TEST(RealRoundTripCross, EachScenarioRunsSavedByBaseLoadedByNewAndTheOtherWayUnderItsOwnName) {
  std::vector<std::string> ran;
  const auto runner = [&ran](const char* which, Outcome outcome) -> RealRoundTripRunner {
    return [&ran, which, outcome](Implementation&, const std::string& scenario, std::int64_t a, std::int64_t b) {
      ran.push_back(std::string(which) + " " + scenario + " " + std::to_string(a) + "->" + std::to_string(b));
      RealRoundTripResult r{outcome, 10, outcome == Outcome::failed ? 3 : 0, 0, {"misplaced: rank 0: w[0] holds w[1]"}};
      return Result<RealRoundTripResult>(r);
    };
  };
  const auto checks = real_roundtrip_cross_checks({"real_a"}, {{4, 2}}, runner("base-to-new", Outcome::passed),
                                                  runner("new-to-base", Outcome::failed));
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].check_name(), "gate/real-roundtrip-cross/base-to-new_real_a_4_to_2");
  EXPECT_EQ(checks[1].check_name(), "gate/real-roundtrip-cross/new-to-base_real_a_4_to_2");
  ReferenceImplementation target;
  EXPECT_EQ(checks[0].run(target).outcome, Outcome::passed);
  const CheckAnswer failed = checks[1].run(target);
  EXPECT_EQ(failed.outcome, Outcome::failed);
  ASSERT_EQ(failed.violations.size(), 1u);
  EXPECT_NE(failed.detail.find("3 of 10 elements wrong; misplaced: rank 0: w[0] holds w[1]"), std::string::npos)
      << failed.detail;
  EXPECT_EQ(ran, (std::vector<std::string>{"base-to-new real_a 4->2", "new-to-base real_a 4->2"}));
}

TEST(RealRoundTrip, StoredBytesOutOfTheLayoutAreTheirOwnViolationBesideWhereTheLoadRaised) {
  const RealRoundTripRunner runner = [](Implementation&, const std::string&, std::int64_t, std::int64_t) {
    return Result<RealRoundTripResult>(
        RealRoundTripResult{Outcome::failed,
                            0,
                            0,
                            8,
                            {"load failed: KeyError", "stored bytes: 8 of 64 stored elements are not where ..."},
                            "_filter_and_reorder_param_groups"});
  };
  const auto checks = real_roundtrip_checks({"real_a"}, {{4, 2}}, runner);
  ReferenceImplementation target;
  const CheckAnswer answer = checks[0].run(target);
  EXPECT_EQ(answer.outcome, Outcome::failed);
  ASSERT_EQ(answer.violations.size(), 2u);
  EXPECT_EQ(answer.violations[0].kind, "stored_layout_wrong");
  EXPECT_EQ(answer.violations[0].key, "real_a");
  EXPECT_NE(answer.violations[0].text.find("stored bytes: 8 of 64"), std::string::npos);
  EXPECT_EQ(answer.violations[1].kind, "roundtrip_failed");
  EXPECT_EQ(answer.violations[1].key, "real_a in _filter_and_reorder_param_groups");
}

/// A target that serves everything but real models (as an adapter whose Megatron lacks them says in its hello).
class NoRealModels : public ReferenceImplementation {
 public:
  bool supports(Operation op) const override { return op != Operation::model_state_dict; }
};

TEST(RealRoundTrip, ATargetThatBuildsNoRealModelIsNotRunAndStartsNoWorld) {
  bool ran = false;
  const RealRoundTripRunner runner = [&ran](Implementation&, const std::string&, std::int64_t, std::int64_t) {
    ran = true;
    return Result<RealRoundTripResult>(RealRoundTripResult{Outcome::failed, 0, 0, 0, {"the world did not start"}});
  };
  const auto checks = real_roundtrip_checks({"real_a"}, {{4, 2}}, runner);
  ASSERT_EQ(checks.size(), 1u);
  NoRealModels target;
  const CheckAnswer answer = checks[0].run(target);
  EXPECT_EQ(answer.outcome, Outcome::not_run);
  EXPECT_NE(answer.detail.find("builds no real model"), std::string::npos) << answer.detail;
  EXPECT_FALSE(ran);
}

}  // namespace
}  // namespace ih::gate
