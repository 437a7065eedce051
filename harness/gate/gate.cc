#include "harness/gate/gate.h"

#include <chrono>
#include <iomanip>
#include <map>
#include <sstream>

namespace ih::gate {

std::vector<CheckResult> run_checks(Implementation& target, const std::vector<Check>& checks, std::ostream& progress) {
  std::vector<CheckResult> results;
  for (std::size_t i = 0; i < checks.size(); ++i) {
    const Check& check = checks[i];
    const auto start = std::chrono::steady_clock::now();
    auto outcome = check.run(target);
    CheckResult result;
    result.group = check.group;
    result.name = check.name;
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!outcome.ok()) {
      const bool unsupported = outcome.error().kind == ErrorKind::unsupported;
      result.verdict = unsupported ? CheckResult::Verdict::unsupported : CheckResult::Verdict::failed;
      result.detail = std::string(to_string(outcome.error().kind)) + ": " + outcome.error().message;
    } else if (!outcome->empty()) {
      result.verdict = CheckResult::Verdict::failed;
      result.detail = *outcome;
    }
    progress << "INFO: [" << i + 1 << "/" << checks.size() << "] " << check.group << ": " << check.name << " ... "
             << (result.verdict == CheckResult::Verdict::passed ? "ok"
                 : result.verdict == CheckResult::Verdict::failed ? "FAILED" : "not supported by target")
             << "\n";
    results.push_back(std::move(result));
  }
  return results;
}

std::string summary_table(const std::vector<CheckResult>& results) {
  struct Counts { int passed = 0, failed = 0, unsupported = 0; double seconds = 0; };
  std::map<std::string, Counts> groups;
  std::vector<std::string> order;
  for (const CheckResult& r : results) {
    if (!groups.count(r.group)) order.push_back(r.group);
    Counts& c = groups[r.group];
    c.seconds += r.seconds;
    (r.verdict == CheckResult::Verdict::passed ? c.passed : r.verdict == CheckResult::Verdict::failed ? c.failed : c.unsupported)++;
  }
  std::ostringstream out;
  out << std::left << std::setw(28) << "group" << std::right << std::setw(8) << "passed" << std::setw(8) << "failed"
      << std::setw(13) << "unsupported" << std::setw(10) << "seconds" << "\n";
  for (const std::string& name : order) {
    const Counts& c = groups[name];
    out << std::left << std::setw(28) << name << std::right << std::setw(8) << c.passed << std::setw(8) << c.failed
        << std::setw(13) << c.unsupported << std::setw(10) << std::fixed << std::setprecision(3) << c.seconds << "\n";
  }
  for (const CheckResult& r : results) {
    if (r.verdict == CheckResult::Verdict::failed) out << "FAILED " << r.group << ": " << r.name << "\n      " << r.detail << "\n";
    if (r.verdict == CheckResult::Verdict::unsupported) out << "NOT RUN (unsupported by target) " << r.group << ": " << r.name << "\n";
  }
  return out.str();
}

}  // namespace ih::gate
