// The pure parts of `mutate`: the overlay, which lines and checks a mutant gets, a change's lines, the
// coverage JSON read, and how the checks' verdicts type a mutant. No Megatron, no Python.
#include "harness/mutate/mutate.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <sstream>

namespace ih::mutate {
namespace {

namespace fs = std::filesystem;

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::temp_directory_path() / "ih-mutate-test-XXXXXX").string();
    root_ = mkdtemp(dir.data()) ? dir : "";
    ASSERT_FALSE(root_.empty());
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const fs::path& path, const std::string& text) {
    fs::create_directories(path.parent_path());
    std::ofstream(path) << text;
  }
  static std::string read(const fs::path& path) {
    std::stringstream s;
    s << std::ifstream(path).rdbuf();
    return s.str();
  }
  fs::path root_;
};

using Overlay = TempDir;

TEST_F(Overlay, MirrorsTheTreeWithOnlyTheMutatedFileReal) {
  const fs::path tree = root_ / "tree", overlay = root_ / "overlay";
  write(tree / "megatron/core/a/mapping.py", "x = 1\n");
  write(tree / "megatron/core/a/other.py", "y = 2\n");
  write(tree / "megatron/core/a/__pycache__/mapping.cpython-312.pyc", "stale");
  write(tree / "megatron/core/b/c.py", "z = 3\n");
  write(tree / "megatron/training/t.py", "t = 4\n");
  write(tree / "setup.py", "");
  ASSERT_TRUE(build_overlay(tree, overlay, "megatron/core/a/mapping.py", "x = 2\n").ok());
  EXPECT_EQ(read(overlay / "megatron/core/a/mapping.py"), "x = 2\n");
  EXPECT_EQ(read(tree / "megatron/core/a/mapping.py"), "x = 1\n");  // the tree is never edited
  EXPECT_FALSE(fs::is_symlink(overlay / "megatron/core/a/mapping.py"));
  for (const char* real : {"megatron", "megatron/core", "megatron/core/a"}) {
    EXPECT_FALSE(fs::is_symlink(overlay / real)) << real;
    EXPECT_TRUE(fs::is_directory(overlay / real)) << real;
  }
  for (const char* linked : {"setup.py", "megatron/training", "megatron/core/b", "megatron/core/a/other.py"}) {
    EXPECT_TRUE(fs::is_symlink(overlay / linked)) << linked;
    EXPECT_TRUE(fs::exists(overlay / linked)) << linked;
  }
  EXPECT_EQ(read(overlay / "megatron/core/b/c.py"), "z = 3\n");
  EXPECT_FALSE(fs::exists(overlay / "megatron/core/a/__pycache__"));
  // A second overlay in the same place is refused, never merged into the first.
  EXPECT_FALSE(build_overlay(tree, overlay, "megatron/core/a/mapping.py", "x = 3\n").ok());
}

coverage::LineContexts sample_coverage() {
  return {{"megatron/core/a/mapping.py", {{1, {}}, {10, {"gate/g/one"}}, {11, {"gate/g/one", "gate/g/two"}}}},
          {"megatron/core/a/other.py", {{5, {"gate/g/two"}}}},
          {"megatron/core/b/c.py", {{2, {}}}}};
}

using JudgeFingerprint = TempDir;

TEST_F(JudgeFingerprint, ChangesWhenAProgramOrAnAdapterFileChangesNotWhenOtherFilesDo) {
  const fs::path bin = root_ / "bin", adapter = root_ / "adapter";
  write(bin / "interop-harness", "gate");
  write(bin / "ih_roundtrip_verifier", "verifier");
  write(adapter / "megatron_adapter/roundtrip/load.py", "x = 1\n");
  write(adapter / "README.md", "notes");
  const std::string first = judge_fingerprint(bin, adapter);
  EXPECT_NE(first.find("ih_roundtrip_verifier"), std::string::npos);
  EXPECT_EQ(judge_fingerprint(bin, adapter), first);
  write(adapter / "README.md", "more notes, longer");
  EXPECT_EQ(judge_fingerprint(bin, adapter), first);  // not Python: not the judge
  write(adapter / "megatron_adapter/roundtrip/load.py", "x = 22\n");
  const std::string edited = judge_fingerprint(bin, adapter);
  EXPECT_NE(edited, first);
  write(bin / "ih_roundtrip_verifier", "verifier, rebuilt");
  EXPECT_NE(judge_fingerprint(bin, adapter), edited);
}

