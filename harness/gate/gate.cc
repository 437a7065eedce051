#include "harness/gate/gate.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "models/text.h"

namespace ih::gate {

Check Check::simple(std::string group, std::string name, std::function<Result<std::string>(Implementation&)> body) {
  return Check{std::move(group), std::move(name),
               [body = std::move(body)](Implementation& target) { return answer_of(body(target)); }};
}

Check Check::typed(std::string group, std::string name, std::function<Result<Violations>(Implementation&)> body) {
  return Check{std::move(group), std::move(name), [body = std::move(body)](Implementation& target) {
                 const Result<Violations> found = body(target);
                 if (!found.ok()) return answer_of(found.error());
                 std::string detail;
                 for (const Violation& v : *found) detail += (detail.empty() ? "" : "\n      ") + v.text;
                 CheckAnswer answer = answer_of(detail);
                 answer.violations = *found;
                 return answer;
               }};
}

CheckAnswer answer_of(const Result<std::string>& result) {
  CheckAnswer answer;
  if (!result.ok()) {
    answer.outcome = outcome_of_error(result.error().kind);
    answer.detail = std::string(to_string(result.error().kind)) + ": " + result.error().message;
  } else if (!result->empty()) {
    answer.outcome = Outcome::failed;
    answer.detail = *result;
  }
  return answer;
}

Result<std::vector<Check>> with_unique_names(std::vector<Check> checks) {
  std::set<std::string> seen;
  for (const Check& check : checks)
    if (!seen.insert(check.check_name()).second)
      return make_error(ErrorKind::invalid_argument,
                        "two gate checks are called '" + check.check_name() +
                            "' (a pinned case listed twice?): a token must name one check");
  return checks;
}

const KnownFinding* KnownFindings::match(const ReproToken& token) const {
  // A pin naming an option (a mutant, the candidate design, a Megatron release) holds only where the token names
  // the same; one naming the release wins over one that does not (a release's finding, fixed since, beside a
  // finding of every version).
  const KnownFinding* any_version = nullptr;
  for (const KnownFinding& finding : findings) {
    const auto same = [&](const char* option) {
      return !finding.pin.token.option(option) || finding.pin.token.option(option) == token.option(option);
    };
    if (finding.pin.token.check != token.check || finding.pin.token.target() != token.target() || !same("mutant") ||
        !same("candidate") || !same("megatron-version"))
      continue;
    if (finding.pin.token.option("megatron-version")) return &finding;
    if (!any_version) any_version = &finding;
  }
  return any_version;
}

std::optional<std::string> KnownFinding::mismatch(const CheckAnswer& answer) const {
  if (!violations.empty()) {
    std::set<std::pair<std::string, std::string>> seen;
    for (const Violation& v : answer.violations) {
      if (!violations.count({v.kind, v.key}))
        return "a violation the finding pinned in " + file + " does not expect: " + v.kind + " " + v.key;
      seen.insert({v.kind, v.key});
    }
    for (const auto& [kind, key] : violations)
      if (!seen.count({kind, key}))
        return "the finding pinned in " + file + " expects the violation '" + kind + " " + key +
               "', which this failure lacks";
    return std::nullopt;
  }
  if (!answer.violations.empty())
    return "the finding pinned in " + file + " has no 'violation: ' lines for this typed check";
  const std::string& detail = answer.detail;
  std::vector<std::string> lines;
  for (std::string_view line : split_views(detail, '\n'))
    if (const auto first = line.find_first_not_of(' '); first != std::string_view::npos)
      lines.emplace_back(line.substr(first));
  std::set<std::string> seen;
  for (const std::string& line : lines) {
    bool known = false;
    for (const std::string& text : expect)
      if (line.find(text) != std::string::npos) known = true, seen.insert(text);
    if (!known) return "a failure the finding pinned in " + file + " does not expect: " + line;
  }
  for (const std::string& text : expect)
    if (!seen.count(text)) return "the finding pinned in " + file + " expects '" + text + "', which this failure lacks";
  return std::nullopt;
}

Result<KnownFindings> load_known_findings(const std::string& corpus_dir) {
  KnownFindings known;
  const std::filesystem::path dir = std::filesystem::path(corpus_dir) / "findings";
  std::error_code error;
  if (!std::filesystem::is_directory(dir, error)) return known;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error))
    if (entry.path().extension() == ".finding") files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file);
    std::stringstream text;
    text << in.rdbuf();
    auto pinned = parse_pinned(text.str());
    if (!pinned.ok()) return pinned.error().with_context(file.string());
    KnownFinding finding{*pinned, {}, {}, file.filename().string()};
    const std::string body = text.str();
    for (std::string_view line : split_views(body, '\n')) {
      if (line.substr(0, 8) == "expect: " && line.size() > 8) finding.expect.emplace_back(line.substr(8));
      if (line.substr(0, 11) != "violation: ") continue;
      const std::string_view rest = line.substr(11);
      const std::size_t space = rest.find(' ');
      if (space == std::string_view::npos || space == 0 || space + 1 >= rest.size())
        return make_error(ErrorKind::invalid_argument,
                          file.string() + ": a 'violation: ' line is '<kind> <key>': " + std::string(line));
      finding.violations.insert({std::string(rest.substr(0, space)), std::string(rest.substr(space + 1))});
    }
    if (finding.expect.empty() == finding.violations.empty())
      return make_error(ErrorKind::invalid_argument,
                        file.string() +
                            ": a known finding needs 'violation: <kind> <key>' lines (a typed check's violations) "
                            "or, for a check without typed violations, 'expect: ' lines (texts its failure shows), "
                            "not both");
    known.findings.push_back(std::move(finding));
  }
  return known;
}

