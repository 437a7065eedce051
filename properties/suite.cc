#include "properties/suite.h"

#include "models/text.h"

namespace ih::props {

const std::vector<Property>& all_properties() {
  static const std::vector<Property> all = [] {
    std::vector<Property> out;
    for (auto group : {pattern_properties, retarget_properties, gtp_properties, load_properties, addendum_properties,
                       model_dump_properties})
      for (Property& p : group()) out.push_back(std::move(p));
    return out;
  }();
  return all;
}

const Property* find_property(const std::string& name) {
  for (const Property& p : all_properties())
    if (p.name == name) return &p;
  return nullptr;
}

std::string property_check_name(const std::string& property) { return "property/" + property; }

Result<const Property*> property_of(const ReproToken& token) {
  if (token.check.rfind("property/", 0) != 0)
    return make_error(ErrorKind::invalid_argument, "check '" + token.check + "' is not a property");
  const Property* property = find_property(token.check.substr(9));
  if (!property)
    return make_error(ErrorKind::invalid_argument, "stale token: no property called '" + token.check.substr(9) +
                                                       "' (renamed or removed; see `properties --list`)");
  return property;
}

void add_case_options(ReproToken& token, const RunParams& params, const PropertyRun& run) {
  token.options["seed"] = std::to_string(params.seed);
  token.options["cases"] = std::to_string(params.cases);
  token.options["size"] = std::to_string(params.max_size);
  if (!run.reproduce.empty()) token.options["rc"] = run.reproduce;
}

Status check_case(const Property& property, const ReproToken& token) {
  const auto fixture = token.option("spec");
  const auto reproduce = token.option("rc");
  if (fixture && reproduce) return make_error(ErrorKind::invalid_argument, "the token names two cases (rc= and spec=)");
  if (!fixture && !reproduce) return make_error(ErrorKind::invalid_argument, "the token names no case (rc= or spec=)");
  if (reproduce) return check_reproduce(property.name, *reproduce);
  if (property.fixtures.count(*fixture)) return Ok{};
  std::string known;
  for (const auto& [name, unused] : property.fixtures) known += (known.empty() ? "" : ", ") + name;
  return make_error(ErrorKind::invalid_argument, "property " + property.name + " has no spec case '" + *fixture +
                                                     "' (its spec cases: " + (known.empty() ? "none" : known) + ")");
}

Replay run_spec_case(Implementation& impl, const Property& property, const std::string& fixture) {
  Replay out;
  const auto it = property.fixtures.find(fixture);
  if (it == property.fixtures.end()) {
    out.outcome = Outcome::harness_error,
    out.verdict = "property " + property.name + " has no spec case '" + fixture + "'";
    return out;
  }
  RecordingImplementation recorded(impl);
  detail::last_verdict_kind().clear();
  std::tie(out.printed_case, out.verdict) = it->second(recorded);
  out.outcome = out.verdict.empty() ? Outcome::passed : Outcome::failed;
  if (out.outcome == Outcome::failed) out.failure_kind = detail::last_verdict_kind();
  if (recorded.no_verdict()) out.outcome = recorded.no_verdict_outcome(), out.verdict = recorded.no_verdict()->message;
  return out;
}

Replay replay(Implementation& impl, const Property& property, const ReproToken& token) {
  Replay out;
  if (const auto fixture = token.option("spec")) return run_spec_case(impl, property, *fixture);
  const auto reproduce = token.option("rc");
  if (!reproduce) {
    out.outcome = Outcome::harness_error, out.verdict = "the token names no case (rc= or spec=)";
    return out;
  }
  RunParams params;
  params.reproduce = *reproduce;
  const PropertyRun run = property.run(impl, params);
  // RapidCheck replays a token only to show a failure; a case that now holds comes back as this message.
  const bool holds_now = run.description.find("Reproduced result is not a failure") != std::string::npos;
  // A shrink path this generator cannot walk (a generator changed, or an rc= edited and re-signed).
  out.no_such_case = run.description.find("Unable to reproduce minimum value") != std::string::npos;
  out.printed_case = run.outcome == Outcome::failed ? run.counterexample : run.last_case;
  out.outcome = holds_now ? Outcome::passed : run.outcome;
  if (!holds_now && run.outcome != Outcome::passed) out.verdict = run.description, out.failure_kind = run.failure_kind;
  return out;
}

}  // namespace ih::props
