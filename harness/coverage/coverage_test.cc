// The pure parts of the gate's coverage: coverage.py's JSON report read (testdata/coverage.json is coverage.py
// 7.18's own report of testdata/tree run under two contexts, see testdata/README.md), lines attributed to
// functions, the checkpoint path's table, a git diff's new lines and the changed lines no check ran.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "harness/coverage/coverage_collect.h"
#include "harness/coverage/coverage_findings.h"
#include "harness/coverage/coverage_report.h"

namespace ih::coverage {
namespace {

const std::string kFixture = std::string(IH_COVERAGE_TESTDATA) + "/coverage.json";
const std::string kFile = "megatron/core/dist_checkpointing/serialization.py";

TEST(CoverageReport, LinesCarryTheChecksThatRanThem) {
  const auto lines = read_coverage_json(kFixture, "/anywhere");
  ASSERT_TRUE(lines.ok()) << lines.error().message;
  const auto& file = lines->at(kFile);
  // save() ran under both checks, Loader.load_state_dict under the round trip only, load() under none.
  EXPECT_EQ(file.at(5), (std::set<std::string>{"gate/spec-invariants/a", "gate/real-roundtrips/b_4_to_2"}));
  EXPECT_EQ(file.at(17), (std::set<std::string>{"gate/real-roundtrips/b_4_to_2"}));
  EXPECT_TRUE(file.at(4).empty());  // the def line ran at import, under no check
  EXPECT_EQ(file.count(11), 0u);
  EXPECT_EQ(file.count(21), 0u);
}

TEST(CoverageReport, FunctionsOwnTheirStatements) {
  const auto files = read_coverage_files(kFixture, "/anywhere");
  ASSERT_TRUE(files.ok()) << files.error().message;
  const FileCoverage& file = files->at(kFile);
  EXPECT_EQ(file.function_of(11), "load");
  EXPECT_EQ(file.function_of(21), "Loader.sharded_state_dict");
  EXPECT_EQ(file.function_of(4), "");  // module level
  EXPECT_EQ(file.missing, (std::set<std::int64_t>{10, 11, 12, 21}));
}

std::string write_temporary(const std::string& text) {
  const std::string path = (std::filesystem::temp_directory_path() / "ih_coverage_test.json").string();
  std::ofstream(path) << text;
  return path;
}

TEST(CoverageReport, AbsoluteNamesAreMadeTreeRelativeAndOthersLeftOut) {
  const std::string path = write_temporary(R"({"meta": {"show_contexts": true}, "files": {
    "/t/tree/megatron/a.py": {"executed_lines": [1], "missing_lines": [], "contexts": {"1": ["gate/g/c"]}, "functions": {}},
    "/t/other/megatron/b.py": {"executed_lines": [1], "missing_lines": [], "contexts": {"1": ["gate/g/c"]}, "functions": {}}}})");
  const auto lines = read_coverage_json(path, "/t/tree");
  std::remove(path.c_str());
  ASSERT_TRUE(lines.ok()) << lines.error().message;
  EXPECT_EQ(lines->size(), 1u);
  EXPECT_EQ(lines->at("megatron/a.py").at(1), (std::set<std::string>{"gate/g/c"}));
}

TEST(CoverageReport, RefusesWhatIsNotAReportWithContexts) {
  const std::string without = write_temporary(R"({"meta": {"show_contexts": false}, "files": {}})");
  const auto no_contexts = read_coverage_json(without, "/t");
  EXPECT_FALSE(no_contexts.ok());
  EXPECT_NE(no_contexts.error().message.find("--show-contexts"), std::string::npos);
  const std::string broken = write_temporary(R"({"meta": {}, "files": {"a.py": {"executed_lines": ["x"]}}})");
  EXPECT_FALSE(read_coverage_files(broken, "/t").ok());
  std::remove(broken.c_str());
  EXPECT_FALSE(read_coverage_json("/no/such/coverage.json", "/t").ok());
}

TEST(CheckpointPath, TableNamesTheCheckpointFunctions) {
  EXPECT_TRUE(on_checkpoint_path("megatron/core/dist_checkpointing/serialization.py", "load"));
  EXPECT_TRUE(on_checkpoint_path("megatron/training/checkpointing.py", "load_checkpoint"));
  EXPECT_TRUE(on_checkpoint_path("megatron/core/models/gpt/gpt_model.py", "GPTModel.sharded_state_dict"));
  EXPECT_TRUE(on_checkpoint_path("megatron/core/optimizer/distrib_optimizer.py",
                                 "DistributedOptimizer.load_parameter_state_from_dp_zero"));
  EXPECT_FALSE(on_checkpoint_path("megatron/core/models/gpt/gpt_model.py", "GPTModel.forward"));
  EXPECT_FALSE(on_checkpoint_path("megatron/core/dist_checkpointing/serialization.py", ""));
}

TEST(CheckpointPath, FunctionsNeverRunAreListed) {
  const auto files = read_coverage_files(kFixture, "/anywhere");
  ASSERT_TRUE(files.ok());
  const CheckpointPathCoverage path = checkpoint_path_coverage(*files);
  std::set<std::string> never;
  for (const FunctionNeverRun& f : path.never_run) never.insert(f.function);
  EXPECT_EQ(never, (std::set<std::string>{"load", "Loader.sharded_state_dict"}));
  ASSERT_EQ(path.files.size(), 1u);
  EXPECT_EQ(path.files[0].functions, 4);
  EXPECT_EQ(path.files[0].functions_run, 2);
  EXPECT_EQ(path.files[0].statements, 8);      // 5 6 | 10 11 12 | 17 18 | 21
  EXPECT_EQ(path.files[0].statements_run, 4);  // 5 6 17 18
}

