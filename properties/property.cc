// The RapidCheck driver behind every property: budget, seed, replay of a reproduce string, and an
// Outcome instead of printed output, so gtest, the CLI and the mutation test share one runner.
#include "properties/property.h"

#include <rapidcheck/detail/Configuration.h>
#include <rapidcheck/detail/TestListener.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <string_view>

namespace ih::props {

Result<rc::detail::Configuration> rc_params() {
  const char* text = std::getenv("RC_PARAMS");
  if (!text) return rc::detail::Configuration{};
  try {
    return rc::detail::configFromString(text);
  } catch (const std::exception& e) {  // RapidCheck reports a bad configuration by throwing
    return make_error(ErrorKind::invalid_argument, std::string("RC_PARAMS '") + text + "': " + e.what());
  }
}

namespace {

/// A RapidCheck Random's serialized fields (Random.hpp): key, bits, counter, bit index.
struct RandomState {
  std::uint64_t bits = 0, counter = 0;
  std::uint8_t bit_index = 0;
};

RandomState state_of(const rc::Random& random) {
  std::vector<std::uint8_t> bytes;
  rc::serialize(random, std::back_inserter(bytes));
  RandomState out;
  std::array<std::uint64_t, 4> key{};
  auto at = rc::detail::deserializeN<std::uint64_t>(bytes.begin(), bytes.end(), key.size(), key.begin());
  at = rc::detail::deserializeCompact(at, bytes.end(), out.bits);
  at = rc::detail::deserializeCompact(at, bytes.end(), out.counter);
  if (at != bytes.end()) out.bit_index = *at;
  return out;
}

/// RapidCheck's base64 (its Base64.cpp: this alphabet, 6 bits a character, least significant first).
std::optional<std::vector<std::uint8_t>> decode_base64(const std::string& text) {
  static constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+_";
  if (text.size() % 4 == 1) return std::nullopt;
  std::vector<std::uint8_t> out;
  for (std::size_t i = 0; i < text.size(); i += 4) {
    int nbits = 0;
    std::uint32_t bits = 0;
    for (std::size_t j = i; j < std::min(text.size(), i + 4); ++j, nbits += 6) {
      const auto value = kAlphabet.find(text[j]);
      if (value == std::string_view::npos) return std::nullopt;
      bits |= static_cast<std::uint32_t>(value) << nbits;
    }
    for (; nbits >= 8; nbits -= 8, bits >>= 8) out.push_back(static_cast<std::uint8_t>(bits));
  }
  return out;
}

/// Walks a reproduce map's bytes as RapidCheck's deserialize does, with the bounds check its
/// Random reader lacks: it reads the bit index without looking for the end, so a truncated string
/// makes it read on past the buffer (a crash, not an exception).
bool whole_reproduce_map(const std::vector<std::uint8_t>& bytes) {
  namespace rcd = rc::detail;
  try {
    auto at = bytes.begin();
    std::uint64_t entries = 0;
    at = rcd::deserializeCompact(at, bytes.end(), entries);
    if (entries != 1) return false;
    std::string name;
    at = rcd::deserialize(at, bytes.end(), name);
    std::array<std::uint64_t, 4> key{};
    at = rcd::deserializeN<std::uint64_t>(at, bytes.end(), key.size(), key.begin());
    std::uint64_t bits = 0, counter = 0;
    at = rcd::deserializeCompact(at, bytes.end(), bits);
    at = rcd::deserializeCompact(at, bytes.end(), counter);
    if (at == bytes.end()) return false;  // the bit index
    ++at;
    std::uint32_t size = 0;
    at = rcd::deserialize(at, bytes.end(), size);
    std::vector<std::size_t> path;
    at = rcd::deserializeCompact<std::size_t>(at, bytes.end(), std::back_inserter(path)).first;
    return at == bytes.end();
  } catch (const rcd::SerializationException&) {
    return false;
  }
}

}  // namespace

Status check_reproduce(const std::string& name, const std::string& reproduce) {
  const auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::invalid_argument, "rc= is not a RapidCheck case of property " + name + ": " + why);
  };
  // Checked here first: RapidCheck reads a truncated string past its end. Only its base64 alphabet
  // passes, so the text cannot add other configuration keys either.
  const auto bytes = decode_base64(reproduce);
  if (reproduce.empty() || !bytes) return bad("it is not RapidCheck's base64");
  if (!whole_reproduce_map(*bytes)) return bad("it is cut short or holds more than one case");
  std::unordered_map<std::string, rc::detail::Reproduce> map;
  try {
    map = rc::detail::configFromString("reproduce=" + reproduce).reproduce;
  } catch (const std::exception& e) {  // RapidCheck reports a bad string by throwing
    return bad(std::string("it does not decode (") + e.what() + ")");
  }
  if (map.size() != 1 || !map.count(name)) return bad("it names another property");
  const rc::detail::Reproduce& r = map.at(name);
  if (r.size < 0 || r.size > kMaxCaseSize)
    return bad("its size " + std::to_string(r.size) + " is outside [0, " + std::to_string(kMaxCaseSize) + "]");
  // Each case's Random is split off fresh: counter 0, fewer than 64 path bits, none above them.
  const RandomState random = state_of(r.random);
  if (random.counter != 0 || random.bit_index >= 64 || (random.bits >> random.bit_index) != 0)
    return bad("its random state is not one RapidCheck starts a case with");
  return Ok{};
}

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
ReproduceMap reproduce_map(const std::string& name, const RunParams& params, const rc::detail::Configuration& config,
                           std::string& error) {
  if (!params.reproduce) return config.reproduce;
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

std::string& last_verdict_kind() {
  thread_local std::string kind;
  return kind;
}

PropertyRun run_rapidcheck(const std::string& name, const std::function<void()>& body, const RunParams& params) {
  PropertyRun out{name};
  const auto start = std::chrono::steady_clock::now();
  const auto config = rc_params();
  std::string error = config.ok() ? "" : config.error().message;
  const ReproduceMap map = config.ok() ? reproduce_map(name, params, *config, error) : ReproduceMap{};
  if (!error.empty()) {
    out.outcome = Outcome::harness_error, out.description = error;
    return out;
  }
  rc::detail::TestParams tp = config->testParams;
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
         " ranks per world (T x G, x CP x DP for an election; one process per rank)" +
         (capacity.max_model_ranks ? ", " + std::to_string(*capacity.max_model_ranks) + " for a whole model's" : "") +
         "; the reference draws the full range (T up to 4, G up to 64)";
}

PropertyRun typed(PropertyRun run, const RecordingImplementation& recorded) {
  if (!recorded.no_verdict()) return run;
  run.outcome = recorded.no_verdict_outcome();
  run.description = std::string(to_string(recorded.no_verdict()->kind)) + ": " + recorded.no_verdict()->message;
  return run;
}

}  // namespace detail

Verdict typed_verdict(std::string kind, Verdict text) {
  detail::last_verdict_kind() = std::move(kind);
  return text;
}

}  // namespace ih::props
