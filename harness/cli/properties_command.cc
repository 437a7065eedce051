// `interop-harness properties`, `pin` and the replay of property cases (`repro ih2:property/...`).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/output_places.h"
#include "harness/install/data_dir.h"
#include "harness/targets/targets.h"
#include "mutants/mutant_implementation.h"
#include "properties/suite.h"

namespace ih::cli {
namespace {

// RapidCheck's size drives generator sizes; beyond this the generators only repeat their largest cases.
constexpr std::int64_t kMaxSize = 10'000;
constexpr std::int64_t kMaxCases = 10'000'000;

const char* const kPropertiesSynopsis =
    "interop-harness properties [--list] [--seed S] [--cases N] [--max-size N] [--only TEXT] [--json] [--mutant NAME]";

/// The command's options, filled from kPropertiesFlags (defaults here).
struct PropertiesOptions : GivenFlags {
  bool list = false, list_mutants = false, json = false;
  std::int64_t seed = 0, cases = 100, max_size = 100;
  std::optional<std::string> mutant, only;
};

using P = PropertiesOptions;
const std::vector<Flag<P>> kPropertiesFlags = {
    {"list", &P::list, "list every property with its one-line description"},
    {"seed", &P::seed, "RapidCheck seed (default: RC_PARAMS's seed, else 0: fixed, so runs repeat)", 0,
     std::numeric_limits<std::int64_t>::max()},
    {"cases", &P::cases,
     "cases per property, 1.." + std::to_string(kMaxCases) + " (default: RC_PARAMS's max_success, else 100)", 1,
     kMaxCases},
    {"max-size", &P::max_size,
     "RapidCheck's maximum size, 0.." + std::to_string(kMaxSize) + " (default: RC_PARAMS's max_size, else 100)", 0,
     kMaxSize},
    {"mutant", &P::mutant, "run against a planted mutant instead of the reference (see --list-mutants)"},
    {"list-mutants", &P::list_mutants, "list the planted mutants with their bug classes"},
    {"only", &P::only, "run only properties whose name contains this text"},
    {"json", &P::json, "machine-readable output"}};

/// Rows of cells, each column but the last as wide as its widest cell and two spaces.
std::string aligned(const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::size_t> widths;
  for (const auto& row : rows)
    for (std::size_t i = 0; i + 1 < row.size(); ++i) {
      widths.resize(std::max(widths.size(), i + 1));
      widths[i] = std::max(widths[i], row[i].size() + 2);
    }
  std::ostringstream out;
  for (const auto& row : rows) {
    for (std::size_t i = 0; i + 1 < row.size(); ++i)
      out << std::left << std::setw(static_cast<int>(widths[i])) << row[i];
    out << (row.empty() ? "" : row.back()) << "\n";
  }
  return out.str();
}

/// `--list` / `--list-mutants`: aligned columns, or with --json {"properties": [{"name", "group",
/// "description"}]} / {"mutants": [{"name", "bug_class", "description"}]}.
int list(bool mutants, bool as_json) {
  json::Json listed = json::Json::array();
  std::vector<std::vector<std::string>> rows;
  if (mutants) {
    for (const MutantInfo& m : mutant_catalogue()) {
      listed.push_back({{"name", m.name}, {"bug_class", m.bug_class}, {"description", m.description}});
      rows.push_back({m.name, m.bug_class, m.description});
    }
  } else {
    for (const props::Property& p : props::all_properties()) {
      listed.push_back({{"name", p.name}, {"group", p.group}, {"description", p.description}});
      rows.push_back({p.name, p.group, p.description});
    }
  }
  if (as_json)
    std::cout << json::dump(json::Json{{mutants ? "mutants" : "properties", listed}}) << "\n";
  else
    std::cout << aligned(rows);
  return kExitOk;
}

void print_table(const std::vector<props::PropertyRun>& runs) {
  std::cout << "\n"
            << std::left << std::setw(32) << "property" << std::right << std::setw(7) << "cases" << std::setw(15)
            << "result" << std::setw(10) << "seconds" << std::setw(11) << "cases/s"
            << "\n";
  for (const props::PropertyRun& o : runs)
    std::cout << std::left << std::setw(32) << o.name << std::right << std::setw(7) << o.cases << std::setw(15)
              << to_string(o.outcome) << std::setw(10) << std::fixed << std::setprecision(3) << o.seconds
              << std::setw(11) << std::setprecision(0) << (o.seconds > 0 ? o.cases / o.seconds : 0) << "\n";
}

}  // namespace

/// The seed and budget of a run: each flag given, else RC_PARAMS's seed, max_success and max_size (RapidCheck's
/// defaults where it names none), checked against the flags' limits.
Result<props::RunParams> run_params(const PropertiesOptions& options) {
  IH_TRY_ASSIGN(rc, props::rc_params());
  const auto chosen = [&](const char* flag, std::int64_t given, std::int64_t from_rc, const char* rc_key,
                          std::int64_t low, std::int64_t high) -> Result<std::int64_t> {
    if (options.has(flag)) return given;
    if (from_rc < low || from_rc > high)
      return make_error(ErrorKind::invalid_argument, std::string("RC_PARAMS ") + rc_key + "=" +
                                                         std::to_string(from_rc) + " is outside [" +
                                                         std::to_string(low) + ", " + std::to_string(high) + "]");
    return from_rc;
  };
  IH_TRY_ASSIGN(cases, chosen("cases", options.cases, rc.testParams.maxSuccess, "max_success", 1, kMaxCases));
  IH_TRY_ASSIGN(size, chosen("max-size", options.max_size, rc.testParams.maxSize, "max_size", 0, kMaxSize));
  const std::uint64_t seed = options.has("seed") ? static_cast<std::uint64_t>(options.seed) : rc.testParams.seed;
  return props::RunParams{seed, static_cast<int>(cases), static_cast<int>(size), {}};
}

int properties_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kPropertiesSynopsis, kPropertiesFlags, exit_code);
  if (!args) return exit_code;
  if (args->list || args->list_mutants) return list(args->list_mutants, args->json);
  const TargetSpec spec{TargetKind::reference, args->mutant, std::nullopt};
  auto impl = make_target(spec);
  if (!impl.ok()) return report_error(impl.error(), kExitBadInput);
  const std::string only = args->only.value_or("");
  std::vector<const props::Property*> selected;
  for (const props::Property& p : props::all_properties())
    if (p.name.find(only) != std::string::npos) selected.push_back(&p);
  if (selected.empty())
    return report_error(
        make_error(ErrorKind::invalid_argument, "--only '" + only + "' matches no property (see --list)"),
        kExitBadInput);

  const auto chosen = run_params(*args);
  if (!chosen.ok()) return report_error(chosen.error(), kExitBadInput);
  const props::RunParams& params = *chosen;
  std::ostream& progress = args->json ? std::cerr : std::cout;
  // The seed the cases are drawn from: a REPRO token carries it, and the same line repeats the run.
  progress << "INFO: seed " << params.seed << ", " << params.cases << " cases per property, max size "
           << params.max_size << (std::getenv("RC_PARAMS") ? " (RC_PARAMS where no flag is given)" : "") << "\n";
  json::Json report{{"properties", json::Json::array()}};
  std::vector<props::PropertyRun> runs;
  std::vector<Outcome> outcomes;
  for (const props::Property* p : selected) {
    progress << "INFO: [" << runs.size() + 1 << "/" << selected.size() << "] " << p->name << " ... " << std::flush;
    const props::PropertyRun o = p->run(**impl, params);
    json::Json entry{{"name", p->name},
                     {"cases", o.cases},
                     {"ok", o.outcome == Outcome::passed},
                     {"outcome", std::string(to_string(o.outcome))}};
    progress << to_string(o.outcome) << " (" << o.cases << " cases)\n";
    if (o.outcome == Outcome::failed) {
      ReproToken token{props::property_check_name(p->name), {}};
      add_target_options(token, spec);
      props::add_case_options(token, params, o);
      entry["token"] = to_string(token);
      progress << "      " << o.description << "\n      minimal case (" << o.shrink_steps
               << " shrink steps): " << o.counterexample << "\nREPRO: interop-harness repro " << to_string(token)
               << "\n";
    } else if (o.outcome != Outcome::passed) {
      progress << "      " << o.description << "\n";
    }
    report["properties"].push_back(entry);
    runs.push_back(o);
    outcomes.push_back(o.outcome);
  }
  exit_code = exit_code_of(outcomes);
  report["ok"] = exit_code == kExitOk;
  if (args->json)
    std::cout << json::dump(report) << "\n";
  else
    print_table(runs), std::cout << (exit_code == kExitOk ? "properties: PASSED\n" : "properties: FAILED\n");
  return exit_code;
}

