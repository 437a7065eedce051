#include "properties/suite.h"

#include "mutants/mutant_implementation.h"
#include "models/text.h"

namespace ih::props {

const std::vector<Property>& all_properties() {
  static const std::vector<Property> all = [] {
    std::vector<Property> out;
    for (auto group : {pattern_properties, retarget_properties, gtp_properties, load_properties})
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

std::string to_string(const Token& token) {
  return "prop:" + token.property + ":" + token.target + ":" + token.kind + "=" + token.payload;
}

bool is_property_token(const std::string& text) { return text.rfind("prop:", 0) == 0; }

Result<Token> parse_token(const std::string& text) {
  const auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::invalid_argument, "property token '" + text + "': " + why +
                                                       " (form: prop:<property>:<target>:rc=<reproduce> or spec=<case>)");
  };
  if (!is_property_token(text)) return bad("does not start with prop:");
  const std::size_t p1 = text.find(':', 5), p2 = p1 == std::string::npos ? p1 : text.find(':', p1 + 1);
  if (p2 == std::string::npos) return bad("missing fields");
  Token token{text.substr(5, p1 - 5), text.substr(p1 + 1, p2 - p1 - 1), "", ""};
  const std::string rest = text.substr(p2 + 1);
  const std::size_t eq = rest.find('=');
  if (eq == std::string::npos) return bad("no rc= or spec= payload");
  token.kind = rest.substr(0, eq), token.payload = rest.substr(eq + 1);
  if (token.kind != "rc" && token.kind != "spec") return bad("payload kind must be rc or spec");
  if (!find_property(token.property)) return bad("unknown property '" + token.property + "'");
  return token;
}

Result<std::unique_ptr<Implementation>> make_target(const std::string& target) {
  if (target == "reference") return std::unique_ptr<Implementation>(std::make_unique<ReferenceImplementation>());
  if (target.rfind("mutant.", 0) != 0)
    return make_error(ErrorKind::invalid_argument, "unknown target '" + target + "' (reference or mutant.<name>)");
  IH_TRY_ASSIGN(mutant, MutantImplementation::create(target.substr(7)));
  return std::unique_ptr<Implementation>(std::move(mutant));
}

Replay replay(Implementation& impl, const Token& token) {
  const Property& property = *find_property(token.property);
  Replay out;
  if (token.kind == "spec") {
    const auto it = property.fixtures.find(token.payload);
    if (it == property.fixtures.end()) {
      out.reproduced = false, out.error = "property " + token.property + " has no spec case '" + token.payload + "'";
      return out;
    }
    std::tie(out.printed_case, out.verdict) = it->second(impl);
    return out;
  }
  RunParams params;
  params.reproduce = token.payload;
  const Outcome o = property.run(impl, params);
  // RapidCheck replays a token only to show a failure; a case that now holds comes back as this message.
  const bool holds_now = o.description.find("Reproduced result is not a failure") != std::string::npos;
  out.printed_case = o.ok || o.error || holds_now ? o.last_case : o.counterexample;
  if (holds_now) return out;
  if (o.error) out.reproduced = false, out.error = o.description;
  else if (!o.ok) out.verdict = o.description;
  return out;
}

Result<PinnedCase> parse_pinned(const std::string& text) {
  std::optional<Token> token;
  std::string reason;
  for (const std::string& line : split(text, '\n')) {
    if (line.rfind("token: ", 0) == 0) {
      IH_TRY_ASSIGN(parsed, parse_token(line.substr(7)));
      token = parsed;
    } else if (line.rfind("reason: ", 0) == 0) {
      reason = line.substr(8);
    }
  }
  if (!token || reason.empty())
    return make_error(ErrorKind::invalid_argument, "a pinned case needs a 'token: ' and a 'reason: ' line");
  return PinnedCase{*token, reason};
}

std::string format_pinned(const PinnedCase& pinned) {
  return "token: " + to_string(pinned.token) + "\nreason: " + pinned.reason + "\n";
}

}  // namespace ih::props
