// `interop-harness mutate`: mutation testing of Megatron's own Python code by the gate's checks
// (harness/mutate; docs/guides/mutation-testing.md).
#include <filesystem>
#include <iostream>
#include <limits>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/output_places.h"
#include "harness/install/data_dir.h"
#include "harness/mutate/mutate_run.h"
#include "harness/report/gate_report.h"
#include "models/text.h"

namespace ih::cli {
namespace {

struct MutateOptions : GivenFlags {
  std::optional<std::string> target, megatron_path, base_megatron_path, files, report, coverage_json, corpus;
  std::int64_t max_mutants = 20, seed = 1;
  bool json = false, whole_gate = false, cold_adapters = false;
};

const std::vector<Flag<MutateOptions>> kMutateFlags = {
    {"target", &MutateOptions::target, "megatron (the only target with Python source to mutate)"},
    {"megatron-path", &MutateOptions::megatron_path, "the Megatron-LM tree to mutate (never edited)", 0, 0, true},
    {"files", &MutateOptions::files,
     "globs relative to the tree's root, comma-separated (more may follow as words; default: the checkpoint path)"},
    {"base-megatron-path", &MutateOptions::base_megatron_path, "mutate only the lines changed from this BASE tree"},
    {"max-mutants", &MutateOptions::max_mutants, "at most this many mutants (default 20)", 1, 100'000},
    {"seed", &MutateOptions::seed, "which mutants are drawn (default 1)", 0, std::numeric_limits<std::int64_t>::max()},
    {"json", &MutateOptions::json, "print the JSON report on stdout (progress goes to stderr)"},
    {"report", &MutateOptions::report, "write mutation.json and summary.md into this folder"},
    {"coverage-json", &MutateOptions::coverage_json,
     "internal: coverage.py's JSON report (--show-contexts, contexts = check names) instead of a gate --coverage run"},
    {"whole-gate", &MutateOptions::whole_gate, "internal (bench): every mutant runs the whole gate, not its checks"},
    {"cold-adapters", &MutateOptions::cold_adapters,
     "internal (bench, tests): no fork server, every adapter starts cold (imports torch itself)"},
    {"corpus", &MutateOptions::corpus, "corpus folder (default: the source tree's corpus/)"}};

bool is_mutate_report_file(std::string_view name) { return name == "mutation.json" || name == "summary.md"; }

std::vector<std::string> globs_of(const MutateOptions& o) {
  if (!o.files) return mutate::checkpoint_path_globs();
  std::vector<std::string> globs;
  for (const std::string& g : split(*o.files, ','))
    if (!g.empty()) globs.push_back(g);
  for (const std::string& word : o.positionals) globs.push_back(word);
  return globs;
}

/// Bad input found before any work: the target, the trees and the output places.
std::optional<Error> refused(const MutateOptions& o) {
  namespace fs = std::filesystem;
  const auto bad = [](const std::string& why) { return make_error(ErrorKind::invalid_argument, why); };
  if (o.target.value_or("megatron") != "megatron") return bad("mutate: --target must be megatron");
  if (!o.files && !o.positionals.empty()) return bad("mutate: unexpected word '" + o.positionals[0] + "'");
  for (const auto& [flag, tree] :
       {std::pair{"--megatron-path", o.megatron_path}, {"--base-megatron-path", o.base_megatron_path}})
    if (tree && !fs::is_regular_file(fs::path(*tree) / "megatron" / "core" / "__init__.py"))
      return bad(std::string(flag) + " " + *tree + " is not a Megatron-LM tree: no megatron/core/__init__.py there");
  if (o.coverage_json && !fs::is_regular_file(*o.coverage_json))
    return bad("--coverage-json " + *o.coverage_json + ": no such file");
  if (o.report)
    if (const Status ready = prepare_output_folder("report", *o.report, is_mutate_report_file); !ready.ok())
      return ready.error();
  return std::nullopt;
}

}  // namespace

int mutate_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv,
                                 "interop-harness mutate --target megatron --megatron-path DIR [--files GLOB ...] "
                                 "[--base-megatron-path BASE] [--max-mutants N] [--seed S] [--json] [--report DIR]",
                                 kMutateFlags, exit_code, {0, 1000});
  if (!args) return exit_code;
  if (const auto error = refused(*args)) return report_error(*error, kExitBadInput);
  std::error_code ec;
  const mutate::CampaignOptions options{std::filesystem::absolute(*args->megatron_path).lexically_normal().string(),
                                        args->base_megatron_path,
                                        globs_of(*args),
                                        args->max_mutants,
                                        args->seed,
                                        args->coverage_json,
                                        args->whole_gate,
                                        args->cold_adapters,
                                        args->corpus.value_or(install::corpus_dir().string()),
                                        std::filesystem::read_symlink("/proc/self/exe", ec).string()};
  std::ostream& progress = args->json ? std::cerr : std::cout;
  const auto campaign = mutate::run_campaign(options, progress);
  if (!campaign.ok())
    return report_error(campaign.error(),
                        campaign.error().kind == ErrorKind::invalid_argument ? kExitBadInput : kExitHarnessError);
  const json::Json report = mutate::campaign_json(campaign->mutants);
  if (args->report) {
    const std::filesystem::path folder(*args->report);
    const Status json_written = report::write_file_atomically((folder / "mutation.json").string(), json::dump(report));
    const Status md_written =
        report::write_file_atomically((folder / "summary.md").string(), mutate::campaign_summary(campaign->mutants));
    if (!json_written.ok() || !md_written.ok())
      return report_error((json_written.ok() ? md_written : json_written).error(), kExitHarnessError);
  }
  const int survived = report.value("survived", 0) + report.value("timeout", 0);
  progress << "mutate: score " << json::dump(report["score"]) << " (" << report.value("killed", 0) << " killed, "
           << report.value("survived", 0) << " survived, " << report.value("timeout", 0) << " timeout, "
           << report.value("incompetent", 0) << " incompetent, " << report.value("equivalent", 0)
           << " equivalent) over " << campaign->lines << " lines; clean checks " << campaign->clean_seconds << " s\n";
  if (args->json) std::cout << json::dump(report) << "\n";
  if (campaign->mutants.empty()) return kExitNothingRan;
  return survived ? kExitCheckFailed : kExitOk;
}

}  // namespace ih::cli