namespace {

CheckResult run_one(Implementation& target, const Check& check, const ReproToken& base, const KnownFindings& known) {
  const auto start = std::chrono::steady_clock::now();
  CheckResult result{check.group, check.name, check.run(target), base, std::nullopt, 0};
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.token.check = check.check_name();
  if (result.answer.outcome == Outcome::not_run) {  // a check that never ran has no case: its reason only
    result.answer.minimal_case.clear();
    result.answer.case_token.reset();
    result.answer.layout.reset();
  }
  if (result.answer.case_token) {
    for (const auto& [name, value] : base.options) result.answer.case_token->options.emplace(name, value);
    result.token = *result.answer.case_token;
  }
  if (const KnownFinding* finding = known.match(result.token)) {
    if (result.answer.outcome == Outcome::failed) {
      if (const auto differs = finding->mismatch(result.answer)) {
        result.answer.detail = "not the known finding: " + *differs + "\n      " + result.answer.detail;
      } else {
        result.answer.outcome = Outcome::known_finding;
        result.known_finding = finding->pin.reason + " [" + finding->file + "]";
      }
    } else if (result.answer.outcome == Outcome::passed) {
      result.answer.detail = "the known finding pinned for this check no longer reproduces (" + finding->pin.reason +
                             "): remove " + finding->file + " from corpus/findings/";
    }
  }
  return result;
}

constexpr std::array<Outcome, 6> kColumns = {Outcome::passed,  Outcome::failed,        Outcome::known_finding,
                                             Outcome::not_run, Outcome::harness_error, Outcome::timeout};

}  // namespace

std::string progress_word(const CheckResult& r) {
  switch (r.answer.outcome) {
    case Outcome::passed: return r.answer.detail.empty() ? "ok" : "ok (known finding no longer reproduces)";
    case Outcome::failed: return "FAILED";
    case Outcome::not_run: return "NOT RUN";
    case Outcome::known_finding: return "known finding";
    case Outcome::harness_error: return "HARNESS ERROR";
    case Outcome::timeout: return "TIMEOUT";
  }
  return "?";
}

std::vector<CheckResult> run_checks(Implementation& target, const std::vector<Check>& checks, const ReproToken& base,
                                    const KnownFindings& known, std::ostream& progress,
                                    const std::function<void(const Check&)>& before_each) {
  std::vector<CheckResult> results;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    if (before_each) before_each(checks[i]);
    progress << "INFO: [" << i + 1 << "/" << checks.size() << "] " << checks[i].group << ": " << checks[i].name
             << " ... " << std::flush;
    results.push_back(run_one(target, checks[i], base, known));
    progress << progress_word(results.back()) << "\n";
  }
  return results;
}

std::vector<CheckResult> results_without_target(const std::vector<Check>& checks, const ReproToken& base,
                                                const std::string& why) {
  std::vector<CheckResult> out;
  const auto result = [&](std::string group, std::string name, Outcome outcome, std::string detail) {
    CheckResult r{std::move(group), std::move(name), CheckAnswer{outcome, std::move(detail)}, base};
    r.token.check = gate_check_name(r.group, r.name);
    r.never_ran = true;
    return r;
  };
  out.push_back(result("megatron", "imports", Outcome::failed, why));
  for (const Check& c : checks) out.push_back(result(c.group, c.name, Outcome::not_run, std::string(kDoesNotImport)));
  return out;
}

