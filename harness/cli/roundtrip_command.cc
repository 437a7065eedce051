// `interop-harness roundtrip --target megatron`: a real multi-process save of the GPT state dict
// and load into the retargeted hybrid one through Megatron's dist_checkpointing on CPU (gloo),
// every loaded element checked against a provenance oracle (docs/roundtrip.md).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "codec/json_codec.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/roundtrip/roundtrip_plan.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih::cli {
namespace {

/// roundtrip.py could not run Megatron's save/load on this machine (e.g. it needs CUDA): no
/// verdict either way, told apart from a failed check (1) and a harness error (3).
constexpr int kExitCannotRun = 5;

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
  out << "roundtrip: " << (ok ? "PASS" : s.value("cannot_run", false) ? "CANNOT RUN (no verdict)" : "FAIL") << ": " << s.value("tensors_checked", 0) << " tensors, "
      << s.value("elements_checked", 0) << " elements checked";
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

}  // namespace

int roundtrip_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {
      {"target", true, "megatron (the only target: the reference model has no storage)"},
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
      {"help", false, "show this help"}};
  const std::string synopsis =
      "interop-harness roundtrip --target megatron [--pattern P] [--save-tp T --save-pp P --load-tp T --load-pp P] "
      "[--gated] [--optimizer] [--json]\n"
      "exit codes: 0 every element where it belongs, 1 a check failed, 2 bad input, 3 harness error, "
      "4 timeout, 5 Megatron's save/load cannot run here (e.g. it needs CUDA)";
  auto args = parse_args(argv, flags);
  if (!args.ok() || args->has("help") || !args->positionals.empty()) {
    std::cerr << (args.ok() ? (args->positionals.empty() ? "" : "ERROR: unexpected argument '" + args->positionals[0] + "'\n")
                            : "ERROR: " + args.error().message + "\n")
              << usage(synopsis, flags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  const std::string target = args->value("target").value_or("");
  if (target != "megatron") {
    std::cerr << "ERROR: roundtrip needs --target megatron (the reference model has no storage to round-trip "
                 "through)\n";
    return kExitBadInput;
  }
  RoundtripScenario scenario;
  scenario.pattern = args->value("pattern").value_or(scenario.pattern);
  scenario.gated = args->has("gated");
  scenario.optimizer = args->has("optimizer");
  std::int64_t timeout_s = 300;
  for (auto [flag, slot] : {std::pair<const char*, std::int64_t*>{"save-tp", &scenario.save_tp},
                            {"save-pp", &scenario.save_pp},
                            {"load-tp", &scenario.load_tp},
                            {"load-pp", &scenario.load_pp},
                            {"timeout", &timeout_s}}) {
    auto v = args->int_value(flag, *slot);
    if (!v.ok() || *v < 1 || *v > (std::string(flag) == "timeout" ? 86400 : 16)) {
      std::cerr << "ERROR: --" << flag << " must be an integer in [1, " << (std::string(flag) == "timeout" ? 86400 : 16)
                << "]\n";
      return kExitBadInput;
    }
    *slot = *v;
  }
  const bool as_json = args->has("json");
  std::ostream& progress = as_json ? std::cerr : std::cout;

  WorkDir work;
  if (auto keep = args->value("keep")) {
    work.path = *keep, work.keep = true;
  } else {
    char templ[] = "/tmp/interop-harness-roundtrip-XXXXXX";
    if (!mkdtemp(templ)) {
      std::cerr << "ERROR: harness_error: cannot create a temporary directory\n";
      return kExitHarnessError;
    }
    work.path = templ;
  }
  auto layers = write_roundtrip_inputs(scenario, work.path);
  if (!layers.ok()) {
    const bool bad_input = layers.error().kind != ErrorKind::harness_error;
    std::cerr << "ERROR: " << to_string(layers.error().kind) << ": " << layers.error().message << "\n";
    return bad_input ? kExitBadInput : kExitHarnessError;
  }
  progress << "roundtrip: pattern " << scenario.pattern << " (" << *layers << " GPT layers)"
           << (scenario.gated ? ", gated MLP" : "") << (scenario.optimizer ? ", optimizer states" : "") << "\n"
           << "roundtrip: save GPT at " << layout_text(scenario.save_tp, scenario.save_pp) << ", load hybrid at "
           << layout_text(scenario.load_tp, scenario.load_pp) << "; inputs in " << work.path.string() << "\n";

  const std::string python = args->value("python").value_or(default_megatron_python());
  const std::string script = std::string(IH_SOURCE_DIR_PATH) + "/harness/megatron/adapter/roundtrip.py";
  if (!std::filesystem::exists(python)) {
    std::cerr << "ERROR: harness_error: no Python with Megatron at " << python
              << "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)\n";
    return kExitHarnessError;
  }
  std::vector<std::string> cmd = {python, script, "--plan", (work.path / "plan.json").string(), "--timeout",
                                  std::to_string(timeout_s > 10 ? timeout_s - 5 : timeout_s)};
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
              << " s; killed with its rank workers. stderr tail:\n" << outcome->stderr_tail << "\n";
    if (as_json) std::cout << json::dump(json::Json{{"ok", false}, {"error", {{"kind", "timeout"}}}}) << "\n";
    return kExitTimeout;
  }
  const int rc = outcome->signaled ? -1 : outcome->exit_code;
  if (!summary) {
    std::cerr << "ERROR: harness_error: roundtrip.py ended (" << (outcome->signaled ? "signal " + std::to_string(outcome->signal)
                                                                                    : "exit " + std::to_string(rc))
              << ") without a summary. stderr tail:\n" << outcome->stderr_tail << "\n";
    return kExitHarnessError;
  }
  if (as_json) std::cout << json::dump(*summary) << "\n";
  else print_summary(*summary, std::cout);
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
