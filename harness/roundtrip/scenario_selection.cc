#include "harness/roundtrip/scenario_selection.h"

#include "harness/roundtrip/seeded_scenarios.h"
#include "seam/error_kinds.h"

namespace ih {
namespace {

Result<ScenarioSelection> named_scenario(const ScenarioRequest& request) {
  const ScenarioRow* row = find_scenario_row(request.name);
  if (row && is_real(row->kind) != request.real)
    return make_error(ErrorKind::invalid_argument,
                      "scenario '" + request.name + "' " +
                          (request.real ? "is not a real-model scenario (--real runs real_*)"
                                        : "is a real-model scenario: add --real"));
  if (row && row->in_all == InAll::with_candidate && request.candidate == Candidate::none)
    return make_error(seam_kind::unsupported,
                      "scenario '" + request.name + "' is not run: " + std::string(kNeedsCandidate));
  IH_TRY_ASSIGN(s, make_world_scenario(request.name, request.sizes.save, request.sizes.load));
  return ScenarioSelection{{std::move(s)}, {}};
}

Result<ScenarioSelection> all_scenarios(const ScenarioRequest& request) {
  const bool candidate = request.candidate != Candidate::none;
  ScenarioSelection out;
  for (const ScenarioRow& row : scenario_table()) {
    if (is_real(row.kind) != request.real || row.in_all == InAll::no) continue;
    if (row.in_all == InAll::with_candidate && !candidate) continue;
    auto s = make_world_scenario(std::string(row.name), request.sizes.save, request.sizes.load);
    if (s.ok())
      out.scenarios.push_back(std::move(*s));
    else if (s.error().kind == seam_kind::unsupported)
      out.not_run.push_back(std::string(row.name) + ": " + s.error().message);
    else
      return make_error(ErrorKind::invalid_argument, s.error().message);
  }
  if (!candidate && !request.real)
    for (const auto& [name, why] : world_scenarios_not_run()) out.not_run.push_back(name + ": " + why);
  return out;
}

Result<ScenarioSelection> seeded_scenario(const ScenarioRequest& request) {
  auto s = request.real ? seeded_real_world_scenario(request.seed, request.sizes.save, request.sizes.load)
                        : seeded_world_scenario(request.seed, request.sizes.save, request.sizes.load);
  if (!s.ok()) return make_error(ErrorKind::invalid_argument, s.error().message);
  return ScenarioSelection{{std::move(*s)}, {}};
}

}  // namespace

Result<ScenarioSelection> select_scenarios(const ScenarioRequest& request) {
  switch (request.mode) {
    case ScenarioRequest::Mode::named: return named_scenario(request);
    case ScenarioRequest::Mode::all: return all_scenarios(request);
    case ScenarioRequest::Mode::seed: return seeded_scenario(request);
  }
  return make_error(ErrorKind::invalid_argument, "no scenario mode");
}

}  // namespace ih
