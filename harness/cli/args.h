// A small command-line parser: each subcommand declares its flags once (name, value or switch,
// help), unknown flags are usage errors, and --help prints the table.
#pragma once

#include <map>
#include <optional>
#include <string>
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

}  // namespace ih::cli
