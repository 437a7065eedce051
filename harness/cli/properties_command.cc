// `interop-harness properties`, `pin` and the replay of property tokens (`repro prop:...`).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "codec/json_codec.h"
#include "mutants/mutant_implementation.h"
#include "properties/suite.h"

#ifndef IH_DEFAULT_CORPUS_DIR
#define IH_DEFAULT_CORPUS_DIR "corpus"
#endif

namespace ih::cli {
namespace {

const std::vector<FlagSpec> kFlags = {
    {"list", false, "list every property with its one-line description"},
    {"seed", true, "RapidCheck seed (default 0: fixed, so runs repeat)"},
    {"cases", true, "cases per property (default 100)"},
    {"max-size", true, "RapidCheck's maximum size (default 100)"},
    {"mutant", true, "run against a planted mutant instead of the reference (see --list-mutants)"},
    {"list-mutants", false, "list the planted mutants"},
    {"only", true, "run only properties whose name contains this text"},
    {"json", false, "machine-readable output"},
    {"help", false, "show this help"}};

int fail_usage(const Result<ParsedArgs>& args, const std::string& synopsis, const std::vector<FlagSpec>& flags) {
  std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n") << usage(synopsis, flags);
  return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
}

int list(bool mutants) {
  if (mutants) {
    for (const MutantInfo& m : mutant_catalogue()) std::cout << std::left << std::setw(40) << m.name << m.bug_class << "  " << m.description << "\n";
    return kExitOk;
  }
  for (const props::Property& p : props::all_properties())
    std::cout << std::left << std::setw(32) << p.name << std::setw(10) << p.group << p.description << "\n";
  return kExitOk;
}

std::string target_of(const ParsedArgs& args) {
  const auto mutant = args.value("mutant");
  return mutant ? "mutant." + *mutant : "reference";
}

void print_table(const std::vector<props::Outcome>& outcomes) {
  std::cout << "\n" << std::left << std::setw(32) << "property" << std::right << std::setw(7) << "cases" << std::setw(9)
            << "result" << std::setw(10) << "seconds" << std::setw(11) << "cases/s" << "\n";
  for (const props::Outcome& o : outcomes)
    std::cout << std::left << std::setw(32) << o.name << std::right << std::setw(7) << o.cases << std::setw(9)
              << (o.ok ? "passed" : o.error ? "ERROR" : "FAILED") << std::setw(10) << std::fixed << std::setprecision(3)
              << o.seconds << std::setw(11) << std::setprecision(0) << (o.seconds > 0 ? o.cases / o.seconds : 0) << "\n";
}

}  // namespace

int properties_command(const std::vector<std::string>& argv) {
  auto args = parse_args(argv, kFlags);
  const std::string synopsis = "interop-harness properties [--list] [--seed S] [--cases N] [--json] [--mutant NAME]";
  if (!args.ok() || args->has("help") || !args->positionals.empty()) return fail_usage(args, synopsis, kFlags);
  if (args->has("list") || args->has("list-mutants")) return list(args->has("list-mutants"));
  auto seed = args->int_value("seed", 0), cases = args->int_value("cases", 100), size = args->int_value("max-size", 100);
  for (const auto* r : {&seed, &cases, &size})
    if (!r->ok()) return fail_usage(Result<ParsedArgs>(r->error()), synopsis, kFlags);
  const std::string target = target_of(*args);
  auto impl = props::make_target(target);
  if (!impl.ok()) return std::cerr << "ERROR: " << impl.error().message << "\n", kExitBadInput;
  std::ostream& progress = args->has("json") ? std::cerr : std::cout;
  props::load_configuration();
  const std::string only = args->value("only").value_or("");
  json::Json report{{"properties", json::Json::array()}};
  std::vector<props::Outcome> outcomes;
  bool all_ok = true;
  for (const props::Property& p : props::all_properties()) {
    if (p.name.find(only) == std::string::npos) continue;
    progress << "INFO: [" << outcomes.size() + 1 << "] " << p.name << " ... " << std::flush;
    const props::Outcome o = p.run(**impl, {static_cast<std::uint64_t>(*seed), static_cast<int>(*cases), static_cast<int>(*size), {}});
    json::Json entry{{"name", p.name}, {"cases", o.cases}, {"ok", o.ok}};
    progress << (o.ok ? "ok" : o.error ? "ERROR" : "FAILED") << " (" << o.cases << " cases)\n";
    if (!o.ok && !o.error) {
      const std::string token = props::to_string(props::Token{p.name, target, "rc", o.reproduce});
      entry["token"] = token;
      progress << "      " << o.description << "\n      minimal case (" << o.shrink_steps << " shrink steps): " << o.counterexample << "\n"
               << "REPRO: interop-harness repro " << token << "\n";
    } else if (o.error) {
      progress << "      " << o.description << "\n";
    }
    all_ok = all_ok && o.ok;
    report["properties"].push_back(entry);
    outcomes.push_back(o);
  }
  report["ok"] = all_ok;
  if (args->has("json")) std::cout << json::dump(report) << "\n";
  else print_table(outcomes), std::cout << (all_ok ? "properties: PASSED\n" : "properties: FAILED\n");
  return all_ok ? kExitOk : kExitCheckFailed;
}

int property_repro_command(const std::string& text) {
  auto token = props::parse_token(text);
  if (!token.ok()) return std::cerr << "ERROR: " << token.error().message << "\n", kExitBadInput;
  auto impl = props::make_target(token->target);
  if (!impl.ok()) return std::cerr << "ERROR: " << impl.error().message << "\n", kExitBadInput;
  const props::Replay r = props::replay(**impl, *token);
  std::cout << "property: " << token->property << " (" << props::find_property(token->property)->description << ")\n"
            << "target:   " << (*impl)->name() << "\ncase:     " << r.printed_case << "\n";
  if (!r.reproduced) return std::cerr << "ERROR: cannot reproduce: " << r.error << "\n", kExitHarnessError;
  std::cout << (r.verdict.empty() ? "result:   holds\n" : "result:   FAILED\n          " + r.verdict + "\n");
  return r.verdict.empty() ? kExitOk : kExitCheckFailed;
}

/// A pinned case holds on the reference and, when pinned from a mutant, still fails on that mutant.
int replay_pinned(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  auto pinned = props::parse_pinned(text.str());
  if (!in || !pinned.ok()) return std::cerr << "ERROR: " << (in ? pinned.error().message : "cannot read " + file) << "\n", kExitBadInput;
  std::cout << "pinned: " << pinned->reason << "\n";
  props::Token on_reference = pinned->token;
  on_reference.target = "reference";
  const int reference = property_repro_command(props::to_string(on_reference));
  if (reference != kExitOk || pinned->token.target == "reference") return reference;
  const int mutant = property_repro_command(props::to_string(pinned->token));
  if (mutant == kExitCheckFailed) return kExitOk;
  std::cerr << "ERROR: the pinned case no longer fails on " << pinned->token.target << " (it would catch nothing)\n";
  return kExitCheckFailed;
}

int pin_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {{"reason", true, "one line: why this case is pinned"},
                                       {"replay", true, "replay a pinned file instead (ctest does this)"},
                                       {"name", true, "file name (default: the property and a number)"},
                                       {"corpus", true, "corpus folder (default: the source tree's corpus/)"},
                                       {"help", false, "show this help"}};
  auto args = parse_args(argv, flags);
  if (args.ok() && args->value("replay")) return replay_pinned(*args->value("replay"));
  if (!args.ok() || args->has("help") || args->positionals.size() != 1 || !args->value("reason"))
    return fail_usage(args, "interop-harness pin prop:<property>:<target>:<payload> --reason \"...\"", flags);
  auto token = props::parse_token(args->positionals[0]);
  if (!token.ok()) return std::cerr << "ERROR: " << token.error().message << "\n", kExitBadInput;
  const std::filesystem::path dir = std::filesystem::path(args->value("corpus").value_or(IH_DEFAULT_CORPUS_DIR)) / "regressions";
  std::filesystem::create_directories(dir);
  std::string name = args->value("name").value_or("");
  for (int i = 1; name.empty() || std::filesystem::exists(dir / (name + ".pin")); ++i) name = token->property + "_" + std::to_string(i);
  const std::filesystem::path path = dir / (name + ".pin");
  std::ofstream(path) << props::format_pinned({*token, *args->value("reason")});
  std::cout << "pinned " << path.string() << "\n";
  return kExitOk;
}

}  // namespace ih::cli
