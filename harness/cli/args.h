// A small command-line parser: each subcommand declares its flags once (name, value or switch,
// help), unknown flags are usage errors, and --help prints the table.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "models/result.h"
#include "seam/outcome.h"

namespace ih::cli {

// Exit codes: one table for every command (seam/outcome.h, docs/cli.md).
using ::ih::ExitCode;
using ::ih::kExitBadInput;
using ::ih::kExitCheckFailed;
using ::ih::kExitHarnessError;
using ::ih::kExitNothingRan;
using ::ih::kExitOk;
using ::ih::kExitTimeout;

struct FlagSpec {
  std::string name;  // without leading dashes
  bool takes_value = false;
  std::string help;
};

struct ParsedArgs {
  std::map<std::string, std::string> values;
  std::vector<std::string> switches;
  std::vector<std::string> positionals;

  bool has(const std::string& flag) const;
  std::optional<std::string> value(const std::string& flag) const;
  /// The flag's value as a 64-bit integer; a missing flag gives `fallback`, a bad one an error naming it.
  Result<std::int64_t> int_value(const std::string& flag, std::int64_t fallback) const;
  /// The same, refused outside [minimum, maximum] with a message naming the flag and the limits.
  Result<std::int64_t> int_value(const std::string& flag, std::int64_t fallback, std::int64_t minimum,
                                 std::int64_t maximum) const;
};

/// Parses argv (without the subcommand words); "-" alone is a positional; after "--" every word is.
Result<ParsedArgs> parse_args(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags);
/// "usage: ..." plus one line per flag.
std::string usage(const std::string& synopsis, const std::vector<FlagSpec>& flags);

/// A subcommand's interface: its synopsis, flags and how many positionals it takes.
struct CommandSpec {
  std::string synopsis;
  std::vector<FlagSpec> flags;
  std::size_t min_positionals = 0;
  std::size_t max_positionals = 0;
};

/// The opening every subcommand shares: parses argv against `spec` (a --help flag is added), prints
/// the usage on stdout for --help, or `ERROR: invalid_argument: ...` and the usage on stderr. Returns
/// the parsed flags, or nullopt with `exit_code` set to what the command must return now.
std::optional<ParsedArgs> open_command(const std::vector<std::string>& argv, const CommandSpec& spec, int& exit_code);
/// Prints `ERROR: <kind>: <message>` on stderr and returns `code`.
int report_error(const Error& error, int code);
/// report_error with the exit code that the error's kind implies (bad input, timeout, harness error).
int report_error(const Error& error);

/// Which flags a command line gave; a command's typed options derive from it.
struct GivenFlags {
  std::set<std::string> given;
  bool has(const std::string& flag) const { return given.count(flag) > 0; }
};

/// One row of a command's flag table, bound to a field of its typed options O (the shape of
/// libFuzzer's flag table): a switch (bool), a text (optional string), or an integer in [min, max]
/// whose default is the field's initial value.
template <class O>
struct Flag {
  std::string name;  // without leading dashes
  std::variant<bool O::*, std::optional<std::string> O::*, std::int64_t O::*> field;
  std::string help;
  std::int64_t min = 0, max = 0;  // integers only
};

/// The shared opening (open_command) for a command whose flags are one table: parses argv, then
/// fills O from it, every integer checked against its range. nullopt with `exit_code` set (0 for
/// --help, 2 for bad input, the message printed) when the command must return now.
template <class O>
std::optional<O> open_command(const std::vector<std::string>& argv, const std::string& synopsis,
                              const std::vector<Flag<O>>& table, int& exit_code) {
  static_assert(std::is_base_of_v<GivenFlags, O>);
  CommandSpec spec{synopsis, {}};
  for (const Flag<O>& f : table)
    spec.flags.push_back({f.name, !std::holds_alternative<bool O::*>(f.field), f.help});
  const auto args = open_command(argv, spec, exit_code);
  if (!args) return std::nullopt;
  O options;
  for (const Flag<O>& f : table) {
    if (!args->has(f.name)) continue;
    options.given.insert(f.name);
    if (const auto* on = std::get_if<bool O::*>(&f.field)) options.**on = true;
    if (const auto* text = std::get_if<std::optional<std::string> O::*>(&f.field)) options.**text = args->value(f.name);
    if (const auto* number = std::get_if<std::int64_t O::*>(&f.field)) {
      const auto value = args->int_value(f.name, options.**number, f.min, f.max);
      if (!value.ok()) {
        exit_code = report_error(value.error(), kExitBadInput);
        return std::nullopt;
      }
      options.**number = *value;
    }
  }
  return options;
}

}  // namespace ih::cli