TEST(LinesToMutate, OnlyCoveredLinesOfMatchingFilesAndOfTheChange) {
  const auto coverage = sample_coverage();
  const FileLines all = lines_to_mutate(coverage, {"megatron/core/a/*.py"}, std::nullopt);
  EXPECT_EQ(all, (FileLines{{"megatron/core/a/mapping.py", {1, 10, 11}}, {"megatron/core/a/other.py", {5}}}));
  // c.py's only line ran outside every check: no check judges it, so it is not mutated.
  EXPECT_TRUE(lines_to_mutate(coverage, {"megatron/core/b/*.py"}, std::nullopt).empty());
  // '*' stays within a folder.
  EXPECT_TRUE(lines_to_mutate(coverage, {"megatron/*.py"}, std::nullopt).empty());
  const FileLines changed{{"megatron/core/a/mapping.py", {11, 12}}};
  EXPECT_EQ(lines_to_mutate(coverage, {"megatron/core/a/*.py"}, changed),
            (FileLines{{"megatron/core/a/mapping.py", {11}}}));
}

TEST(ChecksReaching, TheLinesContextsOrForImportLinesTheFilesChecks) {
  const auto coverage = sample_coverage();
  EXPECT_EQ(checks_reaching(coverage, "megatron/core/a/mapping.py", 10), (std::set<std::string>{"gate/g/one"}));
  EXPECT_EQ(checks_reaching(coverage, "megatron/core/a/mapping.py", 1),
            (std::set<std::string>{"gate/g/one", "gate/g/two"}));
  EXPECT_TRUE(checks_reaching(coverage, "megatron/core/a/mapping.py", 99).empty());
}

MutantRun ran(GateVerdicts verdicts) { return {false, std::move(verdicts), ""}; }
using G = GateOutcome;

TEST(GateReport, ReadsEachCheckWithTheGatesOwnWordsAndRefusesAnUnknownOne) {
  // The words the gate writes (gate_report.cc: to_string of its outcome), e.g. "known finding", never the enum's
  // identifiers: a judge that compared "known_finding" could never see a known finding, nor be killed through one.
  std::string checks;
  for (const G outcome : kAllOutcomes)
    checks += std::string(checks.empty() ? "" : ",") + R"({"name": "gate/g/)" + std::string(to_string(outcome)) +
              R"(", "outcome": ")" + std::string(to_string(outcome)) + R"(", "detail": "d", "seconds": 2})";
  const auto verdicts = verdicts_of_gate_json(R"({"checks": [)" + checks + "]}");
  ASSERT_TRUE(verdicts.ok()) << verdicts.error().message;
  ASSERT_EQ(verdicts->size(), std::size(kAllOutcomes));
  EXPECT_EQ(verdicts->at("gate/g/known finding").outcome, G::known_finding);
  EXPECT_EQ(verdicts->at("gate/g/not run").outcome, G::not_run);
  EXPECT_TRUE(gave_verdict(verdicts->at("gate/g/known finding").outcome));
  const auto unknown = verdicts_of_gate_json(R"({"checks": [{"name": "gate/g/x", "outcome": "known_finding"}]})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(unknown.error().message.find("gate/g/x"), std::string::npos) << unknown.error().message;
}

TEST(Judge, AMutantWhoseModuleNoLongerImportsIsIncompetentNeverAKill) {
  const GateVerdicts clean{{"p", {G::passed, "", 1}}, {"q", {G::passed, "", 1}}};
  // An optional module: the checks that need it fail as Megatron's, saying so.
  GateVerdicts v = clean;
  v["p"] = {G::failed, "Megatron does not import: gtp_padding needs cannot import megatron.core.ssm.x", 1};
  const auto j = judge(clean, ran(v), "/o", "/t");
  EXPECT_EQ(j.outcome, Outcome::incompetent);
  EXPECT_TRUE(j.killed_by.empty());
  // megatron.core itself: the gate's imports check fails and every other check is not run.
  v = {{"gate/megatron/imports", {G::failed, "Megatron does not import: NameError", 0}},
       {"p", {G::not_run, "Megatron does not import", 0}},
       {"q", {G::not_run, "Megatron does not import", 0}}};
  EXPECT_EQ(judge(clean, ran(v), "/o", "/t").outcome, Outcome::incompetent);
}

