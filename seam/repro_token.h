// The one repro token: a stable check name, the target, and every option that changes the case,
// with a format version and a checksum. Printed by every failing check (gate checks, properties,
// Megatron-side failures, round trips); `interop-harness repro TOKEN` replays it and `pin TOKEN` keeps it.
//
//   ih2:<check>[:<option>=<value>]...:crc=<8 hex digits>     e.g.
//   ih2:property/gtp_pieces_tile_chunks:mutant=gtp_offset_no_tp_term:rc=Bx0:target=reference:crc=37dec2db
//
// <check> is "property/<name>" or "gate/<group>/<name>": a name, never a position, so adding a
// check changes no other token. Values are percent-encoded outside [A-Za-z0-9._/+-], so a token
// is one shell word. Options are kept sorted, so one case has one token. crc= is the CRC-32 (zlib's)
// of the text before ":crc=", in lowercase hex: a token pasted through a chat client or an email
// with one character changed, dropped or cut off is refused as damaged (CRC-32 catches every
// single-character substitution), never replayed as another case. Only the canonical text of a
// case passes (the text to_string prints), and trailing whitespace or a CR is ignored.
//
// A Megatron target is named by version and revision (megatron-version=, megatron-revision=);
// megatron-path= is only a hint where the checkout was (`repro --megatron-path DIR` overrides it).
//
// ih1 tokens (before the checksum) are read by parse_legacy_repro_token: they are trusted only
// where their text is known good (a pinned file, or the ih1 text of a case pinned in corpus/).
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "models/result.h"

namespace ih {

struct ReproToken {
  static constexpr std::string_view kPrefix = "ih2:";
  static constexpr std::string_view kLegacyPrefix = "ih1:";

  std::string check;  // stable check name
  // target, mutant, seed, cases, size, rc, spec, corpus, budget, megatron-path, megatron-version,
  // megatron-revision, candidate, fix, model-dumps
  std::map<std::string, std::string> options;

  std::optional<std::string> option(const std::string& name) const;
  std::string target() const { return option("target").value_or("reference"); }
  bool operator==(const ReproToken&) const = default;
};

/// The token's text (ih2, with its checksum).
std::string to_string(const ReproToken& token);
/// Parses an ih2 token. A wrong or missing checksum, or a text that is not the canonical one, is a
/// "damaged token" error; an unknown version, an unknown option or a malformed field is an error
/// naming it. An ih1 token is refused here (it has no checksum): see parse_legacy_repro_token.
Result<ReproToken> parse_repro_token(std::string_view text);
/// True when `text` (trailing whitespace aside) is an old ih1 token.
bool is_legacy_token(std::string_view text);
/// Parses an ih1 token, which carries no checksum: the caller must know its text is good.
Result<ReproToken> parse_legacy_repro_token(std::string_view text);
/// CRC-32 (the polynomial of zlib and PNG) of `text`, as 8 lowercase hex digits.
std::string token_checksum(std::string_view text);

/// A pinned case (corpus/regressions/*.pin) or a known finding (corpus/findings/*.finding): a
/// `token: ` line and a one-line `reason: `. A file is its own record, so an ih1 token is read there.
struct PinnedCase {
  ReproToken token;
  std::string reason;
};
Result<PinnedCase> parse_pinned(std::string_view text);
std::string format_pinned(const PinnedCase& pinned);

/// "gate/" + slug(group) + "/" + name: the stable name of a gate check.
std::string gate_check_name(std::string_view group, std::string_view name);

}  // namespace ih
