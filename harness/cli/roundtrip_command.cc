// `interop-harness roundtrip --target megatron`: a real multi-process save of the GPT state dict
// and load into the retargeted hybrid one through Megatron's dist_checkpointing on CPU (gloo),
// every loaded element checked against a provenance oracle (docs/roundtrip.md).
#include <unistd.h>

#include <array>
#include <cstdlib>
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
#include "harness/install/data_dir.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/process/child_run.h"
#include "harness/process/run_scope.h"
#include "harness/roundtrip/world_run.h"
#include "harness/targets/targets.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih::cli {
namespace {

const char* const kSynopsis =
    "interop-harness roundtrip --target megatron [--pattern P] [--save-tp T --save-pp P --load-tp T --load-pp P] "
    "[--gated] [--optimizer] [--json]   (one scenario laid out on the command line)\n"
    "       interop-harness roundtrip (--scenario NAME | --all | --seed S) [--save-ranks A] [--load-ranks B] "
    "[--device cpu|cuda] [--mutant M] [--candidate shard-split] [--real] [--keep DIR] [--timeout S] [--json]\n"
    "both run mpirun save and load worlds, every loaded element checked by the LibTorch verifier\n"
    "exit codes: 0 every element where it belongs, 1 a check failed, 2 bad input, 3 harness error, "
    "4 timeout, 5 Megatron's save/load cannot run here (e.g. it needs CUDA)";

/// Where the worlds run their collectives; the one name table parses --device and names it to the workers.
enum class Device { cpu, cuda };
constexpr std::array<Named<Device>, 2> kDeviceNames = {{{"cpu", Device::cpu}, {"cuda", Device::cuda}}};

/// The command's options, filled from kRoundtripFlags (defaults here).
struct RoundtripOptions : GivenFlags {
  std::optional<std::string> target, pattern, python, megatron_path, keep, mutant, scenario, fault, candidate;
  Device device = Device::cpu;
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
    {"keep", &O::keep, "write inputs and the checkpoint into DIR and keep them"},
    {"mutant", &O::mutant, "apply one adapter-side Megatron mutant (the check must then fail)"},
    {"no-cpu-patches", &O::no_cpu_patches, "run Megatron unpatched: shows what stops it without CUDA (exit 5)"},
    {"json", &O::json, "print only the summary as one JSON line"},
    {"scenario", &O::scenario, "worlds mode: run one named scenario (see --list)"},
    {"all", &O::all, "worlds mode: run every scenario that fits --save-ranks/--load-ranks"},
    {"seed", &O::seed, "worlds mode: run a scenario drawn from seed S (layouts, pattern, flags)", 0,
     std::numeric_limits<std::int64_t>::max()},
    {"list", &O::list, "worlds mode: list the scenarios"},
    {"save-ranks", &O::save_ranks, "worlds mode: ranks of the save world, launched with mpirun (default 2)", 1, 64},
    {"load-ranks", &O::load_ranks, "worlds mode: ranks of the load world, launched with mpirun (default 4)", 1, 64},
    {"device", one_of<O>(&O::device, kDeviceNames), "worlds mode: cpu (gloo, default) or cuda (NCCL)"},
    {"fault", &O::fault, "worlds mode, tests: kill_save:R, hang_load:R (rank R) or truncate"},
    {"real", &O::real,
     "worlds mode: Megatron's own GPTModel and HybridModel, built by the workers on CPU, instead of the reference's "
     "synthetic state dicts (the plan asks the Megatron checkout for each rank's model)"},
    {"candidate", &O::candidate,
     "worlds mode: shard-split runs the shard-split scenarios, with the harness's candidate of the pending GTP "
     "shard-split save (not Megatron's code) where the checkout has no shard-split factory of its own"}};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

/// The work directory: --keep DIR as given (kept), else a fresh temporary one (removed).
struct WorkDir {
  std::filesystem::path path;
  bool keep = false;
  ~WorkDir() {
    std::error_code ec;
    if (!keep && !path.empty()) std::filesystem::remove_all(path, ec);
  }
};

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

/// The one round-trip engine (docs/roundtrip.md): save with A ranks, load with B ranks, each world
/// an mpirun launch; every element checked by the LibTorch verifier against the C++ oracle. The
/// scenarios are named (--scenario, --all), drawn (--seed) or, with `custom`, laid out on the
/// command line (--target megatron --pattern ... --save-tp ...).
int worlds_command(const RoundtripOptions& args, const std::optional<WorldScenario>& custom) {
  if (args.list) {  // with --json: {"scenarios": [{"name", "description"} or {"name", "not_run"}]}
    json::Json listed = json::Json::array();
    std::vector<std::string> names = world_scenario_names();
    for (const auto& name : real_world_scenario_names()) names.push_back(name);
    for (const auto& name : real_finding_scenario_names()) names.push_back(name);
    for (const auto& name : names) {
      auto s = make_world_scenario(name, 4, 2);
      const std::string description = s.ok() ? s->description : s.error().message;
      listed.push_back({{"name", name}, {"description", description}});
      if (!args.json) std::cout << name << ": " << description << "\n";
    }
    for (const auto& [name, why] : world_scenarios_not_run()) {
      listed.push_back({{"name", name}, {"not_run", why}});
      if (!args.json) std::cout << name << ": NOT RUN: " << why << "\n";
    }
    if (args.json) std::cout << json::dump(json::Json{{"scenarios", listed}}) << "\n";
    return kExitOk;
  }
  const auto bad = [](const std::string& message) { return bad_input(message); };
  std::int64_t save_ranks = args.save_ranks, load_ranks = args.load_ranks;
  const std::int64_t timeout_s = args.timeout_s;
  const std::string device = name_of(kDeviceNames, args.device);
  std::vector<WorldScenario> scenarios;
  std::vector<std::string> not_run;
  if (custom) {
    save_ranks = custom->save.ranks(), load_ranks = custom->load.ranks();
  } else {
    const int modes = (args.has("scenario") ? 1 : 0) + (args.has("all") ? 1 : 0) + (args.has("seed") ? 1 : 0);
    if (modes != 1) return bad("worlds mode needs exactly one of --scenario NAME, --all, --seed S");
    if (args.target) {
      const auto target = parse_target_kind(*args.target);
      if (!target.ok()) return report_error(target.error(), kExitBadInput);
      if (*target != TargetKind::megatron) return bad("--target must be megatron");
    }
    for (const char* legacy : {"pattern", "save-tp", "save-pp", "load-tp", "load-pp", "gated", "optimizer"})
      if (args.has(legacy))
        return bad(std::string("--") + legacy + " lays out one scenario of its own; named scenarios fix their layouts");
  }
  std::optional<WorldFault> fault;
  if (const auto& word = args.fault) {
    auto parsed = parse_world_fault(*word);
    if (!parsed.ok()) return report_error(parsed.error(), kExitBadInput);
    const std::int64_t ranks = parsed->kind == WorldFault::Kind::hang_load ? load_ranks : save_ranks;
    if (parsed->kind != WorldFault::Kind::truncate && parsed->rank >= ranks)
      return bad("--fault " + *word + ": rank " + std::to_string(parsed->rank) + " is not in a world of " +
                 std::to_string(ranks) + (ranks == 1 ? " rank" : " ranks"));
    fault = *parsed;
  }
  if (args.candidate && *args.candidate != "shard-split")
    return bad("--candidate must be shard-split, got '" + *args.candidate + "'");
  const bool shard_split = args.candidate.has_value();
  const auto needs_candidate = [&](const std::string& name) -> std::optional<std::string> {
    if (shard_split) return std::nullopt;
    for (const auto& [n, why] : world_scenarios_not_run())
      if (n == name) return why;
    return std::nullopt;
  };
  const auto is_real_name = [](const std::string& name) { return name.rfind("real_", 0) == 0; };
  if (args.real && (shard_split || custom))
    return bad("--real runs Megatron's own models; it does not combine with --candidate or the command-line scenario");
  if (custom) {
    scenarios.push_back(*custom);
  } else if (const auto& name = args.scenario) {
    if (is_real_name(*name) != args.real)
      return bad(
          "scenario '" + *name + "' " +
          (args.real ? "is not a real-model scenario (--real runs real_*)" : "is a real-model scenario: add --real"));
    if (const auto why = needs_candidate(*name)) {
      std::cerr << "ERROR: unsupported: scenario '" << *name << "' is not run: " << *why << "\n";
      return kExitBadInput;
    }
    auto s = make_world_scenario(*name, save_ranks, load_ranks);
    if (!s.ok()) {
      std::cerr << "ERROR: " << to_string(s.error().kind) << ": " << s.error().message << "\n";
      return kExitBadInput;
    }
    scenarios.push_back(*s);
  } else if (args.all) {
    std::vector<std::string> names = args.real ? real_world_scenario_names() : world_scenario_names();
    if (!args.real)
      for (const auto& n : gtp_world_scenario_names()) names.push_back(n);
    if (shard_split)
      for (const auto& n : shard_split_world_scenario_names()) names.push_back(n);
    for (const auto& name : names) {
      auto s = make_world_scenario(name, save_ranks, load_ranks);
      if (s.ok())
        scenarios.push_back(*s);
      else if (s.error().kind == seam_kind::unsupported)
        not_run.push_back(name + ": " + s.error().message);
      else
        return bad(s.error().message);
    }
    if (!shard_split && !args.real)
      for (const auto& [name, why] : world_scenarios_not_run()) not_run.push_back(name + ": " + why);
  } else {
    const auto seed = static_cast<std::uint64_t>(args.seed);
    auto s = args.real ? seeded_real_world_scenario(seed, save_ranks, load_ranks)
                       : seeded_world_scenario(seed, save_ranks, load_ranks);
    if (!s.ok()) return bad(s.error().message);
    scenarios.push_back(*s);
  }
  const bool as_json = args.json;
  std::ostream& progress = as_json ? std::cerr : std::cout;
  if (shard_split)
    progress << "roundtrip: --candidate shard-split: the shard-split sides run the candidate shard-split design, not "
                "Megatron's code, unless the checkout has its own shard-split factory\n";
  for (const auto& n : not_run) progress << "roundtrip: NOT RUN " << n << "\n";
  if (scenarios.empty()) {
    std::cerr << "ERROR: invalid_argument: no scenario fits " << save_ranks << " save / " << load_ranks
              << " load ranks\n";
    return kExitBadInput;
  }

  WorkDir work;
  if (const auto& keep = args.keep) {
    work.path = *keep, work.keep = true;
  } else {
    std::string templ = temp_dir() + "/interop-harness-worlds-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::cerr << "ERROR: harness_error: cannot create a temporary directory\n";
      return kExitHarnessError;
    }
    work.path = templ;
  }
  WorldRunOptions options;
  options.device = device;
  options.mutant = args.mutant;
  options.fault = fault;
  options.python = args.python.value_or(default_megatron_python());
  options.megatron_path = args.megatron_path;
  options.world_timeout_s = timeout_s;
  options.work = work.path;
  options.no_cpu_patches = args.no_cpu_patches;
  options.progress = [&](const std::string& line) { progress << "roundtrip: " << line << "\n" << std::flush; };
  if (!std::filesystem::exists(options.python)) {
    std::cerr << "ERROR: harness_error: no Python with Megatron at " << options.python
              << "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)\n";
    return kExitHarnessError;
  }
  // GDP/GTP scenarios need a Megatron with GDP + GTP (the Megatron-LM snapshot of
  // ci/megatron-snapshot.sh): their own pair of worlds on that checkout.
  // Real-model scenarios too: Megatron's HybridModel and its GPT interop live in that checkout.
  std::vector<WorldScenario> gpt_scenarios, gtp_scenarios, real_scenarios;
  for (const auto& s : scenarios)
    (s.is_real() ? real_scenarios : s.kind == ScenarioKind::gdp_gtp ? gtp_scenarios : gpt_scenarios).push_back(s);
  std::optional<std::string> snapshot = args.megatron_path;
  if ((!gtp_scenarios.empty() || !real_scenarios.empty()) && !snapshot) {
    const std::filesystem::path root = std::filesystem::path(IH_SOURCE_DIR_PATH) / "build" / "megatron-snapshot";
    std::error_code ec;
    for (int attempt = 0; attempt < 2 && !snapshot; ++attempt) {
      if (std::filesystem::is_directory(root, ec))
        for (const auto& d : std::filesystem::directory_iterator(root, ec))
          if (std::filesystem::exists(d.path() / "megatron" / "core" / "ssm" / "gated_delta_product.py"))
            snapshot = d.path().string();
      if (!snapshot && attempt == 0) {
        options.progress("extracting the Megatron-LM snapshot (bash ci/megatron-snapshot.sh) for the GTP scenarios");
        (void)run_child({"bash", std::string(IH_SOURCE_DIR_PATH) + "/ci/megatron-snapshot.sh"},
                        std::chrono::seconds(600), [](const std::string&) {});
      }
    }
    if (!snapshot) {
      for (const auto* group : {&gtp_scenarios, &real_scenarios})
        for (const auto& s : *group)
          progress << "roundtrip: NOT RUN " << s.name
                   << ": no Megatron-LM checkout with GDP + GTP (ci/megatron-snapshot.sh)\n";
      gtp_scenarios.clear(), real_scenarios.clear();
    }
  }
  // The plan of a real scenario comes from Megatron's own models: the checkout's adapter describes each
  // rank's model (its `model dump`) in persistent gloo worlds, started once for the run.
  std::unique_ptr<MegatronImplementation> describer;
  RealModelEntries real_entries;
  std::vector<ScenarioOutcome> undescribed;  // real scenarios whose models could not be described: ended already
  if (!real_scenarios.empty()) {
    MegatronOptions mo;
    mo.python = options.python;
    mo.megatron_path = snapshot;
    mo.reply_timeout = std::chrono::seconds(std::max<std::int64_t>(120, timeout_s));
    options.progress("starting the Megatron adapter on " + *snapshot + " to describe the real models' ranks");
    auto started = MegatronImplementation::start(mo);
    if (!started.ok()) {
      std::cerr << "ERROR: harness_error: the Megatron adapter that describes the real models did not start: "
                << started.error().message << "\n";
      return kExitHarnessError;
    }
    describer = std::move(*started);
    BuildableRealScenarios split = buildable_real_scenarios(
        std::move(real_scenarios),
        [&describer](const ModelDumpSpec& spec, std::int64_t rank) { return describer->model_state_dict(spec, rank); });
    for (const auto& [name, why] : split.not_run) progress << "roundtrip: NOT RUN " << name << ": " << why << "\n";
    real_scenarios = std::move(split.runnable);
    real_entries = std::move(split.describe);
    undescribed = std::move(split.undescribed);
    for (ScenarioOutcome& u : undescribed) u.device = options.device;
    if (real_scenarios.empty() && gpt_scenarios.empty() && gtp_scenarios.empty() && undescribed.empty()) {
      std::cerr << "roundtrip: NOT RUN: this Megatron builds none of the real scenarios\n";
      return kExitNothingRan;  // Megatron cannot run them here: exit 5, never a harness error or a pass
    }
  }
  if (gpt_scenarios.empty() && gtp_scenarios.empty() && real_scenarios.empty() && undescribed.empty()) {
    std::cerr << "ERROR: harness_error: nothing could run\n";
    return kExitHarnessError;
  }
  Result<WorldRunReport> report = WorldRunReport{std::move(undescribed)};
  for (auto* group : {&gpt_scenarios, &gtp_scenarios, &real_scenarios}) {
    if (group->empty() || !report.ok()) continue;
    WorldRunOptions o = options;
    if (group == &gtp_scenarios) {
      o.megatron_path = snapshot;
      o.work = work.path / "gtp";
      progress << "roundtrip: GTP scenarios on the Megatron-LM checkout " << *snapshot << "\n";
    } else if (group == &real_scenarios) {
      o.megatron_path = snapshot;
      o.work = work.path / "real";
      o.real_entries = real_entries;
      progress << "roundtrip: real-model scenarios on the Megatron-LM checkout " << *snapshot << "\n";
    } else {
      o.work = work.path / "gpt";
    }
    auto part = run_world_roundtrips(*group, o);
    if (!part.ok()) {
      report = part.error();
      break;
    }
    for (auto& sc : part->scenarios) report->scenarios.push_back(std::move(sc));
    report->timed_out = report->timed_out || part->timed_out;
    report->harness_fault = report->harness_fault || part->harness_fault;
    for (auto& f : part->faults) report->faults.push_back(std::move(f));
  }
  if (!report.ok()) {
    const auto kind = report.error().kind;
    if (kind == seam_kind::unsupported) {
      // Nothing could run here (e.g. no LibTorch to verify with): exit 5, never a harness error or a pass.
      std::cerr << "roundtrip: NOT RUN: " << report.error().message << "\n";
      if (as_json)
        std::cout << json::dump(json::Json{
                         {"ok", false}, {"scenarios", json::Json::array()}, {"not_run", report.error().message}})
                  << "\n";
      return kExitNothingRan;
    }
    std::cerr << "ERROR: " << to_string(kind) << ": " << report.error().message << "\n";
    return kind == ErrorKind::invalid_argument ? kExitBadInput : kExitHarnessError;
  }
  const int code = report->exit_code();
  json::Json list = json::Json::array();
  for (const auto& s : report->scenarios) {
    list.push_back(json::Json{{"name", s.name},
                              {"save_ranks", s.save_ranks},
                              {"load_ranks", s.load_ranks},
                              {"device", s.device},
                              {"ok", s.ok()},
                              {"elements_verified", s.elements_verified},
                              {"wrong_elements", s.wrong_elements},
                              {"peak_bytes_per_rank", s.peak_bytes_per_rank},
                              {"save_seconds", s.save_seconds},
                              {"load_seconds", s.load_seconds}});
    std::ostringstream line;
    line << std::fixed << std::setprecision(2) << verdict_word(s.outcome) << " " << s.name << ": save " << s.save_layout
         << " -> load " << s.load_layout << " on " << s.device << ": " << s.elements_verified << " elements verified, "
         << s.wrong_elements << " wrong; save " << s.save_seconds << " s, load " << s.load_seconds << " s; peak "
         << mib(s.peak_bytes_per_rank) << " per rank";
    const auto& d = s.details;
    if (d.contains("verifier")) {
      const auto& v = d["verifier"];
      line << "\n    verifier: " << v.value("tensors_checked", 0) << " tensors, " << v.value("objects_checked", 0)
           << " objects, " << v.value("plain_checked", 0) << " common values, " << v.value("writers_checked", 0)
           << " chunks with exactly one writer; " << std::setprecision(0) << v.value("elements_per_second", 0.0)
           << " elements/s in the C++ checker";
      if (v.value("compare_vs_memcpy", 0.0) > 0)
        line << " (its comparisons run at " << std::setprecision(3) << v.value("compare_vs_memcpy", 0.0)
             << " x a memcpy of the same bytes, measured in the same run)";
      if (v.contains("counts") && !v["counts"].empty()) line << "; wrong by kind " << v["counts"].dump();
      if (v.contains("wrong_by_part") && v["wrong_by_part"].size() > 1)
        line << "; wrong by part " << v["wrong_by_part"].dump();
    }
    if (d.value("scenario_seconds_load", 0.0) > 0)
      line << std::setprecision(2) << "\n    in the warm worlds: save side " << d.value("scenario_seconds_save", 0.0)
           << " s (build, fill, save), load side " << d.value("scenario_seconds_load", 0.0)
           << " s (build, retarget, load, dump)";
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
    for (const auto& p : s.problems) line << "\n    " << p;
    progress << line.str() << "\n";
  }
  for (const auto& f : report->faults) std::cerr << "roundtrip: " << f << "\n";
  if (report->timed_out) {
    std::cerr << "ERROR: timeout: a world did not finish within " << timeout_s << " s (ranks named above)\n";
  }
  if (work.keep) {
    json::Json full = json::Json::array();
    for (const auto& s : report->scenarios)
      full.push_back(json::Json{{"name", s.name}, {"ok", s.ok()}, {"details", s.details}, {"problems", s.problems}});
    std::ofstream(work.path / "report.json") << json::dump(full) << "\n";
  }
  const bool all_ok = code == 0;
  if (as_json)
    std::cout << json::dump(json::Json{{"ok", all_ok}, {"scenarios", list}}) << "\n";
  else
    std::cout << "roundtrip: " << run_verdict_word(code) << " (" << report->scenarios.size() << " scenario(s), "
              << save_ranks << " -> " << load_ranks << " ranks, " << device << ")\n";
  return code;
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