Result<ReproToken> token_argument(std::string_view text) {
  if (!is_legacy_token(text)) return parse_repro_token(text);
  auto token = parse_legacy_repro_token(text);
  const std::filesystem::path corpus = install::corpus_dir();
  if (token.ok())
    for (const auto& [folder, extension] : {std::pair{"regressions", ".pin"}, std::pair{"findings", ".finding"}}) {
      std::error_code error;
      for (const auto& entry : std::filesystem::directory_iterator(corpus / folder, error)) {
        if (entry.path().extension() != extension) continue;
        std::ifstream in(entry.path());
        std::stringstream file;
        file << in.rdbuf();
        const auto pinned = parse_pinned(file.str());
        if (pinned.ok() && pinned->token == *token) return token;
      }
    }
  return make_error(ErrorKind::invalid_argument,
                    "damaged token '" + std::string(text.substr(0, 200)) +
                        "': an ih1 token carries no checksum, so this harness replays one only where it is a case "
                        "pinned in " +
                        corpus.string() +
                        " (this one is not: changed on its way, or never pinned); re-run the "
                        "check for its ih2 token");
}

int property_repro_command(const ReproToken& token, const std::optional<std::string>& megatron_path) {
  auto property = props::property_of(token);
  if (!property.ok()) return report_error(property.error(), kExitBadInput);
  if (const Status valid = props::check_case(**property, token); !valid.ok())
    return report_error(valid.error().with_context("damaged token (or one from another version of the harness)"),
                        kExitBadInput);
  auto spec = replay_target_of(token, megatron_path, std::cout);
  if (!spec.ok()) return report_error(spec.error(), kExitBadInput);
  auto impl = make_target(*spec);
  if (!impl.ok()) return report_error(impl.error());
  const props::Replay r = props::replay(**impl, **property, token);
  if (r.no_such_case)
    return report_error(make_error(ErrorKind::invalid_argument,
                                   "damaged token (or one from another version of the harness): its rc= shrink path "
                                   "leads to no case of property " +
                                       (*property)->name),
                        kExitBadInput);
  std::cout << "property: " << (*property)->name << " (" << (*property)->description << ")\n"
            << "target:   " << describe_target(**impl, *spec) << "\n";
  warn_if_other_megatron(token, **impl, std::cout);
  std::cout << "case:     " << r.printed_case << "\n";
  switch (r.outcome) {
    case Outcome::passed: std::cout << "result:   holds\n"; break;
    case Outcome::failed: std::cout << "result:   FAILED\n          " << r.verdict << "\n"; break;
    default: std::cerr << "ERROR: " << to_string(r.outcome) << ": cannot reproduce: " << r.verdict << "\n";
  }
  return exit_code_of({r.outcome});
}

