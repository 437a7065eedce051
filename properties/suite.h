// The property suite: every property by group, repro tokens, and the pinned-case corpus format.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "properties/cases.h"
#include "properties/generators.h"
#include "properties/property.h"

namespace ih::props {

/// Layer maps, error parity, pipeline segments, FSDP keys (props_pattern.cc).
std::vector<Property> pattern_properties();
/// GPT->Hybrid retargeting over all ranks of generated layouts (props_retarget.cc).
std::vector<Property> retarget_properties();
/// The GTP shard split: spec 4.7 invariants and bug classes 6.1-6.10 (props_gtp.cc).
std::vector<Property> gtp_properties();
/// Saves and loads: cross-layout GPT->Hybrid, cross-GTP, load orderings (props_load.cc).
std::vector<Property> load_properties();
/// All of them, in a fixed order.
const std::vector<Property>& all_properties();
/// The property called `name`, or nullptr.
const Property* find_property(const std::string& name);

/// A replayable case: `prop:<property>:<target>:rc=<reproduce>` or `prop:<property>:<target>:spec=<fixture>`,
/// target "reference" or "mutant.<name>".
struct Token {
  std::string property;
  std::string target = "reference";
  std::string kind;     // "rc" or "spec"
  std::string payload;  // RapidCheck's reproduce string, or a fixture name
};

/// The token text.
std::string to_string(const Token& token);
/// Parses a token; names what is wrong.
Result<Token> parse_token(const std::string& text);
/// True when `text` looks like a property token (starts with "prop:").
bool is_property_token(const std::string& text);

/// The implementation a token's target names (the reference or a mutant).
Result<std::unique_ptr<Implementation>> make_target(const std::string& target);

/// A replay: the printed case, the verdict, and whether RapidCheck could regenerate it.
struct Replay {
  std::string printed_case;
  Verdict verdict;
  bool reproduced = true;  // false: the token no longer regenerates its case (an error, not a pass)
  std::string error;
};

/// Replays a token against `impl`.
Replay replay(Implementation& impl, const Token& token);

/// A pinned regression file: `token: ...` and `reason: ...` lines.
struct PinnedCase {
  Token token;
  std::string reason;
};
/// Parses a pinned-case file's text.
Result<PinnedCase> parse_pinned(const std::string& text);
/// The file text of a pinned case.
std::string format_pinned(const PinnedCase& pinned);

}  // namespace ih::props
