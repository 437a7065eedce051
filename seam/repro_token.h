// The one repro token: a stable check name, the target, and every option that changes the case,
// with a format version. Printed by every failing check (gate checks, properties, Megatron-side
// failures, round trips); `interop-harness repro TOKEN` replays it and `pin TOKEN` keeps it.
//
//   ih1:<check>[:<option>=<value>]...     e.g.
//   ih1:property/gtp_pieces_tile_chunks:target=reference:mutant=gtp_offset_no_tp_term:rc=Bx0
//
// <check> is "property/<name>" or "gate/<group>/<name>": a name, never a position, so adding a
// check changes no other token. Values are percent-encoded outside [A-Za-z0-9._/+-], so a token
// is one shell word. Options are kept sorted, so one case has one token.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "models/result.h"

namespace ih {

struct ReproToken {
  static constexpr std::string_view kPrefix = "ih1:";

  std::string check;                           // stable check name
  std::map<std::string, std::string> options;  // target, mutant, seed, cases, size, rc, spec, corpus, megatron-path

  std::optional<std::string> option(const std::string& name) const;
  std::string target() const { return option("target").value_or("reference"); }
  bool operator==(const ReproToken&) const = default;
};

/// The token's text.
std::string to_string(const ReproToken& token);
/// Parses a token; an unknown version, an unknown option or a malformed field is an error naming it.
Result<ReproToken> parse_repro_token(std::string_view text);

/// A pinned case (corpus/regressions/*.pin) or a known finding (corpus/findings/*.finding): a
/// `token: ` line and a one-line `reason: `.
struct PinnedCase {
  ReproToken token;
  std::string reason;
};
Result<PinnedCase> parse_pinned(std::string_view text);
std::string format_pinned(const PinnedCase& pinned);

/// "gate/" + slug(group) + "/" + name: the stable name of a gate check.
std::string gate_check_name(std::string_view group, std::string_view name);

}  // namespace ih
