// A small command-line parser: each subcommand declares its flags once (name, value or switch,
// help), unknown flags are usage errors, and --help prints the table.
#pragma once

#include <array>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
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
/// report_error with the exit code that the error's kind implies, the outcome's (seam/outcome.h): a timeout 4,
/// a harness error 3, unsupported (the target cannot do it here: the one question NOT RUN) 5, else bad input 2.
int report_error(const Error& error);

/// What a command line gave besides its typed fields: which flags, and the positional words.
struct GivenFlags {
  std::set<std::string> given;
  std::vector<std::string> positionals;
  bool has(const std::string& flag) const { return given.count(flag) > 0; }
};

/// One word of a fixed set and its value: a name table (one per enum) parses a flag's word and
/// prints the value back.
template <class E>
struct Named {
  const char* name;
  E value;
};

/// "a", "a or b", "a, b or c": the words of a name table, for messages.
template <class E, std::size_t N>
std::string names_text(const std::array<Named<E>, N>& table) {
  std::string out;
  for (std::size_t i = 0; i < N; ++i) out += (i == 0 ? "" : i + 1 == N ? " or " : ", ") + std::string(table[i].name);
  return out;
}

/// The value a word names; nullopt for a word the table lacks.
template <class E, std::size_t N>
std::optional<E> value_named(const std::array<Named<E>, N>& table, std::string_view word) {
  for (const Named<E>& n : table)
    if (word == n.name) return n.value;
  return std::nullopt;
}

/// The word that names `value` (every value of the enum has one).
template <class E, std::size_t N>
std::string name_of(const std::array<Named<E>, N>& table, E value) {
  for (const Named<E>& n : table)
    if (value == n.value) return n.name;
  return "?";
}

/// A flag whose value is one word of a name table, stored as the enum it names (see one_of).
template <class O>
struct OneOf {
  std::string words;                                // "a or b", for the message
  std::function<bool(O&, const std::string&)> set;  // false: not a word of the table
};

/// The table row's field for an enum member of O (or of a base of O) named by `table`.
template <class O, class C, class E, std::size_t N>
OneOf<O> one_of(E C::*field, const std::array<Named<E>, N>& table) {
  static_assert(std::is_base_of_v<C, O>);
  return {names_text(table), [field, table](O& options, const std::string& word) {
            const std::optional<E> value = value_named(table, word);
            if (value) options.*field = *value;
            return value.has_value();
          }};
}

/// One row of a command's flag table, bound to a field of its typed options O (the shape of
/// libFuzzer's flag table): a switch (bool), a text (optional string, or a string whose default is
/// the field's initial value), an integer in [min, max] whose default is the field's initial value,
/// or one word of a name table (one_of). A required flag has no default: a command line without it
/// is refused.
template <class O>
struct Flag {
  std::string name;  // without leading dashes
  std::variant<bool O::*, std::optional<std::string> O::*, std::string O::*, std::int64_t O::*, OneOf<O>> field;
  std::string help;
  std::int64_t min = 0, max = 0;  // integers only
  bool required = false;
};

/// How many positional words a command takes.
struct Positionals {
  std::size_t min = 0, max = 0;
};

/// The shared opening (open_command) for a command whose flags are one table: parses argv, then
/// fills O from it, every integer checked against its range and every word against its name
/// table. nullopt with `exit_code` set (0 for --help, 2 for bad input, the message printed) when
/// the command must return now.
template <class O>
std::optional<O> open_command(const std::vector<std::string>& argv, const std::string& synopsis,
                              const std::vector<Flag<O>>& table, int& exit_code, Positionals positionals = {}) {
  static_assert(std::is_base_of_v<GivenFlags, O>);
  CommandSpec spec{synopsis, {}, positionals.min, positionals.max};
  for (const Flag<O>& f : table) spec.flags.push_back({f.name, !std::holds_alternative<bool O::*>(f.field), f.help});
  const auto args = open_command(argv, spec, exit_code);
  if (!args) return std::nullopt;
  O options;
  options.positionals = args->positionals;
  const auto refuse = [&](const std::string& message) {
    exit_code = report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
    return std::nullopt;
  };
  for (const Flag<O>& f : table) {
    if (!args->has(f.name)) {
      if (f.required) return refuse("--" + f.name + " is required (see --help)");
      continue;
    }
    options.given.insert(f.name);
    if (const auto* on = std::get_if<bool O::*>(&f.field)) options.** on = true;
    if (const auto* text = std::get_if<std::optional<std::string> O::*>(&f.field))
      options.** text = args->value(f.name);
    if (const auto* text = std::get_if<std::string O::*>(&f.field)) options.** text = *args->value(f.name);
    if (const auto* number = std::get_if<std::int64_t O::*>(&f.field)) {
      const auto value = args->int_value(f.name, options.**number, f.min, f.max);
      if (!value.ok()) {
        exit_code = report_error(value.error(), kExitBadInput);
        return std::nullopt;
      }
      options.** number = *value;
    }
    if (const auto* word = std::get_if<OneOf<O>>(&f.field); word && !word->set(options, *args->value(f.name)))
      return refuse("--" + f.name + " must be " + word->words + ", got '" + *args->value(f.name) + "'");
  }
  return options;
}

}  // namespace ih::cli
