// Repro-token invariants (invariants.h). One translation unit per surface, so a fuzz target links only its own.
#include "properties/invariants.h"

namespace ih::invariants {

Broken repro_token_round_trip(std::string_view text) {
  const auto token = parse_repro_token(text);
  if (!token.ok()) return "";
  const std::string printed = to_string(*token);
  const auto again = parse_repro_token(printed);
  if (!again.ok()) return "token '" + printed + "' does not parse back: " + again.error().message;
  if (!(*again == *token) || to_string(*again) != printed) return "token '" + printed + "' parses to a different token";
  return "";
}

}  // namespace ih::invariants
