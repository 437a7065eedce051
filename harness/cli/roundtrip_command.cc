// `interop-harness roundtrip --target megatron`: a real multi-process save of the GPT state dict
// and load into the retargeted hybrid one through Megatron's dist_checkpointing on CPU (gloo),
// every loaded element checked against a provenance oracle (docs/roundtrip.md).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <limits>
#include <sstream>
#include <tuple>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/output_places.h"
#include "harness/install/data_dir.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/process/child_run.h"
#include "harness/process/run_scope.h"
#include "harness/roundtrip/roundtrip_plan.h"
#include "harness/roundtrip/world_run.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih::cli {
namespace {

/// roundtrip.py could not run Megatron's save/load on this machine (e.g. it needs CUDA): no
/// verdict either way, told apart from a failed check (1) and a harness error (3).
constexpr int kExitCannotRun = kExitNothingRan;

const CommandSpec kRoundtrip = {
    "interop-harness roundtrip --target megatron [--pattern P] [--save-tp T --save-pp P --load-tp T --load-pp P] "
    "[--gated] [--optimizer] [--json]\n"
    "       interop-harness roundtrip (--scenario NAME | --all | --seed S) [--save-ranks A] [--load-ranks B] "
    "[--device cpu|cuda] [--mutant M] [--keep DIR] [--timeout S] [--json]   (worlds mode: mpirun, LibTorch "
    "verifier)\n"
    "exit codes: 0 every element where it belongs, 1 a check failed, 2 bad input, 3 harness error, "
    "4 timeout, 5 Megatron's save/load cannot run here (e.g. it needs CUDA)",
    {{"target", true, "megatron (the only target: the reference model has no storage)"},
     {"pattern", true, "hybrid layer pattern of the loading run (default M*-M*-)"},
     {"save-tp", true, "tensor parallel size of the GPT run that saves (default 2)"},
     {"save-pp", true, "pipeline parallel size of the GPT run that saves (default 1)"},
     {"load-tp", true, "tensor parallel size of the hybrid run that loads (default 1)"},
     {"load-pp", true, "pipeline parallel size of the hybrid run that loads (default 1)"},
     {"gated", false, "gated (SwiGLU) MLP: fc1 is a ShardedTensorFactory on both sides"},
     {"optimizer", false, "add distributed-optimizer entries (exp_avg, exp_avg_sq, fp32_param)"},
     {"timeout", true, "seconds before the whole run is killed (default 300)"},
     {"python", true, "Python with torch + megatron-core (default: the ci/install-megatron.sh venv)"},
     {"megatron-path", true, "a Megatron-LM checkout to import instead of the installed package"},
     {"keep", true, "write inputs and the checkpoint into DIR and keep them"},
     {"mutant", true, "apply one adapter-side Megatron mutant (the check must then fail)"},
     {"no-cpu-patches", false, "run Megatron unpatched: shows what stops it without CUDA (exit 5)"},
     {"json", false, "print only the summary as one JSON line"},
     {"scenario", true, "worlds mode: run one named scenario (see --list)"},
     {"all", false, "worlds mode: run every scenario that fits --save-ranks/--load-ranks"},
     {"seed", true, "worlds mode: run a scenario drawn from seed S (layouts, pattern, flags)"},
     {"list", false, "worlds mode: list the scenarios"},
     {"save-ranks", true, "worlds mode: ranks of the save world, launched with mpirun (default 2)"},
     {"load-ranks", true, "worlds mode: ranks of the load world, launched with mpirun (default 4)"},
     {"device", true, "worlds mode: cpu (gloo, default) or cuda (NCCL)"},
     {"fault", true, "worlds mode, tests: kill_save:R, hang_load:R (rank R) or truncate"}}};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

std::string rank_word(std::int64_t n) { return std::to_string(n) + (n == 1 ? " rank" : " ranks"); }

std::string layout_text(std::int64_t tp, std::int64_t pp) {
  return "TP=" + std::to_string(tp) + " PP=" + std::to_string(pp) + " (" + rank_word(tp * pp) + ")";
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

void print_summary(const json::Json& s, std::ostream& out) {
  const bool ok = s.value("ok", false);
  out << "roundtrip: "
      << (ok                             ? "PASS"
          : s.value("cannot_run", false) ? "CANNOT RUN (no verdict)"
                                         : "FAIL")
      << ": " << s.value("tensors_checked", 0) << " tensors, " << s.value("elements_checked", 0) << " elements checked";
  if (s.contains("objects_checked")) out << ", " << s.value("objects_checked", 0) << " objects";
  if (s.contains("fresh_checked")) out << ", " << s.value("fresh_checked", 0) << " fresh entries untouched";
  if (s.value("optimizer_mirrors_checked", 0) > 0)
    out << ", " << s.value("optimizer_mirrors_checked", 0) << " optimizer states mirror their parameters";
  if (s.contains("gpt_keys_loaded")) out << ", " << s.value("gpt_keys_loaded", 0) << " GPT keys read";
  out << "; saved on " << s.value("ranks_save", 0) << ", loaded on " << s.value("ranks_load", 0) << " ranks in "
      << std::fixed << std::setprecision(1) << s.value("seconds", 0.0) << " s\n";
  if (s.value("mismatch_count", 0) > 0) out << "  " << s.value("mismatch_count", 0) << " mismatches\n";
  const auto& mismatches = s.contains("mismatches") ? s.at("mismatches") : json::Json::array();
  std::size_t shown = 0;
  for (const auto& m : mismatches) {
    if (++shown > 20) {
      out << "  ... " << mismatches.size() - 20 << " more\n";
      break;
    }
    out << "  MISMATCH " << (m.is_string() ? m.get<std::string>() : json::dump(m)) << "\n";
  }
  if (s.contains("error")) out << "  error: " << json::dump(s.at("error")) << "\n";
  if (s.contains("cpu_patches") && !s.at("cpu_patches").empty()) {
    out << "  Megatron patched to run on CPU:\n";
    for (const auto& p : s.at("cpu_patches")) out << "    " << p.get<std::string>() << "\n";
  }
}

std::string mib(std::int64_t bytes) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1) << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return out.str();
}

