// A property: a plain function of (Implementation&, case) with a generator for its cases, run
// three ways: by RapidCheck (gtest and `interop-harness properties`), and as a replay of a token.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include <rapidcheck.h>
#include <rapidcheck/detail/Configuration.h>

#include "properties/cases.h"
#include "seam/implementation.h"
#include "seam/outcome.h"
#include "seam/recording_implementation.h"

namespace ih::props {

/// A property's verdict on one case: empty when it holds, else what broke (readable).
using Verdict = std::string;

/// A failing verdict typed with its kind (what broke, e.g. "to_state_dict_failed"): the gate gives
/// the failure a typed violation of this kind, which a known finding matches (its `violation:`
/// lines), not the text. The kind is the last one typed while the case ran; untyped verdicts have none.
Verdict typed_verdict(std::string kind, Verdict text);

/// Budget and replay input of one run.
struct RunParams {
  std::uint64_t seed = 0;
  int cases = 100;
  int max_size = 100;
  std::optional<std::string> reproduce;  // RapidCheck's reproduce string (from a token)
};

/// What one run of one property found.
struct PropertyRun {
  std::string name;
  int cases = 0;
  /// passed, failed (a finding), not_run (the target lacks an operation), timeout or harness_error
  /// (the target or RapidCheck gave no verdict: a bad reproduce string is one).
  Outcome outcome = Outcome::passed;
  double seconds = 0;
  std::string description;                // the failure message, or why there is no verdict
  std::string counterexample;             // the minimal case, printed
  std::string reproduce;                  // RapidCheck's reproduce string for the failure
  int shrink_steps = 0;                   // length of the shrink path
  std::string last_case;                  // the last case run, printed (on a replay: the regenerated case)
  std::optional<GtpCase> failing_layout;  // the minimal failing case's in_proj layout, for a picture
  std::string failure_kind;               // the minimal failing case's typed_verdict kind ("": untyped)
  std::string note;                       // how the cases were drawn when the target bounded them
};

/// A registered property: name, group, one-line description, a runner and named spec cases.
struct Property {
  std::string name;
  std::string group;
  std::string description;
  std::function<PropertyRun(Implementation&, const RunParams&)> run;
  /// Built-in cases by name (spec worked examples), each returning (printed case, verdict).
  std::map<std::string, std::function<std::pair<std::string, Verdict>(Implementation&)>> fixtures;
  /// The in_proj layout of each spec case that has one (drawn in the reports when it fails).
  std::map<std::string, GtpCase> fixture_layouts;
};

/// RapidCheck's settings from RC_PARAMS (seed, max_success, max_size, max_discard_ratio, noshrink,
/// reproduce), read without RapidCheck's own "Using configuration: seed=<random>" line, whose random seed
/// no harness run draws from: RapidCheck's defaults (seed 0, 100 cases, size 100) where RC_PARAMS is unset
/// or silent. A text RapidCheck cannot read is invalid_argument naming it. Every run takes its other
/// settings and its reproduce map from here, its seed and budget from RunParams.
Result<rc::detail::Configuration> rc_params();

/// The largest RapidCheck size a case is generated with (the CLI's --max-size limit).
inline constexpr int kMaxCaseSize = 10'000;
/// Checks a token's rc= value before RapidCheck sees it: a reproduce string of exactly this
/// property whose state RapidCheck itself could have written (a fresh Random, a size within
/// [0, kMaxCaseSize]). RapidCheck asserts (aborts) on a Random in the middle of a block, which a
/// hand-made or damaged string can hold; this refuses it as invalid_argument instead.
Status check_reproduce(const std::string& name, const std::string& reproduce);

namespace detail {
/// The last case a property body generated, printed (read by run_rapidcheck after a run).
std::string& last_case();
/// The layout of the last case that failed (shrinking keeps only failing cases, so after a run
/// this is the minimal one's), when the case has one.
std::optional<GtpCase>& last_failing_layout();
/// The kind typed_verdict gave while the current case ran ("" when none); cleared before each case.
std::string& last_verdict_kind();
template <class Case>
std::optional<GtpCase> layout_of(const Case& c) {
  if constexpr (std::is_same_v<Case, GtpCase>)
    return c;
  else if constexpr (std::is_same_v<Case, GtpCrossCase>)
    return c.save;
  else
    return std::nullopt;
}
/// Runs a RapidCheck property body with `params`, collecting the result into an Outcome.
PropertyRun run_rapidcheck(const std::string& name, const std::function<void()>& body, const RunParams& params);
/// A run whose target gave no verdict somewhere (an operation it lacks, a timeout, a fault) is typed
/// as that, whatever the property concluded from the error.
PropertyRun typed(PropertyRun run, const RecordingImplementation& recorded);
/// Prints a case with operator<<.
template <class Case>
std::string show(const Case& c) {
  std::ostringstream out;
  out << c;
  return out.str();
}
}  // namespace detail

namespace detail {
/// One RapidCheck run of `check` over `gen` against `impl`.
template <class Case>
PropertyRun run_property(const std::string& name, const rc::Gen<Case>& gen,
                         Verdict (*check)(Implementation&, const Case&), Implementation& impl,
                         const RunParams& params) {
  RecordingImplementation recorded(impl);
  last_failing_layout().reset();
  std::string failing_kind;
  PropertyRun run = run_rapidcheck(
      name,
      [&] {
        const Case c = *gen;
        last_case() = show(c);
        last_verdict_kind().clear();
        const Verdict v = check(recorded, c);
        if (v.empty()) return;
        last_failing_layout() = detail::layout_of(c);
        failing_kind = last_verdict_kind();
        RC_FAIL(v);
      },
      params);
  if (run.outcome == Outcome::failed) run.failing_layout = last_failing_layout(), run.failure_kind = failing_kind;
  return typed(std::move(run), recorded);
}
/// The note of a run whose cases were drawn within `capacity`.
std::string capacity_note(const Implementation& impl, const WorldCapacity& capacity);
}  // namespace detail

/// Wraps `check` and `gen` into a Property. A case whose verdict is non-empty fails with it.
template <class Case>
Property make_property(std::string name, std::string group, std::string description, rc::Gen<Case> gen,
                       Verdict (*check)(Implementation&, const Case&), std::map<std::string, Case> fixtures = {}) {
  Property p{name, std::move(group), std::move(description), {}, {}, {}};
  p.run = [name, gen, check](Implementation& impl, const RunParams& params) {
    return detail::run_property(name, gen, check, impl, params);
  };
  for (auto& [fixture, c] : fixtures) {
    p.fixtures[fixture] = [c, check](Implementation& impl) { return std::make_pair(detail::show(c), check(impl, c)); };
    if (auto layout = detail::layout_of(c)) p.fixture_layouts[fixture] = *layout;
  }
  return p;
}

/// A generator of cases that build worlds, drawn within an implementation's capacity.
template <class Case>
using WorldGen = std::function<rc::Gen<Case>(const WorldCapacity&)>;

/// make_property for cases that build worlds: the cases are drawn within the target's
/// WorldCapacity (an unbounded target, the reference, gets the full range, the same cases as an
/// unbounded generator), and a bounded run says so in its note. Spec cases are run as they are.
template <class Case>
Property make_world_property(std::string name, std::string group, std::string description, WorldGen<Case> gen_for,
                             Verdict (*check)(Implementation&, const Case&),
                             std::map<std::string, Case> fixtures = {}) {
  Property p = make_property<Case>(std::move(name), std::move(group), std::move(description), gen_for(WorldCapacity{}),
                                   check, std::move(fixtures));
  p.run = [name = p.name, gen_for, check](Implementation& impl, const RunParams& params) {
    const WorldCapacity capacity = impl.capacity();
    PropertyRun run = detail::run_property(name, gen_for(capacity), check, impl, params);
    run.note = detail::capacity_note(impl, capacity);
    return run;
  };
  return p;
}

}  // namespace ih::props

/// In a Verdict-returning function: binds `var` to the value of a Result, or returns the error as
/// the verdict (an implementation error where success was expected is a failure).
#define IH_VERDICT_ASSIGN(var, expr)                                                                          \
  auto var##_verdict_ = (expr);                                                                               \
  if (!var##_verdict_.ok())                                                                                   \
    return std::string(::ih::to_string(var##_verdict_.error().kind)) + ": " + var##_verdict_.error().message; \
  auto var = std::move(var##_verdict_).value()
