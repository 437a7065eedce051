// `interop-harness layout gdp|mamba ...`: which rank saves which rows of an in_proj weight.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/report/layout_report.h"

namespace ih::cli {
namespace {

// Limits of `layout` (docs/cli.md): the report builds and lists every (t, g) rank's pieces.
constexpr std::int64_t kMaxLayoutRanks = 4096;                  // T, G and T*G
constexpr std::int64_t kMaxLayoutRows = std::int64_t{1} << 40;  // each size, pad alignment and column count
constexpr std::int64_t kMaxHouseholder = 64;

}  // namespace

int layout_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {{"d-inner-local", true, "TP-local d_inner D"},
                                       {"group-state-local", true, "TP-local ngroups*d_state S"},
                                       {"nheads-local", true, "TP-local heads H"},
                                       {"householder", true, "GDP Householder reflections M (default 3)"},
                                       {"tp", true, "tensor-parallel size T"},
                                       {"gtp", true, "GTP size G (1: the non-GTP split factory)"},
                                       {"pad-align", true, "pad_for_alignment p"},
                                       {"cols", true, "columns C"},
                                       {"key", true, "factory key (default decoder.layers.0.mixer.in_proj.weight)"},
                                       {"design", true, "gather or shard-split (default)"},
                                       {"json", false, "print the JSON object"},
                                       {"svg", true, "also write a picture of the tiling to FILE"},
                                       {"help", false, "show this help"}};
  const std::string family = argv.empty() ? "" : argv[0];
  auto args = parse_args(std::vector<std::string>(argv.begin() + (argv.empty() ? 0 : 1), argv.end()), flags);
  if ((family != "gdp" && family != "mamba") || !args.ok() || args->has("help") || !args->positionals.empty()) {
    if (args.ok() && args->has("help")) {
      std::cout << usage(
          "interop-harness layout gdp|mamba --d-inner-local D --group-state-local S --nheads-local H "
          "[--householder M] --tp T --gtp G --pad-align P --cols C [--key K] [--design D] [--json] [--svg FILE]",
          flags);
      return kExitOk;
    }
    std::cerr
        << "ERROR: invalid_argument: " << (args.ok() ? "missing or unexpected arguments" : args.error().message) << "\n"
        << usage(
               "interop-harness layout gdp|mamba --d-inner-local D --group-state-local S --nheads-local H "
               "[--householder M] --tp T --gtp G --pad-align P --cols C [--key K] [--design D] [--json] [--svg FILE]",
               flags);
    return kExitBadInput;
  }
  report::LayoutParams params;
  params.family = family == "gdp" ? report::MixerFamily::gdp : report::MixerFamily::mamba;
  // Every size is required (no silent default), and bounded so that a typo cannot make the report
  // list billions of pieces (docs/cli.md, "Limits").
  struct IntFlag {
    const char* name;
    std::int64_t* field;
    bool required;
    std::int64_t min, max;
  };
  const IntFlag ints[] = {{"d-inner-local", &params.d_inner_local, true, 0, kMaxLayoutRows},
                          {"group-state-local", &params.group_state_local, true, 0, kMaxLayoutRows},
                          {"nheads-local", &params.nheads_local, true, 0, kMaxLayoutRows},
                          {"householder", &params.householder, false, 0, kMaxHouseholder},
                          {"tp", &params.tp, true, 1, kMaxLayoutRanks},
                          {"gtp", &params.gtp, true, 1, kMaxLayoutRanks},
                          {"pad-align", &params.pad_align, true, 0, kMaxLayoutRows},
                          {"cols", &params.cols, true, 1, kMaxLayoutRows}};
  for (const IntFlag& flag : ints) {
    if (flag.required && !args->value(flag.name)) {
      std::cerr << "ERROR: invalid_argument: --" << flag.name << " is required (no default; see --help)\n";
      return kExitBadInput;
    }
    auto value = args->int_value(flag.name, *flag.field);
    if (value.ok() && (*value < flag.min || *value > flag.max))
      value = make_error(ErrorKind::invalid_argument, "--" + std::string(flag.name) + " " + std::to_string(*value) +
                                                          " is outside [" + std::to_string(flag.min) + ", " +
                                                          std::to_string(flag.max) + "] (docs/cli.md, Limits)");
    if (!value.ok()) {
      std::cerr << "ERROR: " << to_string(value.error().kind) << ": " << value.error().message << "\n";
      return kExitBadInput;
    }
    *flag.field = *value;
  }
  if (params.tp * params.gtp > kMaxLayoutRanks) {
    std::cerr << "ERROR: invalid_argument: --tp " << params.tp << " x --gtp " << params.gtp << " = "
              << params.tp * params.gtp << " ranks, above the report's limit of " << kMaxLayoutRanks
              << " (docs/cli.md, Limits)\n";
    return kExitBadInput;
  }
  const auto svg_path = args->value("svg");
  if (svg_path) {  // refuse before any work, and say why
    const std::filesystem::path parent = std::filesystem::path(*svg_path).parent_path();
    std::error_code ec;
    if (!parent.empty() && !std::filesystem::is_directory(parent, ec)) {
      std::cerr << "ERROR: invalid_argument: --svg " << *svg_path << ": the folder " << parent.string()
                << " does not exist (create it first)\n";
      return kExitBadInput;
    }
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
  if (svg_path) {
    std::ofstream svg(*svg_path);
    if (!svg) {
      std::cerr << "ERROR: invalid_argument: --svg " << *svg_path
                << ": cannot open for writing: " << std::strerror(errno) << "\n";
      return kExitBadInput;
    }
    svg << report::layout_report_svg(*report);
    svg.close();
    if (!svg) {
      std::cerr << "ERROR: harness_error: --svg " << *svg_path << ": write failed: " << std::strerror(errno) << "\n";
      return kExitHarnessError;
    }
  }
  if (args->has("json"))
    std::cout << report::layout_report_json(*report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << report::layout_report_text(*report);
  return report->integrity.ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace ih::cli