/// Worlds mode (docs/roundtrip.md, "Worlds"): save with A ranks, load with B ranks, each world an
/// mpirun launch; every element checked by the LibTorch verifier against the C++ oracle.
int worlds_command(const ParsedArgs& args) {
  if (args.has("list")) {  // with --json: {"scenarios": [{"name", "description"} or {"name", "not_run"}]}
    json::Json listed = json::Json::array();
    for (const auto& name : world_scenario_names()) {
      auto s = make_world_scenario(name, 4, 2);
      const std::string description = s.ok() ? s->description : s.error().message;
      listed.push_back({{"name", name}, {"description", description}});
      if (!args.has("json")) std::cout << name << ": " << description << "\n";
    }
    for (const auto& [name, why] : world_scenarios_not_run()) {
      listed.push_back({{"name", name}, {"not_run", why}});
      if (!args.has("json")) std::cout << name << ": NOT RUN: " << why << "\n";
    }
    if (args.has("json")) std::cout << json::dump(json::Json{{"scenarios", listed}}) << "\n";
    return kExitOk;
  }
  const auto bad = [](const std::string& message) { return bad_input(message); };
  std::int64_t save_ranks = 2, load_ranks = 4, timeout_s = 300;
  for (auto [flag, slot, hi] : {std::tuple<const char*, std::int64_t*, std::int64_t>{"save-ranks", &save_ranks, 64},
                                {"load-ranks", &load_ranks, 64},
                                {"timeout", &timeout_s, 86400}}) {
    const auto v = args.int_value(flag, *slot, 1, hi);
    if (!v.ok()) return report_error(v.error(), kExitBadInput);
    *slot = *v;
  }
  const std::string device = args.value("device").value_or("cpu");
  if (device != "cpu" && device != "cuda") return bad("--device must be cpu or cuda, got '" + device + "'");
  const int modes = (args.has("scenario") ? 1 : 0) + (args.has("all") ? 1 : 0) + (args.has("seed") ? 1 : 0);
  if (modes != 1) return bad("worlds mode needs exactly one of --scenario NAME, --all, --seed S");
  if (args.has("target") && args.value("target").value_or("") != "megatron") return bad("--target must be megatron");
  for (const char* legacy : {"pattern", "save-tp", "save-pp", "load-tp", "load-pp", "gated", "optimizer"})
    if (args.has(legacy))
      return bad(std::string("--") + legacy + " belongs to the single-scenario mode; scenarios fix their layouts");
  if (auto fault = args.value("fault")) {
    const bool ok = *fault == "truncate" || fault->rfind("kill_save:", 0) == 0 || fault->rfind("hang_load:", 0) == 0;
    if (!ok) return bad("--fault must be kill_save:RANK, hang_load:RANK or truncate");
  }
  std::vector<WorldScenario> scenarios;
  std::vector<std::string> not_run;
  if (auto name = args.value("scenario")) {
    auto s = make_world_scenario(*name, save_ranks, load_ranks);
    if (!s.ok()) {
      std::cerr << "ERROR: " << to_string(s.error().kind) << ": " << s.error().message << "\n";
      return kExitBadInput;
    }
    scenarios.push_back(*s);
  } else if (args.has("all")) {
    std::vector<std::string> names = world_scenario_names();
    for (const auto& n : gtp_world_scenario_names()) names.push_back(n);
    for (const auto& name : names) {
      auto s = make_world_scenario(name, save_ranks, load_ranks);
      if (s.ok())
        scenarios.push_back(*s);
      else if (s.error().kind == seam_kind::unsupported)
        not_run.push_back(name + ": " + s.error().message);
      else
        return bad(s.error().message);
    }
    for (const auto& [name, why] : world_scenarios_not_run()) not_run.push_back(name + ": " + why);
  } else {
    const auto seed = args.int_value("seed", 0, 0, std::numeric_limits<std::int64_t>::max());
    if (!seed.ok()) return report_error(seed.error(), kExitBadInput);
    auto s = seeded_world_scenario(static_cast<std::uint64_t>(*seed), save_ranks, load_ranks);
    if (!s.ok()) return bad(s.error().message);
    scenarios.push_back(*s);
  }
  const bool as_json = args.has("json");
  std::ostream& progress = as_json ? std::cerr : std::cout;
  for (const auto& n : not_run) progress << "roundtrip: NOT RUN " << n << "\n";
  if (scenarios.empty()) {
    std::cerr << "ERROR: invalid_argument: no scenario fits " << save_ranks << " save / " << load_ranks
              << " load ranks\n";
    return kExitBadInput;
  }

  WorkDir work;
  if (auto keep = args.value("keep")) {
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
  options.mutant = args.value("mutant");
  options.fault = args.value("fault");
  options.python = args.value("python").value_or(default_megatron_python());
  options.megatron_path = args.value("megatron-path");
  options.world_timeout_s = timeout_s;
  options.work = work.path;
  options.no_cpu_patches = args.has("no-cpu-patches");
  options.progress = [&](const std::string& line) { progress << "roundtrip: " << line << "\n" << std::flush; };
  if (!std::filesystem::exists(options.python)) {
    std::cerr << "ERROR: harness_error: no Python with Megatron at " << options.python
              << "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)\n";
    return kExitHarnessError;
  }
  // GDP/GTP scenarios need a Megatron with GDP + GTP (the Megatron-LM snapshot of
  // ci/megatron-snapshot.sh): their own pair of worlds on that checkout.
  std::vector<WorldScenario> gpt_scenarios, gtp_scenarios;
  for (const auto& s : scenarios) (s.kind == "gdp_gtp" ? gtp_scenarios : gpt_scenarios).push_back(s);
  std::optional<std::string> snapshot = args.value("megatron-path");
  if (!gtp_scenarios.empty() && !snapshot) {
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
      for (const auto& s : gtp_scenarios)
        progress << "roundtrip: NOT RUN " << s.name
                 << ": no Megatron-LM checkout with GDP + GTP (ci/megatron-snapshot.sh)\n";
      gtp_scenarios.clear();
    }
  }
  if (gpt_scenarios.empty() && gtp_scenarios.empty()) {
    std::cerr << "ERROR: harness_error: nothing could run\n";
    return kExitHarnessError;
  }
  Result<WorldRunReport> report = WorldRunReport{};
  for (auto* group : {&gpt_scenarios, &gtp_scenarios}) {
    if (group->empty() || !report.ok()) continue;
    WorldRunOptions o = options;
    if (group == &gtp_scenarios) {
      o.megatron_path = snapshot;
      o.work = work.path / "gtp";
      progress << "roundtrip: GTP scenarios on the Megatron-LM checkout " << *snapshot << "\n";
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
      return kExitCannotRun;
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
                              {"ok", s.ok},
                              {"elements_verified", s.elements_verified},
                              {"wrong_elements", s.wrong_elements},
                              {"peak_bytes_per_rank", s.peak_bytes_per_rank},
                              {"save_seconds", s.save_seconds},
                              {"load_seconds", s.load_seconds}});
    std::ostringstream line;
    line << std::fixed << std::setprecision(2) << (s.ok ? "PASS " : "FAIL ") << s.name << ": save " << s.save_layout
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
      if (v.contains("counts") && !v["counts"].empty()) line << "; wrong by kind " << v["counts"].dump();
    }
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
      full.push_back(json::Json{{"name", s.name}, {"ok", s.ok}, {"details", s.details}, {"problems", s.problems}});
    std::ofstream(work.path / "report.json") << json::dump(full) << "\n";
  }
  const bool all_ok = code == 0;
  if (as_json)
    std::cout << json::dump(json::Json{{"ok", all_ok}, {"scenarios", list}}) << "\n";
  else
    std::cout << "roundtrip: " << (all_ok ? "PASS" : "FAIL") << " (" << report->scenarios.size() << " scenario(s), "
              << save_ranks << " -> " << load_ranks << " ranks, " << device << ")\n";
  return code;
}

}  // namespace

