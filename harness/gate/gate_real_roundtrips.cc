// The real tier's round trips (issue 17): Megatron's own GPTModel saved by A ranks and its HybridModel
// loaded by B ranks, every element checked by the LibTorch verifier. The gate cannot start worlds itself
// (harness/roundtrip is not its room): the command hands in the runner harness/targets makes
// (real_roundtrip_runner.h), and each check judges one scenario's outcome.
#include <algorithm>
#include <utility>

#include "harness/gate/gate.h"

namespace ih::gate {

namespace {

/// One real round trip's verdict: wrong elements are `elements_wrong <scenario>`, a refusal `roundtrip_failed`.
Result<Violations> judge(Implementation& target, const RealRoundTripRunner& runner, const std::string& scenario,
                         std::int64_t save_ranks, std::int64_t load_ranks) {
  if (!runner) return unsupported(target.name(), "real round trips (no round-trip worlds in this command)");
  IH_TRY_ASSIGN(result, runner(target, scenario, save_ranks, load_ranks));
  const std::string first = result.problems.empty() ? std::string() : "; " + result.problems.front();
  switch (result.outcome) {
    case Outcome::passed:
      if (result.elements_verified > 0) return Violations{};
      return Violations{{"nothing_verified", scenario, scenario + ": passed with no element verified"}};
    case Outcome::not_run: return make_error(seam_kind::unsupported, scenario + " did not run" + first);
    case Outcome::harness_error: return make_error(seam_kind::harness_error, scenario + first);
    case Outcome::timeout: return make_error(seam_kind::timeout, scenario + first);
    case Outcome::failed:
    case Outcome::known_finding: break;
  }
  Violations found;
  if (result.wrong_elements > 0)
    found.push_back({"elements_wrong", scenario,
                     scenario + ": " + std::to_string(result.wrong_elements) + " of " +
                         std::to_string(result.elements_verified) + " elements wrong" + first});
  // Stored bytes out of the reference's layout are their own violation: a finding pinned on where the load raised
  // must not absorb a save that now writes another layout.
  if (result.stored_wrong > 0) {
    const auto line = std::find_if(result.problems.begin(), result.problems.end(),
                                   [](const std::string& p) { return p.rfind("stored bytes: ", 0) == 0; });
    found.push_back(
        {"stored_layout_wrong", scenario,
         scenario + ": " +
             (line == result.problems.end() ? std::to_string(result.stored_wrong) + " stored elements out of the layout"
                                            : *line)});
  }
  // A refusal names where Megatron raised (refused elsewhere, it is another finding); one that came after what was
  // loaded had been verified stands beside that verdict. A failure with nothing else wrong (the two trees'
  // descriptions, a rank that died) is its own.
  if ((result.wrong_elements == 0 && result.stored_wrong == 0) || !result.refused_in.empty())
    found.push_back({"roundtrip_failed", result.refused_in.empty() ? scenario : scenario + " in " + result.refused_in,
                     scenario + first});
  return found;
}

}  // namespace

std::vector<Check> real_roundtrip_checks(const std::vector<std::string>& scenarios,
                                         const std::vector<std::pair<std::int64_t, std::int64_t>>& directions,
                                         RealRoundTripRunner runner) {
  std::vector<Check> out;
  for (const auto& [save_ranks, load_ranks] : directions)
    for (const std::string& scenario : scenarios)
      out.push_back(Check::typed(kRealRoundTripGroup, real_roundtrip_check(scenario, save_ranks, load_ranks),
                                 [=, runner = runner](Implementation& target) -> Result<Violations> {
                                   // Its worlds build and describe the real models themselves (a cross-version
                                   // session asks each tree's describer): a target that builds none runs none.
                                   if (!target.supports(Operation::model_state_dict))
                                     return unsupported(target.name(), "real round trips (it builds no real model)");
                                   return judge(target, runner, scenario, save_ranks, load_ranks);
                                 }));
  return out;
}

std::vector<Check> real_roundtrip_cross_checks(const std::vector<std::string>& scenarios,
                                               const std::vector<std::pair<std::int64_t, std::int64_t>>& directions,
                                               RealRoundTripRunner base_to_new, RealRoundTripRunner new_to_base) {
  std::vector<Check> out;
  for (const auto& [save_ranks, load_ranks] : directions)
    for (const auto& [forward, runner] : {std::pair{true, base_to_new}, std::pair{false, new_to_base}})
      for (const std::string& scenario : scenarios)
        out.push_back(Check::typed(kRealRoundTripCrossGroup,
                                   real_roundtrip_cross_check(forward, scenario, save_ranks, load_ranks),
                                   [=, runner = runner](Implementation& target) {
                                     return judge(target, runner, scenario, save_ranks, load_ranks);
                                   }));
  return out;
}

}  // namespace ih::gate
