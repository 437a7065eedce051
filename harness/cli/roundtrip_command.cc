// `interop-harness roundtrip`: real multi-process saves and loads through Megatron's dist_checkpointing
// (docs/roundtrip.md), every loaded element checked against a provenance oracle. This file parses the flags,
// chooses the scenarios (harness/roundtrip/scenario_selection.h) and prints the report of the one round-trip
// session (harness/roundtrip/roundtrip_session.h) that runs them.
#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/output_places.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/roundtrip/roundtrip_session.h"
#include "harness/roundtrip/scenario_selection.h"
#include "harness/targets/targets.h"

namespace ih::cli {
namespace {

const char* const kSynopsis =
    "interop-harness roundtrip --target megatron [--pattern P] [--save-tp T --save-pp P --load-tp T --load-pp P] "
    "[--gated] [--optimizer] [--json]   (one scenario laid out on the command line)\n"
    "       interop-harness roundtrip (--scenario NAME | --all | --seed S) [--save-ranks A] [--load-ranks B] "
    "[--device cpu|cuda] [--mutant M] [--candidate shard-split] [--real [--save-megatron-path A "
    "--load-megatron-path B]] [--keep DIR] [--timeout S] [--json]\n"
    "       interop-harness roundtrip --list [--real] [--candidate shard-split] [--json]\n"
    "both run mpirun save and load worlds, every loaded element checked by the LibTorch verifier\n"
    "exit codes: 0 every element where it belongs, 1 a check failed, 2 bad input, 3 harness error, "
    "4 timeout, 5 Megatron's save/load cannot run here (e.g. it needs CUDA)";

/// A name table of harness/roundtrip, (value, word) rows, as the flag parser's (word, value) rows.
template <class E, std::size_t N>
constexpr std::array<Named<E>, N> flag_words(const std::array<std::pair<E, const char*>, N>& table) {
  std::array<Named<E>, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = {table[i].second, table[i].first};
  return out;
}
constexpr auto kDeviceWords = flag_words(kDeviceNames);
constexpr auto kCandidateWords = flag_words(kCandidateNames);

/// The command's options, filled from kRoundtripFlags (defaults here).
struct RoundtripOptions : GivenFlags {
  std::optional<std::string> target, pattern, python, megatron_path, keep, mutant, scenario, fault;
  std::optional<std::string> save_megatron_path, load_megatron_path;  // a cross-version round trip
  Device device = Device::cpu;
  Candidate candidate = Candidate::none;
  std::int64_t save_tp = 2, save_pp = 1, load_tp = 1, load_pp = 1;  // the command-line scenario
  std::int64_t save_ranks = 2, load_ranks = 4, seed = 0, timeout_s = 300;
  bool gated = false, optimizer = false, no_cpu_patches = false, json = false, all = false, list = false, real = false;
};

using O = RoundtripOptions;
const std::vector<Flag<O>> kRoundtripFlags = {
    {"target", &O::target, "megatron (the only target: the reference model has no storage)"},
    {"pattern", &O::pattern, "hybrid layer pattern of the loading run (default M*-M*-)"},
    {"save-tp", &O::save_tp, "tensor parallel size of the GPT run that saves (default 2)", 1, 16},
    {"save-pp", &O::save_pp, "pipeline parallel size of the GPT run that saves (default 1)", 1, 16},
    {"load-tp", &O::load_tp, "tensor parallel size of the hybrid run that loads (default 1)", 1, 16},
    {"load-pp", &O::load_pp, "pipeline parallel size of the hybrid run that loads (default 1)", 1, 16},
    {"gated", &O::gated, "gated (SwiGLU) MLP: fc1 is a ShardedTensorFactory on both sides"},
    {"optimizer", &O::optimizer, "add distributed-optimizer entries (exp_avg, exp_avg_sq, fp32_param)"},
    {"timeout", &O::timeout_s, "seconds before a world (save, load) or the verifier is killed (default 300)", 1, 86400},
    {"python", &O::python, "Python with torch + megatron-core (default: the ci/install-megatron.sh venv)"},
    {"megatron-path", &O::megatron_path, "a Megatron-LM checkout to import instead of the installed package"},
    {"save-megatron-path", &O::save_megatron_path,
     "with --real and --load-megatron-path: the Megatron-LM tree the save world imports (a cross-version round trip)"},
    {"load-megatron-path", &O::load_megatron_path,
     "with --real and --save-megatron-path: the Megatron-LM tree the load world imports"},
    {"keep", &O::keep, "write inputs and the checkpoint into DIR and keep them"},
    {"mutant", &O::mutant, "apply one adapter-side Megatron mutant (the check must then fail)"},
    {"no-cpu-patches", &O::no_cpu_patches, "run Megatron unpatched: shows what stops it without CUDA (exit 5)"},
    {"json", &O::json, "print only the summary as one JSON line"},
    {"scenario", &O::scenario, "worlds mode: run one named scenario (see --list)"},
    {"all", &O::all, "worlds mode: run every scenario that fits --save-ranks/--load-ranks"},
    {"seed", &O::seed, "worlds mode: run a scenario drawn from seed S (layouts, pattern, flags)", 0,
     std::numeric_limits<std::int64_t>::max()},
    {"list", &O::list, "worlds mode: list the scenarios (with --real: the real-model ones)"},
    {"save-ranks", &O::save_ranks, "worlds mode: ranks of the save world, launched with mpirun (default 2)", 1, 64},
    {"load-ranks", &O::load_ranks, "worlds mode: ranks of the load world, launched with mpirun (default 4)", 1, 64},
    {"device", one_of<O>(&O::device, kDeviceWords), "worlds mode: cpu (gloo, default) or cuda (NCCL)"},
    {"fault", &O::fault, "worlds mode, tests: kill_save:R, hang_load:R (rank R) or truncate"},
    {"real", &O::real,
     "worlds mode: Megatron's own GPTModel and HybridModel, built by the workers on CPU, instead of the reference's "
     "synthetic state dicts (the plan asks the Megatron checkout for each rank's model)"},
    {"candidate", one_of<O>(&O::candidate, kCandidateWords),
     "worlds mode: shard-split runs the shard-split scenarios, with the harness's candidate of the pending GTP "
     "shard-split save (not Megatron's code) where the checkout has no shard-split factory of its own"}};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

/// PASS, FAIL, NOT RUN, HARNESS ERROR, TIMEOUT: a scenario's line opens with its outcome.
std::string verdict_word(Outcome outcome) {
  switch (outcome) {
    case Outcome::passed: return "PASS";
    case Outcome::failed:
    case Outcome::known_finding: return "FAIL";
    case Outcome::not_run: return "NOT RUN";
    case Outcome::harness_error: return "HARNESS ERROR";
    case Outcome::timeout: return "TIMEOUT";
  }
  return "?";
}

/// The run's last line opens with the word of its exit code (the shared table).
std::string run_verdict_word(int exit_code) {
  switch (exit_code) {
    case kExitOk: return "PASS";
    case kExitHarnessError: return "HARNESS ERROR";
    case kExitTimeout: return "TIMEOUT";
    case kExitNothingRan: return "NOT RUN";
    default: return "FAIL";
  }
}

std::string mib(std::int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

/// `--list`: the synthetic scenarios, or with --real the real ones (a finding's only with --scenario); with --json
/// {"scenarios": [{"name", "description"(, "finding")} or {"name", "not_run"}]}.
int list_scenarios(const RoundtripOptions& args) {
  json::Json listed = json::Json::array();
  for (const ScenarioRow& row : scenario_table()) {
    if (is_real(row.kind) != args.real) continue;
    const std::string name(row.name);
    if (row.in_all == InAll::with_candidate && args.candidate == Candidate::none) {
      listed.push_back({{"name", name}, {"not_run", kNeedsCandidate}});
      if (!args.json) std::cout << name << ": NOT RUN: " << kNeedsCandidate << "\n";
      continue;
    }
    json::Json entry{{"name", name}, {"description", row.description}};
    std::string finding;
    if (!row.finding.empty()) {
      entry["finding"] = row.finding;
      finding = " [reproduces finding " + std::string(row.finding) + "; --scenario only, not in --all]";
    }
    listed.push_back(std::move(entry));
    if (!args.json) std::cout << name << ": " << row.description << finding << "\n";
  }
  if (args.json) std::cout << json::dump(json::Json{{"scenarios", listed}}) << "\n";
  return kExitOk;
}

/// The named, drawn or `--all` mode's own checks; nullopt when they pass, else the exit code.
std::optional<int> refused_world_mode(const RoundtripOptions& args) {
  const int modes = (args.has("scenario") ? 1 : 0) + (args.has("all") ? 1 : 0) + (args.has("seed") ? 1 : 0);
  if (modes != 1) return bad_input("worlds mode needs exactly one of --scenario NAME, --all, --seed S");
  if (args.target) {
    const auto target = parse_target_kind(*args.target);
    if (!target.ok()) return report_error(target.error(), kExitBadInput);
    if (*target != TargetKind::megatron) return bad_input("--target must be megatron");
  }
  for (const char* legacy : {"pattern", "save-tp", "save-pp", "load-tp", "load-pp", "gated", "optimizer"})
    if (args.has(legacy))
      return bad_input(std::string("--") + legacy +
                       " lays out one scenario of its own; named scenarios fix their layouts");
  return std::nullopt;
}

/// --fault, parsed, its rank checked against its world.
Result<std::optional<WorldFault>> fault_of(const RoundtripOptions& args, WorldSizes sizes) {
  if (!args.fault) return std::optional<WorldFault>();
  IH_TRY_ASSIGN(fault, parse_world_fault(*args.fault));
  const std::int64_t ranks = fault.kind == WorldFault::Kind::hang_load ? sizes.load : sizes.save;
  if (fault.kind != WorldFault::Kind::truncate && fault.rank >= ranks)
    return make_error(ErrorKind::invalid_argument, "--fault " + *args.fault + ": rank " + std::to_string(fault.rank) +
                                                       " is not in a world of " + std::to_string(ranks) +
                                                       (ranks == 1 ? " rank" : " ranks"));
  return std::optional<WorldFault>(fault);
}

ScenarioRequest request_of(const RoundtripOptions& args) {
  ScenarioRequest r;
  r.mode = args.scenario ? ScenarioRequest::Mode::named
           : args.all    ? ScenarioRequest::Mode::all
                         : ScenarioRequest::Mode::seed;
  r.name = args.scenario.value_or("");
  r.seed = static_cast<std::uint64_t>(args.seed);
  r.real = args.real;
  r.candidate = args.candidate;
  r.sizes = {args.save_ranks, args.load_ranks};
  return r;
}

RoundTripSessionOptions session_options(const RoundtripOptions& args, const WorkFolder& work,
                                        const std::optional<WorldFault>& fault, std::ostream& progress) {
  RoundTripSessionOptions o;
  WorldRunOptions& w = o.worlds;
  w.device = args.device;
  w.mutant = args.mutant;
  w.fault = fault;
  w.python = args.python.value_or(default_megatron_python());
  w.megatron_path = args.save_megatron_path ? args.save_megatron_path : args.megatron_path;
  o.load_megatron_path = args.load_megatron_path;
  w.world_timeout_s = args.timeout_s;
  w.work = work.path();
  w.no_cpu_patches = args.no_cpu_patches;
  w.progress = [&progress](const std::string& line) { progress << "roundtrip: " << line << "\n" << std::flush; };
  o.start_describer = [python = w.python, timeout = args.timeout_s](const std::optional<std::string>& checkout) {
    return start_megatron_describer({TargetKind::megatron, std::nullopt, checkout}, python,
                                    std::chrono::seconds(std::max<std::int64_t>(120, timeout)));
  };
  return o;
}

/// The scenario's entry of the --json summary; a scenario that did not pass says why (its first problem).
json::Json scenario_json(const ScenarioOutcome& s) {
  json::Json out{{"name", s.name},
                 {"save_ranks", s.save_ranks},
                 {"load_ranks", s.load_ranks},
                 {"device", to_string(s.device)},
                 {"ok", s.ok()},
                 {"elements_verified", s.elements_verified},
                 {"wrong_elements", s.wrong_elements},
                 {"peak_bytes_per_rank", s.peak_bytes_per_rank},
                 {"save_seconds", s.save_seconds},
                 {"load_seconds", s.load_seconds}};
  if (!s.ok()) out["reason"] = s.problems.empty() ? verdict_word(s.outcome) : s.problems.front();
  return out;
}

/// "    verifier: ..." : what the verifier checked, its speed and its wrong elements by kind and part.
void print_verifier(std::ostream& line, const json::Json& v) {
  line << "\n    verifier: " << v.value("tensors_checked", 0) << " tensors, " << v.value("objects_checked", 0)
       << " objects, " << v.value("plain_checked", 0) << " common values, " << v.value("writers_checked", 0)
       << " chunks with exactly one writer; " << std::setprecision(0) << v.value("elements_per_second", 0.0)
       << " elements/s in the C++ checker";
  if (v.value("compare_vs_memcpy", 0.0) > 0)
    line << " (its comparisons run at " << std::setprecision(3) << v.value("compare_vs_memcpy", 0.0)
         << " x a memcpy of the same bytes, measured in the same run)";
  if (v.value("after_load_state_dict_compared", std::int64_t{0}) > 0)
    line << "; " << v.value("after_load_state_dict_compared", std::int64_t{0})
         << " of the elements compared are the DistributedOptimizer's own states after its load_state_dict";
  if (v.contains("counts") && !v["counts"].empty()) line << "; wrong by kind " << v["counts"].dump();
  if (v.contains("wrong_by_part") && v["wrong_by_part"].size() > 1)
    line << "; wrong by part " << v["wrong_by_part"].dump();
}

/// "    save: peak RSS ..." for each world: memory and throughput against a memcpy.
void print_worlds(std::ostream& line, const json::Json& d) {
  for (const char* phase : {"save", "load"}) {
    const std::string m = std::string("memory_") + phase, t = std::string("throughput_") + phase;
    if (!d.contains(m) || !d.contains(t)) continue;
    line << std::setprecision(3) << "\n    " << phase << ": peak RSS "
         << mib(d[m].value("peak_rss_bytes", std::int64_t{0})) << " (+"
         << mib(d[m].value("peak_rss_growth_bytes", std::int64_t{0})) << " during the call)";
    if (d[m].contains("cuda_max_reserved"))
      line << ", CUDA max allocated " << mib(d[m].value("cuda_max_allocated", std::int64_t{0})) << " reserved "
           << mib(d[m].value("cuda_max_reserved", std::int64_t{0}));
    if (d[m].contains("cuda_reserved_growth_3_saves"))
      line << ", reserved growth over 3 saves " << mib(d[m].value("cuda_reserved_growth_3_saves", std::int64_t{0}));
    if (!d[t].empty())
      line << "; " << std::setprecision(1) << d[t].value("bytes_per_second_per_rank", 0.0) / 1e6
           << " MB/s per rank vs memcpy " << d[t].value("memcpy_bytes_per_second_per_rank", 0.0) / 1e6
           << " MB/s: ratio " << std::setprecision(4) << d[t].value("ratio_to_memcpy", 0.0);
  }
}

/// A scenario's lines: its verdict, layouts and counts, then the verifier's, the worlds' and its problems.
std::string scenario_text(const ScenarioOutcome& s) {
  std::ostringstream line;
  line << std::fixed << std::setprecision(2) << verdict_word(s.outcome) << " " << s.name << ": save " << s.save_layout
       << " -> load " << s.load_layout << " on " << to_string(s.device) << ": " << s.elements_verified
       << " elements verified, " << s.wrong_elements << " wrong; save " << s.save_seconds << " s, load "
       << s.load_seconds << " s; peak " << mib(s.peak_bytes_per_rank) << " per rank";
  const auto& d = s.details;
  if (d.contains("verifier")) print_verifier(line, d["verifier"]);
  if (d.value("scenario_seconds_load", 0.0) > 0)
    line << std::setprecision(2) << "\n    in the warm worlds: save side " << d.value("scenario_seconds_save", 0.0)
         << " s (build, fill, save), load side " << d.value("scenario_seconds_load", 0.0)
         << " s (build, retarget, load, dump)";
  print_worlds(line, d);
  if (d.contains("stored_bytes"))
    line << "\n    stored bytes (read back with DCP's FileSystemReader): " << d["stored_bytes"].value("chunks", 0)
         << " chunks, " << d["stored_bytes"].value("elements_checked", 0)
         << " elements against the reference's layout, " << d["stored_bytes"].value("wrong", 0) << " wrong";
  for (const auto& p : s.problems) line << "\n    " << p;
  return line.str();
}

/// A session that did not end in a report: nothing could run here (exit 5), bad input or a harness error.
int report_session_error(const Error& error, bool as_json) {
  if (error.kind == seam_kind::unsupported) {
    // Nothing could run here (e.g. no LibTorch to verify with): exit 5, never a harness error or a pass.
    std::cerr << "roundtrip: NOT RUN: " << error.message << "\n";
    if (as_json)
      std::cout << json::dump(json::Json{{"ok", false}, {"scenarios", json::Json::array()}, {"not_run", error.message}})
                << "\n";
    return kExitNothingRan;
  }
  return report_error(error, error.kind == ErrorKind::invalid_argument ? kExitBadInput : kExitHarnessError);
}

/// Prints the report: each scenario's lines, the run's faults, then the summary line or JSON; its exit code.
int print_report(const WorldRunReport& report, const RoundtripOptions& args, WorldSizes sizes, const WorkFolder& work,
                 std::ostream& progress) {
  const int code = report.exit_code();
  json::Json list = json::Json::array();
  for (const auto& s : report.scenarios) {
    list.push_back(scenario_json(s));
    progress << scenario_text(s) << "\n";
  }
  for (const auto& f : report.faults) std::cerr << "roundtrip: " << f << "\n";
  if (report.timed_out)
    std::cerr << "ERROR: timeout: a world did not finish within " << args.timeout_s << " s (ranks named above)\n";
  if (work.kept()) {
    json::Json full = json::Json::array();
    for (const auto& s : report.scenarios)
      full.push_back(json::Json{{"name", s.name}, {"ok", s.ok()}, {"details", s.details}, {"problems", s.problems}});
    std::ofstream(work.path() / "report.json") << json::dump(full) << "\n";
  }
  if (args.json)
    std::cout << json::dump(json::Json{{"ok", code == 0}, {"scenarios", list}}) << "\n";
  else
    std::cout << "roundtrip: " << run_verdict_word(code) << " (" << report.scenarios.size() << " scenario(s), "
              << sizes.save << " -> " << sizes.load << " ranks, " << to_string(args.device) << ")\n";
  return code;
}

/// Runs the selected scenarios in one session and prints its report.
int run_session(const RoundtripOptions& args, std::vector<WorldScenario> scenarios,
                const std::optional<WorldFault>& fault, std::ostream& progress) {
  const WorldSizes sizes{scenarios[0].save.ranks(), scenarios[0].load.ranks()};
  auto work = WorkFolder::make(args.keep, "interop-harness-worlds");
  if (!work.ok()) return report_error(work.error(), kExitHarnessError);
  const RoundTripSessionOptions options = session_options(args, *work, fault, progress);
  if (!std::filesystem::exists(options.worlds.python)) {
    std::cerr << "ERROR: harness_error: no Python with Megatron at " << options.worlds.python
              << "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)\n";
    return kExitHarnessError;
  }
  auto report = run_roundtrip_session(std::move(scenarios), options);
  if (!report.ok()) return report_session_error(report.error(), args.json);
  if (report->scenarios.empty()) {
    std::cerr << "roundtrip: NOT RUN: this Megatron builds none of the real scenarios\n";
    return kExitNothingRan;  // Megatron cannot run them here: exit 5, never a harness error or a pass
  }
  return print_report(*report, args, sizes, *work, progress);
}

/// The one round-trip engine (docs/roundtrip.md): save with A ranks, load with B ranks, each world
/// an mpirun launch; every element checked by the LibTorch verifier against the C++ oracle. The
/// scenarios are named (--scenario, --all), drawn (--seed) or, with `custom`, laid out on the
/// command line (--target megatron --pattern ... --save-tp ...).
int worlds_command(const RoundtripOptions& args, const std::optional<WorldScenario>& custom) {
  if (args.list) return list_scenarios(args);
  if (!custom)
    if (const auto refused = refused_world_mode(args)) return *refused;
  const WorldSizes sizes =
      custom ? WorldSizes{custom->save.ranks(), custom->load.ranks()} : WorldSizes{args.save_ranks, args.load_ranks};
  auto fault = fault_of(args, sizes);
  if (!fault.ok()) return report_error(fault.error(), kExitBadInput);
  const bool shard_split = args.candidate != Candidate::none;
  if (args.real && (shard_split || custom))
    return bad_input(
        "--real runs Megatron's own models; it does not combine with --candidate or the command-line scenario");
  if ((args.save_megatron_path || args.load_megatron_path) &&
      (!args.save_megatron_path || !args.load_megatron_path || !args.real || args.megatron_path))
    return bad_input(
        "a cross-version round trip needs --real with both --save-megatron-path and "
        "--load-megatron-path (and no --megatron-path)");
  ScenarioSelection selected;
  if (custom) {
    selected.scenarios.push_back(*custom);
  } else {
    auto chosen = select_scenarios(request_of(args));
    if (!chosen.ok()) return report_error(chosen.error(), kExitBadInput);
    selected = std::move(*chosen);
  }
  std::ostream& progress = args.json ? std::cerr : std::cout;
  if (shard_split)
    progress << "roundtrip: --candidate shard-split: the shard-split sides run the candidate shard-split design, not "
                "Megatron's code, unless the checkout has its own shard-split factory\n";
  for (const auto& n : selected.not_run) progress << "roundtrip: NOT RUN " << n << "\n";
  if (selected.scenarios.empty())
    return bad_input("no scenario fits " + std::to_string(sizes.save) + " save / " + std::to_string(sizes.load) +
                     " load ranks");
  return run_session(args, std::move(selected.scenarios), *fault, progress);
}

}  // namespace

int roundtrip_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto options = open_command(argv, kSynopsis, kRoundtripFlags, exit_code);
  if (!options) return exit_code;
  if (options->keep) {  // checked (and created) before anything runs
    const Status ready = check_output_folder("keep", *options->keep);
    if (!ready.ok()) return report_error(ready.error(), kExitBadInput);
  }
  for (const char* world_flag : {"scenario", "all", "seed", "list", "save-ranks", "load-ranks", "real"})
    if (options->has(world_flag)) return worlds_command(*options, std::nullopt);
  const auto target = parse_target_kind(options->target.value_or(""));
  if (!target.ok() || *target != TargetKind::megatron)
    return bad_input("roundtrip needs --target megatron (the reference model has no storage to round-trip through)");
  auto custom =
      custom_world_scenario(options->pattern.value_or("M*-M*-"), {.tp = options->save_tp, .pp = options->save_pp},
                            {.tp = options->load_tp, .pp = options->load_pp}, options->gated, options->optimizer);
  if (!custom.ok()) return report_error(custom.error(), kExitBadInput);
  return worlds_command(*options, *custom);
}

}  // namespace ih::cli
