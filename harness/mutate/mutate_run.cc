#include "harness/mutate/mutate_run.h"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>

#include "harness/coverage/coverage_collect.h"
#include "harness/install/data_dir.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/mutate/warm_adapters.h"
#include "harness/process/child_run.h"
#include "harness/process/run_scope.h"

namespace ih::mutate {
namespace {

namespace fs = std::filesystem;
using std::chrono::milliseconds;

/// A child's whole stdout, with how it ended.
struct Captured {
  ChildOutcome outcome;
  std::string out;
};

Result<Captured> capture(const std::vector<std::string>& argv, milliseconds timeout) {
  Captured c;
  IH_TRY_ASSIGN(outcome, run_child(argv, timeout, [&](const std::string& line) { c.out += line + "\n"; }));
  c.outcome = outcome;
  return c;
}

Status write_text(const fs::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

/// The coverage of the gate's checks on the tree: the given JSON, or a `gate --coverage` run's.
Result<coverage::LineContexts> gate_coverage(const CampaignOptions& o, const fs::path& work, std::ostream& progress) {
  if (o.coverage_json) return coverage::read_coverage_json(*o.coverage_json, o.tree);
  const fs::path report = work / "coverage-gate";
  progress << "INFO: a gate run with coverage on the clean tree first (minutes)\n" << std::flush;
  IH_TRY_ASSIGN(run, capture({o.self, "gate", "--target", "megatron", "--megatron-path", o.tree, "--coverage",
                              "--report", report.string(), "--json"},
                             milliseconds(3'600'000)));
  const fs::path json = report / "coverage" / "coverage.json";
  if (!fs::exists(json))
    return make_error(seam_kind::harness_error, "the coverage gate run left no " + json.string() + " (exit " +
                                                    std::to_string(run.outcome.exit_code) +
                                                    "; a gate without --coverage: pass --coverage-json)");
  return coverage::read_coverage_json(json.string(), o.tree);
}

/// The covered files' lines that differ from the base's (coverage.h's diff of the two trees' megatron/), within
/// the globs.
Result<FileLines> changed_lines(const CampaignOptions& o, const coverage::LineContexts& coverage) {
  IH_TRY_ASSIGN(changed, coverage::changed_lines(*o.base, o.tree, milliseconds(600'000)));
  FileLines out;
  for (auto& [file, lines] : changed)
    if (coverage.count(file) &&
        std::any_of(o.globs.begin(), o.globs.end(), [&](const std::string& g) { return glob_matches(g, file); }))
      out[file] = std::move(lines);
  return out;
}

/// cosmic-ray's mutants of `lines` (mutation_points.py in the Megatron venv), their sources under `work`; every line
/// the gate ran in those files goes with them (a changed `def` line is mutated when its body ran, changed or not).
Result<std::pair<std::int64_t, std::vector<Mutant>>> make_mutants(const CampaignOptions& o, const FileLines& lines,
                                                                  const coverage::LineContexts& coverage,
                                                                  const fs::path& work) {
  json::Json request{{"root", o.tree},
                     {"max_mutants", o.max_mutants},
                     {"seed", o.seed},
                     {"out", (work / "sources").string()},
                     {"lines", json::Json::object()},
                     {"run_lines", json::Json::object()}};
  for (const auto& [file, numbers] : lines) {
    request["lines"][file] = numbers;
    json::Json& run = request["run_lines"][file] = json::Json::array();
    if (const auto found = coverage.find(file); found != coverage.end())
      for (const auto& [line, unused] : found->second) run.push_back(line);
  }
  fs::create_directories(work / "sources");
  IH_TRY_STATUS(write_text(work / "request.json", json::dump(request)));
  IH_TRY_ASSIGN(run, capture({default_megatron_python(), (install::adapter_dir() / "mutation_points.py").string(),
                              (work / "request.json").string()},
                             milliseconds(600'000)));
  if (run.outcome.timed_out)
    return make_error(seam_kind::harness_error,
                      "mutation_points.py did not finish within 600 s (" + std::to_string(lines.size()) + " files)");
  auto reply = json::parse(run.out);
  if (!reply.ok() || run.outcome.exit_code != 0 || !reply->contains("mutants"))
    return make_error(seam_kind::harness_error, "mutation_points.py failed (exit " +
                                                    std::to_string(run.outcome.exit_code) + "): " + run.out +
                                                    run.outcome.stderr_tail);
  std::vector<Mutant> mutants;
  for (const auto& m : (*reply)["mutants"]) {
    Mutant one;
    one.file = m.at("file"), one.line = m.at("line"), one.op = m.at("operator"), one.diff = m.at("diff");
    one.diff_sha256 = m.at("diff_sha256"), one.source = m.at("source"), one.function = m.at("function");
    one.judged_by_lines = m.value("judged_by_lines", std::vector<std::int64_t>{one.line});
    mutants.push_back(std::move(one));
  }
  return std::make_pair(reply->value("candidates", std::int64_t{0}), std::move(mutants));
}

/// The gate's checks named in `checks` (all: the whole gate) against `tree`, with a deadline.
Result<std::pair<MutantRun, double>> run_checks(const CampaignOptions& o, const std::string& tree,
                                                const std::vector<std::string>& checks, const fs::path& list,
                                                milliseconds deadline) {
  std::vector<std::string> argv = {o.self, "gate",   "--target", "megatron", "--megatron-path",
                                   tree,   "--json", "--corpus", o.corpus};
  if (!o.whole_gate) {
    std::string names;
    for (const std::string& c : checks) names += c + "\n";
    IH_TRY_STATUS(write_text(list, names));
    argv.insert(argv.end(), {"--checks-from", list.string()});
  }
  IH_TRY_ASSIGN(run, capture(argv, deadline));
  MutantRun out;
  out.timed_out = run.outcome.timed_out;
  if (auto verdicts = verdicts_of_gate_json(run.out); verdicts.ok() && !out.timed_out)
    out.verdicts = std::move(*verdicts);
  else if (!out.timed_out)
    out.why = "no gate report (exit " + std::to_string(run.outcome.exit_code) + "): " + run.outcome.stderr_tail;
  return std::make_pair(out, run.outcome.seconds);
}

/// A survivor pinned as equivalent becomes `equivalent`.
void apply_equivalents(Mutant& m, const std::vector<Equivalent>& pins) {
  if (m.judgement.outcome != Outcome::survived) return;
  for (const Equivalent& e : pins)
    if (e.file == m.file && e.line == m.line && e.op == m.op && e.diff_sha256 == m.diff_sha256)
      m.judgement = {Outcome::equivalent, {}, e.reason};
}

std::vector<std::string> sorted_union(const std::vector<Mutant>& mutants) {
  std::set<std::string> all;
  for (const Mutant& m : mutants) all.insert(m.checks.begin(), m.checks.end());
  return {all.begin(), all.end()};
}

/// Runs one mutant in its overlay (removed after) against the checks that reach it.
Status run_mutant(const CampaignOptions& o, Mutant& m, const GateVerdicts& clean, const fs::path& work, int index,
                  milliseconds deadline) {
  const fs::path overlay = work / ("overlay-" + std::to_string(index));
  std::ifstream in(m.source);
  std::stringstream text;
  text << in.rdbuf();
  IH_TRY_STATUS(build_overlay(o.tree, overlay, m.file, text.str()));
  IH_TRY_ASSIGN(run, run_checks(o, overlay.string(), m.checks, work / "checks.txt", deadline));
  GateVerdicts judged_against;
  for (const auto& [name, verdict] : clean)
    if (o.whole_gate || std::count(m.checks.begin(), m.checks.end(), name)) judged_against[name] = verdict;
  m.judgement = judge(judged_against, run.first, overlay.string(), o.tree);
  m.seconds = run.second;
  std::error_code ec;
  fs::remove_all(overlay, ec);
  return Ok{};
}

}  // namespace

Result<CampaignResult> run_campaign(const CampaignOptions& o, std::ostream& progress) {
  const fs::path work = fs::path(temp_dir()) / "mutate";
  fs::create_directories(work);
  IH_TRY_ASSIGN(pins, load_equivalents(fs::path(o.corpus) / "mutation-equivalent"));
  IH_TRY_ASSIGN(coverage, gate_coverage(o, work, progress));
  std::optional<FileLines> changed;
  if (o.base) {
    IH_TRY_ASSIGN(lines_changed, changed_lines(o, coverage));
    changed = std::move(lines_changed);
  }
  const FileLines lines = lines_to_mutate(coverage, o.globs, changed);
  CampaignResult result;
  for (const auto& [file, numbers] : lines) result.lines += static_cast<std::int64_t>(numbers.size());
  progress << "INFO: " << result.lines << " lines in " << lines.size() << " files that the gate's checks run"
           << (o.base ? " and the change touches" : "") << "\n";
  if (lines.empty()) return result;
  IH_TRY_ASSIGN(made, make_mutants(o, lines, coverage, work));
  result.positions = made.first, result.mutants = std::move(made.second);
  for (Mutant& m : result.mutants) {
    std::set<std::string> reaching;
    for (const std::int64_t line : m.judged_by_lines) reaching.merge(checks_reaching(coverage, m.file, line));
    m.checks.assign(reaching.begin(), reaching.end());
  }
  const std::vector<std::string> all_checks = sorted_union(result.mutants);
  WarmAdapters warm = WarmAdapters::start(o.cold_adapters, o.tree, progress);
  progress << "INFO: " << result.mutants.size() << " mutants of " << result.positions << " positions; the clean tree"
           << " first ("
           << (o.whole_gate ? std::string("the whole gate") : std::to_string(all_checks.size()) + " checks") << ")\n"
           << std::flush;
  const fs::path programs = fs::path(o.self).parent_path();
  const std::string judge = judge_fingerprint(programs, install::adapter_dir());
  IH_TRY_ASSIGN(clean, run_checks(o, o.tree, all_checks, work / "checks.txt", milliseconds(3'600'000)));
  if (!clean.first.verdicts)
    return make_error(seam_kind::harness_error, "the clean tree's checks gave no report: " + clean.first.why);
  result.clean_seconds = clean.second;
  for (const auto& [name, verdict] : *clean.first.verdicts)
    if (!gave_verdict(verdict.outcome))
      progress << "WARNING: the clean tree's " << name << " gave no verdict (" << to_string(verdict.outcome)
               << "): it cannot judge a mutant, and one judged by no other check is incompetent\n";
  warm.check(progress);
  // A mutant may be slower than the clean tree, not endlessly: three times its run and a minute.
  const milliseconds deadline(static_cast<std::int64_t>(3'000 * clean.second) + 60'000);
  for (std::size_t i = 0; i < result.mutants.size(); ++i) {
    Mutant& m = result.mutants[i];
    progress << "INFO: [" << i + 1 << "/" << result.mutants.size() << "] " << m.file << ":" << m.line << " " << m.op
             << " (" << (o.whole_gate ? std::string("whole gate") : std::to_string(m.checks.size()) + " checks")
             << ") ... " << std::flush;
    IH_TRY_STATUS(run_mutant(o, m, *clean.first.verdicts, work, static_cast<int>(i), deadline));
    if (judge_fingerprint(programs, install::adapter_dir()) != judge)  // after the run: a change during it counts
      m.judgement = {Outcome::incompetent,
                     {},
                     "the harness changed since the clean run (rebuilt or edited): its verdicts are not comparable"};
    apply_equivalents(m, pins);
    progress << to_string(m.judgement.outcome) << (m.judgement.note.empty() ? "" : " (" + m.judgement.note + ")")
             << "\n"
             << std::flush;
    warm.check(progress);
  }
  if (!warm.summary().empty()) progress << "INFO: " << warm.summary() << "\n";
  return result;
}

}  // namespace ih::mutate