// `git diff --no-index -U0 /base/megatron /new/megatron` as git 2.39 prints it.
constexpr const char* kDiff =
    R"(diff --git a/base/megatron/core/dist_checkpointing/serialization.py b/new/megatron/core/dist_checkpointing/serialization.py
index 1111111..2222222 100644
--- a/base/megatron/core/dist_checkpointing/serialization.py
+++ b/new/megatron/core/dist_checkpointing/serialization.py
@@ -5 +5 @@ def save(state):
-    keys = list(state)
+    keys = sorted(state)
@@ -11,2 +11,3 @@ def load(path):
-        raise KeyError()
-
+        raise ValueError("no path")
+    return {"path": path}
+
@@ -20,0 +21 @@ class Loader:
+        return {}
@@ -30,2 +31,0 @@ class Loader:
-gone
-too
diff --git a/base/megatron/old.py b/base/megatron/old.py
deleted file mode 100644
--- a/base/megatron/old.py
+++ /dev/null
@@ -1 +0,0 @@
-x
diff --git a/new/megatron/fresh.py b/new/megatron/fresh.py
new file mode 100644
--- /dev/null
+++ b/new/megatron/fresh.py
@@ -0,0 +1,2 @@
+a = 1
+b = 2
)";

TEST(ChangedLines, NewSideLinesOfEveryHunk) {
  const ChangedLines changed = new_lines_of_diff(kDiff, "/new");
  EXPECT_EQ(changed.size(), 2u);
  EXPECT_EQ(changed.at(kFile), (std::set<std::int64_t>{5, 11, 12, 13, 21}));
  EXPECT_EQ(changed.at("megatron/fresh.py"), (std::set<std::int64_t>{1, 2}));
  EXPECT_TRUE(new_lines_of_diff(kDiff, "/elsewhere").empty());
}

TEST(ChangedLines, OnlyStatementsCountAndThoseNoCheckRanAreNamed) {
  const auto files = read_coverage_files(kFixture, "/anywhere");
  ASSERT_TRUE(files.ok());
  const ChangedLinesCoverage found = changed_lines_coverage(new_lines_of_diff(kDiff, "/new"), *files);
  // 5 ran; 11, 12 (load) and 21 (Loader.sharded_state_dict) did not; 13 is no statement; fresh.py was not measured.
  EXPECT_EQ(found.changed_statements, 4);
  ASSERT_EQ(found.not_run.size(), 3u);
  EXPECT_EQ(found.not_run[0].line, 11);
  EXPECT_EQ(found.not_run[0].function, "load");
  EXPECT_EQ(found.not_run[2].line, 21);
  EXPECT_EQ(found.not_run[2].function, "Loader.sharded_state_dict");
  CoverageFindings findings{{}, found, "", ""};
  EXPECT_EQ(verdict_suffix(findings), ", 0 checkpoint-path functions never run, 3 changed lines not run");
  EXPECT_EQ(findings_json(findings)["changed_lines"]["not_run_count"], 3);
  EXPECT_NE(findings_markdown(findings).find("`" + kFile + "` load: lines 11, 12"), std::string::npos);
}

TEST(ChangedLines, SameTreeHasNone) {
  const auto files = read_coverage_files(kFixture, "/anywhere");
  ASSERT_TRUE(files.ok());
  const ChangedLinesCoverage found = changed_lines_coverage(new_lines_of_diff("", "/new"), *files);
  EXPECT_EQ(found.changed_statements, 0);
  EXPECT_EQ(verdict_suffix({{}, found, "", ""}), ", 0 checkpoint-path functions never run, 0 changed lines not run");
}

TEST(ChangedLines, NothingMeasuredIsUnknownNeverNoneNotRun) {
  CoverageFindings findings;
  findings.not_measured = "no Megatron process recorded coverage data";
  findings.changed_asked = true;
  EXPECT_EQ(verdict_suffix(findings), ", coverage not measured (changed lines unknown)");
  const json::Json written = findings_json(findings);
  EXPECT_EQ(written["measured"], false);
  EXPECT_EQ(written["not_measured"], findings.not_measured);
  EXPECT_FALSE(written.contains("changed_lines"));  // no count at all, not a count of 0
  EXPECT_FALSE(written.contains("checkpoint_path"));
  EXPECT_NE(findings_markdown(findings).find("Which changed lines ran is unknown."), std::string::npos);
  findings.changed_asked = false;
  EXPECT_EQ(verdict_suffix(findings), ", coverage not measured");
}

TEST(ChangedLines, DataFilesAreCoveragePyParallelFilesOnly) {
  const auto dir = std::filesystem::temp_directory_path() / ("ih-coverage-data-test-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "coverage.json") << "{}";
  std::ofstream(dir / ".coverage") << "";  // a combined file of an earlier run is no process's data
  EXPECT_FALSE(has_data_files(dir.string()));
  std::ofstream(dir / ".coverage.host.123.XyZ") << "";
  EXPECT_TRUE(has_data_files(dir.string()));
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(has_data_files(dir.string()));
}

}  // namespace
}  // namespace ih::coverage