bool has_repro(const CheckResult& r) {
  return !r.never_ran && (r.answer.outcome == Outcome::failed || r.answer.outcome == Outcome::known_finding ||
                          r.answer.outcome == Outcome::harness_error || r.answer.outcome == Outcome::timeout);
}

int stale_findings(const std::vector<CheckResult>& results) {
  return static_cast<int>(std::count_if(results.begin(), results.end(), [](const CheckResult& r) {
    return r.answer.outcome == Outcome::passed && !r.answer.detail.empty();
  }));
}

std::string verdict_counts(const std::vector<CheckResult>& results) {
  std::map<Outcome, int> counts;
  for (const CheckResult& r : results) ++counts[r.answer.outcome];
  const auto count = [](int n, const std::string& one, const std::string& many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  std::string parts;
  const auto add = [&parts](const std::string& part) { parts += (parts.empty() ? "" : ", ") + part; };
  if (counts[Outcome::failed]) add(count(counts[Outcome::failed], "failed", "failed"));
  add(count(counts[Outcome::passed], "passed", "passed"));
  if (counts[Outcome::not_run]) add(count(counts[Outcome::not_run], "not run", "not run"));
  if (counts[Outcome::known_finding]) add(count(counts[Outcome::known_finding], "known finding", "known findings"));
  if (counts[Outcome::harness_error]) add(count(counts[Outcome::harness_error], "harness error", "harness errors"));
  if (counts[Outcome::timeout]) add(count(counts[Outcome::timeout], "timeout", "timeouts"));
  if (const int stale = stale_findings(results)) add(count(stale, "stale finding", "stale findings"));
  return "(" + parts + ")";
}

std::string verdict_line(int exit_code, const std::vector<CheckResult>& results) {
  const std::string verdict = exit_code == kExitOk            ? "PASSED"
                              : exit_code == kExitCheckFailed ? "FAILED"
                              : exit_code == kExitNothingRan  ? "NOTHING RAN"
                                                              : "NO VERDICT (" + std::to_string(exit_code) + ")";
  return "gate: " + verdict + " " + verdict_counts(results);
}

std::string summary_table(const std::vector<CheckResult>& results) {
  std::map<std::string, std::map<Outcome, int>> counts;
  std::map<std::string, double> seconds;
  std::vector<std::string> order;
  for (const CheckResult& r : results) {
    if (!counts.count(r.group)) order.push_back(r.group);
    ++counts[r.group][r.answer.outcome];
    seconds[r.group] += r.seconds;
  }
  std::ostringstream out;
  out << std::left << std::setw(22) << "group" << std::right;
  for (Outcome o : kColumns) out << std::setw(15) << to_string(o);
  out << std::setw(10) << "seconds"
      << "\n";
  for (const std::string& group : order) {
    out << std::left << std::setw(22) << group << std::right;
    for (Outcome o : kColumns) out << std::setw(15) << counts[group][o];
    out << std::setw(10) << std::fixed << std::setprecision(3) << seconds[group] << "\n";
  }
  for (const CheckResult& r : results) {
    const std::string where = r.group + ": " + r.name;
    switch (r.answer.outcome) {
      case Outcome::failed:
        out << "FAILED " << where << "\n      " << r.answer.detail << "\n";
        if (!r.answer.minimal_case.empty()) out << "      minimal case: " << r.answer.minimal_case << "\n";
        break;
      case Outcome::known_finding: out << "KNOWN FINDING " << where << "\n      " << *r.known_finding << "\n"; break;
      case Outcome::not_run: out << "NOT RUN " << where << "\n      " << r.answer.detail << "\n"; break;
      case Outcome::harness_error:
        out << "HARNESS ERROR (no verdict) " << where << "\n      " << r.answer.detail << "\n";
        break;
      case Outcome::timeout: out << "TIMEOUT (no verdict) " << where << "\n      " << r.answer.detail << "\n"; break;
      case Outcome::passed:
        if (!r.answer.detail.empty()) out << "STALE FINDING " << where << "\n      " << r.answer.detail << "\n";
        break;
    }
  }
  for (const CheckResult& r : results)
    if (!r.answer.note.empty() && r.answer.outcome != Outcome::not_run)
      out << "NOTE " << r.group << ": " << r.name << "\n      " << r.answer.note << "\n";
  return out.str();
}

}  // namespace ih::gate