TEST(Judge, KilledOnlyByAFailureTheCleanTreeDidNotShow) {
  const GateVerdicts clean{
      {"p", {G::passed, "", 1}}, {"k", {G::known_finding, "R1 rows", 1}}, {"f", {G::failed, "x", 1}}};
  // A known finding matched as before and an unpinned failure with the same detail kill nothing.
  auto same = judge(clean, ran(clean), "/o", "/t");
  EXPECT_EQ(same.outcome, Outcome::survived);
  GateVerdicts v = clean;
  v["p"] = {G::failed, "boom", 1};
  auto j = judge(clean, ran(v), "/o", "/t");
  EXPECT_EQ(j.outcome, Outcome::killed);
  EXPECT_EQ(j.killed_by, std::vector<std::string>{"p"});
  v = clean, v["k"] = {G::failed, "R1 other rows", 1};  // the pin no longer matches: it fails differently
  EXPECT_EQ(judge(clean, ran(v), "/o", "/t").outcome, Outcome::killed);
  v = clean, v["f"] = {G::failed, "y", 1};
  EXPECT_EQ(judge(clean, ran(v), "/o", "/t").outcome, Outcome::killed);
  EXPECT_EQ(
      judge({{"f", {G::failed, "in /t/m.py", 1}}}, ran({{"f", {G::failed, "in /o/m.py", 1}}}), "/o", "/t").outcome,
      Outcome::survived);  // the overlay's path is no difference
}

TEST(Judge, TimeoutsAndBrokenRunsAreNeverKills) {
  const GateVerdicts clean{{"p", {G::passed, "", 1}}};
  EXPECT_EQ(judge(clean, {true, std::nullopt, ""}, "/o", "/t").outcome, Outcome::timeout);
  EXPECT_EQ(judge(clean, ran({{"p", {G::timeout, "", 1}}}), "/o", "/t").outcome, Outcome::timeout);
  EXPECT_EQ(judge(clean, {false, std::nullopt, "adapter did not start"}, "/o", "/t").outcome, Outcome::incompetent);
  EXPECT_EQ(judge(clean, ran({{"p", {G::harness_error, "", 1}}}), "/o", "/t").outcome, Outcome::incompetent);
  EXPECT_EQ(judge(clean, ran({{"p", {G::not_run, "", 1}}}), "/o", "/t").outcome, Outcome::incompetent);
  EXPECT_EQ(judge(clean, ran({}), "/o", "/t").outcome, Outcome::incompetent);
}

TEST(Judge, ChecksThatGaveTheCleanTreeNoVerdictCannotLetAMutantSurvive) {
  const GateVerdicts clean{{"p", {G::harness_error, "", 1}}, {"q", {G::timeout, "", 1}}};
  const auto j = judge(clean, ran({{"p", {G::known_finding, "", 1}}, {"q", {G::passed, "", 1}}}), "/o", "/t");
  EXPECT_EQ(j.outcome, Outcome::incompetent);
  EXPECT_NE(j.note.find("on the clean tree"), std::string::npos) << j.note;
  // One check with a clean verdict is enough to judge: it passing on the mutant too is a survival.
  const GateVerdicts mixed{{"p", {G::harness_error, "", 1}}, {"r", {G::passed, "", 1}}};
  EXPECT_EQ(judge(mixed, ran({{"p", {G::passed, "", 1}}, {"r", {G::passed, "", 1}}}), "/o", "/t").outcome,
            Outcome::survived);
}

TEST(Score, KilledOverKilledSurvivedAndTimeoutPerFileAndFunction) {
  std::vector<Mutant> mutants(4);
  const Outcome outcomes[] = {Outcome::killed, Outcome::survived, Outcome::incompetent, Outcome::equivalent};
  for (int i = 0; i < 4; ++i) {
    mutants[i].file = "m.py", mutants[i].function = i ? "g" : "f", mutants[i].line = i + 1;
    mutants[i].judgement.outcome = outcomes[i];
  }
  const json::Json report = campaign_json(mutants);
  EXPECT_DOUBLE_EQ(report["score"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(report["functions"]["m.py:f"].get<double>(), 1.0);
  EXPECT_DOUBLE_EQ(report["functions"]["m.py:g"].get<double>(), 0.0);
  EXPECT_EQ(report["mutants"][3]["outcome"], "equivalent");
  EXPECT_TRUE(campaign_json({})["score"].is_null());
  EXPECT_NE(campaign_summary(mutants).find("m.py:2"), std::string::npos);  // the survivor, by file:line
}

using Equivalents = TempDir;

TEST_F(Equivalents, ReadsPinsAndNamesAMissingField) {
  write(root_ / "a.equivalent", "file: m.py\nline: 3\noperator: core/X\ndiff-sha256: ab12\nreason: same value\n");
  auto pins = load_equivalents(root_);
  ASSERT_TRUE(pins.ok());
  ASSERT_EQ(pins->size(), 1u);
  EXPECT_EQ((*pins)[0].line, 3);
  EXPECT_EQ((*pins)[0].reason, "same value");
  write(root_ / "b.equivalent", "file: m.py\nline: 3\noperator: core/X\n");
  EXPECT_FALSE(load_equivalents(root_).ok());
  EXPECT_TRUE(load_equivalents(root_ / "missing")->empty());
}

}  // namespace
}  // namespace ih::mutate
