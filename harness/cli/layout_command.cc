// `interop-harness layout gdp|mamba ...`: which rank saves which rows of an in_proj weight.
#include <fstream>
#include <iostream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/report/layout_report.h"

namespace ih::cli {

int layout_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {
      {"d-inner-local", true, "TP-local d_inner D"}, {"group-state-local", true, "TP-local ngroups*d_state S"},
      {"nheads-local", true, "TP-local heads H"}, {"householder", true, "GDP Householder reflections M (default 3)"},
      {"tp", true, "tensor-parallel size T"}, {"gtp", true, "GTP size G (1: the non-GTP split factory)"},
      {"pad-align", true, "pad_for_alignment p"}, {"cols", true, "columns C"},
      {"key", true, "factory key (default decoder.layers.0.mixer.in_proj.weight)"},
      {"design", true, "gather or shard-split (default)"}, {"json", false, "print the JSON object"},
      {"svg", true, "also write a picture of the tiling to FILE"}, {"help", false, "show this help"}};
  const std::string family = argv.empty() ? "" : argv[0];
  auto args = parse_args(std::vector<std::string>(argv.begin() + (argv.empty() ? 0 : 1), argv.end()), flags);
  if ((family != "gdp" && family != "mamba") || !args.ok() || args->has("help") || !args->positionals.empty()) {
    std::cerr << (args.ok() ? "" : "ERROR: " + args.error().message + "\n")
              << usage("interop-harness layout gdp|mamba --d-inner-local D --group-state-local S --nheads-local H "
                       "[--householder M] --tp T --gtp G --pad-align P --cols C [--key K] [--design D] [--json] [--svg FILE]",
                       flags);
    return args.ok() && args->has("help") ? kExitOk : kExitBadInput;
  }
  report::LayoutParams params;
  params.family = family == "gdp" ? report::MixerFamily::gdp : report::MixerFamily::mamba;
  const std::pair<const char*, std::int64_t*> ints[] = {
      {"d-inner-local", &params.d_inner_local}, {"group-state-local", &params.group_state_local},
      {"nheads-local", &params.nheads_local}, {"householder", &params.householder}, {"tp", &params.tp},
      {"gtp", &params.gtp}, {"pad-align", &params.pad_align}, {"cols", &params.cols}};
  for (const auto& [flag, field] : ints) {
    auto value = args->int_value(flag, *field);
    if (!value.ok()) {
      std::cerr << "ERROR: " << to_string(value.error().kind) << ": " << value.error().message << "\n";
      return kExitBadInput;
    }
    *field = *value;
  }
  if (auto key = args->value("key")) params.key = *key;
  const std::string design = args->value("design").value_or("shard-split");
  if (design != "gather" && design != "shard-split") {
    std::cerr << "ERROR: invalid_argument: --design must be gather or shard-split, got '" << design << "'\n";
    return kExitBadInput;
  }
  params.design = design == "gather" ? GtpSaveDesign::gather : GtpSaveDesign::shard_split;
  auto report = report::build_layout_report(params);
  if (!report.ok()) {
    std::cerr << "ERROR: " << to_string(report.error().kind) << ": " << report.error().message << "\n";
    return kExitBadInput;
  }
  if (auto svg_path = args->value("svg")) {
    std::ofstream svg(*svg_path);
    svg << report::layout_report_svg(*report);
    if (!svg) {
      std::cerr << "ERROR: harness_error: cannot write " << *svg_path << "\n";
      return kExitHarnessError;
    }
  }
  if (args->has("json")) std::cout << report::layout_report_json(*report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  else std::cout << report::layout_report_text(*report);
  return report->integrity.ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace ih::cli
