#include "harness/cli/args.h"

#include <algorithm>
#include <iostream>

#include "models/text.h"

namespace ih::cli {

bool ParsedArgs::has(const std::string& flag) const {
  return values.count(flag) > 0 || std::find(switches.begin(), switches.end(), flag) != switches.end();
}

std::optional<std::string> ParsedArgs::value(const std::string& flag) const {
  const auto it = values.find(flag);
  if (it == values.end()) return std::nullopt;
  return it->second;
}

Result<std::int64_t> ParsedArgs::int_value(const std::string& flag, std::int64_t fallback) const {
  const auto text = value(flag);
  if (!text) return fallback;
  auto parsed = parse_int(*text);
  if (!parsed.ok()) return make_error(parsed.error().kind, "--" + flag + ": " + parsed.error().message);
  return parsed;
}

Result<std::int64_t> ParsedArgs::int_value(const std::string& flag, std::int64_t fallback, std::int64_t minimum,
                                           std::int64_t maximum) const {
  IH_TRY_ASSIGN(number, int_value(flag, fallback));
  if (number < minimum || number > maximum)
    return make_error(ErrorKind::invalid_argument, "--" + flag + " " + std::to_string(number) + " is outside [" +
                                                       std::to_string(minimum) + ", " + std::to_string(maximum) + "]");
  return number;
}

Result<ParsedArgs> parse_args(const std::vector<std::string>& argv, const std::vector<FlagSpec>& flags) {
  ParsedArgs out;
  bool options_ended = false;
  for (std::size_t i = 0; i < argv.size(); ++i) {
    // -h is the one short flag: every command spells --help that way too.
    const std::string& arg = !options_ended && argv[i] == "-h" ? std::string("--help") : argv[i];
    if (!options_ended && arg == "--") {
      options_ended = true;
      continue;
    }
    if (options_ended || arg.size() < 3 || arg.rfind("--", 0) != 0) {
      out.positionals.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2), inline_value;
    const bool has_inline = name.find('=') != std::string::npos;
    if (has_inline) {
      inline_value = name.substr(name.find('=') + 1);
      name = name.substr(0, name.find('='));
    }
    const auto spec = std::find_if(flags.begin(), flags.end(), [&](const FlagSpec& f) { return f.name == name; });
    if (spec == flags.end()) return make_error(ErrorKind::invalid_argument, "unknown flag --" + name);
    if (!spec->takes_value) {
      if (has_inline) return make_error(ErrorKind::invalid_argument, "flag --" + name + " takes no value");
      out.switches.push_back(name);
      continue;
    }
    // A second value would silently replace the first (`--target megatron --target reference`
    // gated the reference): every flag takes one value.
    if (out.values.count(name))
      return make_error(ErrorKind::invalid_argument,
                        "flag --" + name + " given twice (first '" + out.values[name] + "'); give it once");
    if (has_inline) {
      out.values[name] = inline_value;
    } else {
      if (i + 1 >= argv.size()) return make_error(ErrorKind::invalid_argument, "flag --" + name + " needs a value");
      out.values[name] = argv[++i];
    }
  }
  return out;
}

std::string usage(const std::string& synopsis, const std::vector<FlagSpec>& flags) {
  std::string out = "usage: " + synopsis + "\n";
  for (const FlagSpec& f : flags) {
    std::string left = "  --" + f.name + (f.takes_value ? " VALUE" : "");
    left.resize(std::max<std::size_t>(left.size() + 2, 28), ' ');
    out += left + f.help + "\n";
  }
  return out;
}

std::optional<ParsedArgs> open_command(const std::vector<std::string>& argv, const CommandSpec& spec, int& exit_code) {
  std::vector<FlagSpec> flags = spec.flags;
  if (std::none_of(flags.begin(), flags.end(), [](const FlagSpec& f) { return f.name == "help"; }))
    flags.push_back({"help", false, "show this help"});
  auto args = parse_args(argv, flags);
  if (args.ok() && args->has("help")) {
    std::cout << usage(spec.synopsis, flags);
    exit_code = kExitOk;
    return std::nullopt;
  }
  std::string problem = args.ok() ? "" : args.error().message;
  if (args.ok() && args->positionals.size() < spec.min_positionals)
    problem = "missing argument (" + std::to_string(spec.min_positionals) + " expected)";
  if (args.ok() && args->positionals.size() > spec.max_positionals)
    problem = "unexpected argument '" + args->positionals[spec.max_positionals] + "'";
  if (problem.empty()) return std::move(args).value();
  std::cerr << "ERROR: invalid_argument: " << problem << "\n" << usage(spec.synopsis, flags);
  exit_code = kExitBadInput;
  return std::nullopt;
}

int report_error(const Error& error, int code) {
  std::cerr << "ERROR: " << to_string(error.kind) << ": " << error.message << "\n";
  return code;
}

int report_error(const Error& error) {
  switch (outcome_of_error(error.kind)) {
    case Outcome::timeout: return report_error(error, kExitTimeout);
    case Outcome::harness_error: return report_error(error, kExitHarnessError);
    case Outcome::not_run: return report_error(error, kExitNothingRan);
    default: return report_error(error, kExitBadInput);
  }
}

}  // namespace ih::cli
