// A small command-line parser: each subcommand declares its flags once (name, value or switch,
// help), unknown flags are usage errors, and --help prints the table.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "models/result.h"

namespace ih::cli {

/// Process exit codes; a property failure, a harness error and a timeout are told apart.
enum ExitCode : int { kExitOk = 0, kExitCheckFailed = 1, kExitBadInput = 2, kExitHarnessError = 3, kExitTimeout = 4 };

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
};

/// Parses argv (without the subcommand words); "-" alone is a positional.
Result<ParsedArgs> parse_args(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags);
/// "usage: ..." plus one line per flag.
std::string usage(const std::string& synopsis, const std::vector<FlagSpec>& flags);

}  // namespace ih::cli