namespace {

/// A pinned case holds on the clean target and, when pinned from a mutant, still fails on that mutant.
int replay_pinned(const std::string& file) {
  std::ifstream in(file);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return report_error(make_error(ErrorKind::invalid_argument, "cannot read " + file), kExitBadInput);
  auto pinned = parse_pinned(text.str());
  if (!pinned.ok()) return report_error(pinned.error().with_context(file), kExitBadInput);
  std::cout << "pinned: " << pinned->reason << "\n";
  ReproToken clean = pinned->token;
  clean.options.erase("mutant");
  const int on_clean = replay_token(clean);
  if (on_clean != kExitOk || !pinned->token.option("mutant")) return on_clean;
  const int on_mutant = replay_token(pinned->token);
  if (on_mutant == kExitCheckFailed) return kExitOk;
  std::cerr << "ERROR: check_failed: the pinned case no longer fails on mutant " << *pinned->token.option("mutant")
            << " (it would catch nothing)\n";
  return kExitCheckFailed;
}

std::string file_stem(const std::string& check) {
  std::string out;
  for (char c : check.substr(check.find('/') + 1)) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out.substr(0, 60);
}

/// Why `name` is not a plain file name for corpus/regressions/ (`--name ../../x` wrote outside it), or "".
std::string pin_name_problem(const std::string& name) {
  if (name.empty()) return "an empty name";
  if (name.find('/') != std::string::npos || name.find("..") != std::string::npos)
    return "a plain file name is expected (no '/', no '..')";
  if (name.front() == '.') return "a name must not start with '.'";
  if (name.size() > 200) return "longer than 200 characters";
  for (const char c : name)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return "control characters are not allowed";
  return "";
}

const char* const kPinSynopsis = "interop-harness pin TOKEN --reason \"...\"   |   interop-harness pin --replay FILE";

struct PinOptions : GivenFlags {
  std::optional<std::string> reason, replay, name, corpus;
};

const std::vector<Flag<PinOptions>> kPinFlags = {
    {"reason", &PinOptions::reason, "one line: why this case is pinned"},
    {"replay", &PinOptions::replay, "replay a pinned file instead (ctest does this)"},
    {"name", &PinOptions::name, "plain file name, without .pin (default: the check's name and a number)"},
    {"corpus", &PinOptions::corpus, "corpus folder (default: the source tree's corpus/)"}};

}  // namespace

