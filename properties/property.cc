// The RapidCheck driver behind every property: budget, seed, replay of a reproduce string, and an
// Outcome instead of printed output, so gtest, the CLI and the mutation test share one runner.
#include "properties/property.h"

#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/TestListener.h>

namespace ih::props {

void load_configuration() { rc::detail::configuration(); }

namespace detail {
namespace {

/// Counts shrink steps; prints nothing (the caller decides what to show).
class QuietListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool accepted) override { shrinks_ += accepted; }
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
  int shrinks() const { return shrinks_; }

 private:
  int shrinks_ = 0;
};

using ReproduceMap = std::unordered_map<std::string, rc::detail::Reproduce>;

/// RC_PARAMS's "reproduce=" value for one property, or "" (the string the token carries).
std::string encode(const std::string& name, const rc::detail::Reproduce& reproduce) {
  rc::detail::Configuration config;
  config.reproduce[name] = reproduce;
  const std::string text = rc::detail::configToMinimalString(config);
  const std::string prefix = "reproduce=";
  const auto at = text.find(prefix);
  if (at == std::string::npos) return "";
  const auto end = text.find(' ', at);  // other keys (seed=...) follow after a space
  return text.substr(at + prefix.size(), end == std::string::npos ? std::string::npos : end - at - prefix.size());
}

/// The reproduce map for this run: RC_PARAMS's own map, overridden by a token's string.
ReproduceMap reproduce_map(const std::string& name, const RunParams& params, std::string& error) {
  ReproduceMap map = rc::detail::configuration().reproduce;
  if (!params.reproduce) return map;
  try {
    const auto config = rc::detail::configFromString("reproduce=" + *params.reproduce);
    if (!config.reproduce.count(name)) error = "the reproduce string is for another property";
    return config.reproduce;
  } catch (const std::exception& e) {  // RapidCheck reports bad configuration by throwing
    error = std::string("bad reproduce string: ") + e.what();
    return {};
  }
}

std::string show_example(const rc::detail::Example& example) {
  std::string out;
  for (const auto& [type, value] : example) out += (out.empty() ? "" : "\n") + value;
  return out;
}

}  // namespace

std::string& last_case() {
  thread_local std::string text;
  return text;
}

std::optional<GtpCase>& last_failing_layout() {
  thread_local std::optional<GtpCase> layout;
  return layout;
}

PropertyRun run_rapidcheck(const std::string& name, const std::function<void()>& body, const RunParams& params) {
  PropertyRun out{name};
  const auto start = std::chrono::steady_clock::now();
  std::string error;
  const ReproduceMap map = reproduce_map(name, params, error);
  if (!error.empty()) {
    out.outcome = Outcome::harness_error, out.description = error;
    return out;
  }
  rc::detail::TestParams tp = rc::detail::configuration().testParams;
  tp.seed = params.seed;
  tp.maxSuccess = params.cases;
  tp.maxSize = params.max_size;
  QuietListener listener;
  const auto result = rc::detail::checkTestable(body, rc::detail::TestMetadata{name, name}, tp, listener, map);
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  out.shrink_steps = listener.shrinks();
  out.last_case = last_case();
  rc::detail::SuccessResult success;
  rc::detail::FailureResult failure_value;
  if (result.match(success)) {
    out.cases = success.numSuccess;
  } else if (result.match(failure_value)) {
    const auto* failure = &failure_value;
    out.outcome = Outcome::failed;
    out.cases = failure->numSuccess + 1;
    // RapidCheck prefixes "<file>:<line>:\nRC_FAIL(v)\n\n" to the message; keep only the verdict.
    const std::size_t gap = failure->description.find("\n\n");
    out.description = gap == std::string::npos ? failure->description : failure->description.substr(gap + 2);
    out.counterexample = show_example(failure->counterExample);
    out.reproduce = encode(name, failure->reproduce);
    out.shrink_steps = static_cast<int>(failure->reproduce.shrinkPath.size());
  } else {
    out.outcome = Outcome::harness_error;
    std::ostringstream text;
    rc::detail::printResultMessage(result, text);
    out.description = text.str();
  }
  return out;
}

std::string capacity_note(const Implementation&, const WorldCapacity& capacity) {
  if (!capacity.max_ranks) return "";
  return "cases drawn within the target's world capacity: at most " + std::to_string(*capacity.max_ranks) +
         " ranks per world (T x G, x CP x DP for an election; one process per rank); the reference draws the full "
         "range (T up to 4, G up to 64)";
}

PropertyRun typed(PropertyRun run, const RecordingImplementation& recorded) {
  if (!recorded.no_verdict()) return run;
  run.outcome = recorded.no_verdict_outcome();
  run.description = std::string(to_string(recorded.no_verdict()->kind)) + ": " + recorded.no_verdict()->message;
  return run;
}

}  // namespace detail
}  // namespace ih::props