int roundtrip_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kRoundtrip, exit_code);
  if (!args) return exit_code;
  if (const auto keep = args->value("keep")) {  // checked (and created) before anything runs
    const Status ready = check_output_folder("keep", *keep);
    if (!ready.ok()) return report_error(ready.error(), kExitBadInput);
  }
  for (const char* world_flag : {"scenario", "all", "seed", "list", "save-ranks", "load-ranks", "device", "fault"})
    if (args->has(world_flag)) return worlds_command(*args);
  if (args->value("target").value_or("") != "megatron")
    return bad_input("roundtrip needs --target megatron (the reference model has no storage to round-trip through)");
  RoundtripScenario scenario;
  scenario.pattern = args->value("pattern").value_or(scenario.pattern);
  scenario.gated = args->has("gated");
  scenario.optimizer = args->has("optimizer");
  std::int64_t timeout_s = 300;
  for (auto [flag, slot, hi] : {std::tuple<const char*, std::int64_t*, std::int64_t>{"save-tp", &scenario.save_tp, 16},
                                {"save-pp", &scenario.save_pp, 16},
                                {"load-tp", &scenario.load_tp, 16},
                                {"load-pp", &scenario.load_pp, 16},
                                {"timeout", &timeout_s, 86400}}) {
    const auto v = args->int_value(flag, *slot, 1, hi);
    if (!v.ok()) return report_error(v.error(), kExitBadInput);
    *slot = *v;
  }
  const bool as_json = args->has("json");
  std::ostream& progress = as_json ? std::cerr : std::cout;

  WorkDir work;
  if (auto keep = args->value("keep")) {
    work.path = *keep, work.keep = true;
  } else {
    std::string templ = temp_dir() + "/interop-harness-roundtrip-XXXXXX";
    if (!mkdtemp(templ.data())) {
      std::cerr << "ERROR: harness_error: cannot create a temporary directory\n";
      return kExitHarnessError;
    }
    work.path = templ;
  }
  auto layers = write_roundtrip_inputs(scenario, work.path);
  if (!layers.ok()) {
    const bool bad_input = layers.error().kind != seam_kind::harness_error;
    std::cerr << "ERROR: " << to_string(layers.error().kind) << ": " << layers.error().message << "\n";
    return bad_input ? kExitBadInput : kExitHarnessError;
  }
  progress << "roundtrip: pattern " << scenario.pattern << " (" << *layers << " GPT layers)"
           << (scenario.gated ? ", gated MLP" : "") << (scenario.optimizer ? ", optimizer states" : "") << "\n"
           << "roundtrip: save GPT at " << layout_text(scenario.save_tp, scenario.save_pp) << ", load hybrid at "
           << layout_text(scenario.load_tp, scenario.load_pp) << "; inputs in " << work.path.string() << "\n";

  const std::string python = args->value("python").value_or(default_megatron_python());
  const std::string script = (ih::install::adapter_dir() / "roundtrip.py").string();  // installed or source tree
  if (!std::filesystem::exists(python)) {
    std::cerr << "ERROR: harness_error: no Python with Megatron at " << python
              << "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)\n";
    return kExitHarnessError;
  }
  std::vector<std::string> cmd = {python,      script,
                                  "--plan",    (work.path / "plan.json").string(),
                                  "--timeout", std::to_string(timeout_s > 10 ? timeout_s - 5 : timeout_s)};
  if (auto path = args->value("megatron-path")) cmd.insert(cmd.end(), {"--megatron-path", *path});
  if (auto mutant = args->value("mutant")) cmd.insert(cmd.end(), {"--mutant", *mutant});
  if (args->has("no-cpu-patches")) cmd.push_back("--no-cpu-patches");

  std::optional<json::Json> summary;
  auto outcome = run_child(cmd, std::chrono::seconds(timeout_s), [&](const std::string& line) {
    auto parsed = json::parse(line);
    if (!parsed.ok() || !parsed->is_object()) {
      progress << "roundtrip: (unexpected output) " << line << "\n";
      return;
    }
    if (parsed->contains("progress")) {
      progress << "roundtrip: " << parsed->value("progress", std::string()) << "\n" << std::flush;
      return;
    }
    summary = std::move(parsed).value();
  });
  if (!outcome.ok()) {
    std::cerr << "ERROR: " << to_string(outcome.error().kind) << ": " << outcome.error().message << "\n";
    return kExitHarnessError;
  }
  if (outcome->timed_out) {
    std::cerr << "ERROR: timeout: roundtrip.py did not finish within " << timeout_s
              << " s; killed with its rank workers. stderr tail:\n"
              << outcome->stderr_tail << "\n";
    if (as_json) std::cout << json::dump(json::Json{{"ok", false}, {"error", {{"kind", "timeout"}}}}) << "\n";
    return kExitTimeout;
  }
  const int rc = outcome->signaled ? -1 : outcome->exit_code;
  if (!summary) {
    std::cerr << "ERROR: harness_error: roundtrip.py ended ("
              << (outcome->signaled ? "signal " + std::to_string(outcome->signal) : "exit " + std::to_string(rc))
              << ") without a summary. stderr tail:\n"
              << outcome->stderr_tail << "\n";
    return kExitHarnessError;
  }
  if (as_json)
    std::cout << json::dump(*summary) << "\n";
  else
    print_summary(*summary, std::cout);
  const bool ok = summary->value("ok", false);
  if (ok && rc == 0) return kExitOk;
  if (rc == kExitCannotRun || summary->value("cannot_run", false)) {
    std::cerr << "ERROR: cannot_run: Megatron's dist_checkpointing save/load could not run on this machine "
                 "(see docs/roundtrip.md): "
              << json::dump(summary->value("error", json::Json())) << "\n";
    return kExitCannotRun;
  }
  if (rc == 1 && summary->contains("mismatches") && !summary->at("mismatches").empty()) return kExitCheckFailed;
  if (rc == 4) return kExitTimeout;
  std::cerr << "ERROR: harness_error: roundtrip.py exit " << rc << ". stderr tail:\n" << outcome->stderr_tail << "\n";
  return kExitHarnessError;
}

}  // namespace ih::cli