int pin_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kPinSynopsis, kPinFlags, exit_code, {0, 1});
  if (!args) return exit_code;
  if (args->replay) return replay_pinned(*args->replay);
  if (args->positionals.size() != 1 || !args->reason || args->reason->find('\n') != std::string::npos)
    return report_error(make_error(ErrorKind::invalid_argument, "pin needs a TOKEN and a one-line --reason"),
                        kExitBadInput);
  auto token = token_argument(args->positionals[0]);
  if (!token.ok()) return report_error(token.error(), kExitBadInput);
  if (token->check.rfind("property/", 0) == 0) {
    auto property = props::property_of(*token);
    if (!property.ok()) return report_error(property.error(), kExitBadInput);
  }
  const std::filesystem::path dir =
      std::filesystem::path(args->corpus.value_or(install::corpus_dir().string())) / "regressions";
  if (const Status ready = check_output_folder("corpus", dir.string()); !ready.ok())
    return report_error(ready.error(), kExitBadInput);
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const auto existing = parse_pinned(text.str());
    if (existing.ok() && existing->token == *token)
      return report_error(make_error(ErrorKind::invalid_argument, "already pinned as " + entry.path().string()),
                          kExitBadInput);
  }
  std::string name = args->name.value_or("");
  if (const auto problem = args->name ? pin_name_problem(name) : ""; !problem.empty())
    return report_error(make_error(ErrorKind::invalid_argument, "--name '" + name + "': " + problem), kExitBadInput);
  for (int i = 1; name.empty() || std::filesystem::exists(dir / (name + ".pin")); ++i)
    name = file_stem(token->check) + "_" + std::to_string(i);
  const std::filesystem::path path = dir / (name + ".pin");
  std::ofstream out(path);
  out << format_pinned({*token, *args->reason});
  out.close();
  if (!out)
    return report_error(make_error(seam_kind::harness_error, "cannot write " + path.string()), kExitHarnessError);
  std::cout << "pinned " << path.string() << "\n";
  return kExitOk;
}

}  // namespace ih::cli
