// `interop-harness layout gdp|mamba ...`: which rank saves which rows of an in_proj weight.
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>

#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "harness/cli/output_places.h"
#include "harness/report/layout_report.h"

namespace ih::cli {
namespace {

// Limits of `layout` (docs/cli.md): the report builds and lists every (t, g) rank's pieces.
constexpr std::int64_t kMaxLayoutRanks = 4096;                  // T, G and T*G
constexpr std::int64_t kMaxLayoutRows = std::int64_t{1} << 40;  // each size, pad alignment and column count
constexpr std::int64_t kMaxHouseholder = 64;

const CommandSpec kLayout = {
    "interop-harness layout gdp|mamba --d-inner-local D --group-state-local S --nheads-local H "
    "[--householder M] --tp T --gtp G --pad-align P --cols C [--key K] [--design D] [--json] [--svg FILE]",
    {{"d-inner-local", true, "TP-local d_inner D"},
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
     {"svg", true, "also write a picture of the tiling to FILE"}},
    1,
    1};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

}  // namespace

int layout_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kLayout, exit_code);
  if (!args) return exit_code;
  const std::string family = args->positionals[0];
  if (family != "gdp" && family != "mamba")
    return bad_input("layout takes gdp or mamba, got '" + family + "' (see --help)");
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
    if (flag.required && !args->value(flag.name))
      return bad_input("--" + std::string(flag.name) + " is required (no default; see --help)");
    const auto value = args->int_value(flag.name, *flag.field, flag.min, flag.max);
    if (!value.ok()) return bad_input(value.error().message + " (docs/cli.md, Limits)");
    *flag.field = *value;
  }
  if (params.tp * params.gtp > kMaxLayoutRanks)
    return bad_input("--tp " + std::to_string(params.tp) + " x --gtp " + std::to_string(params.gtp) + " = " +
                     std::to_string(params.tp * params.gtp) + " ranks, above the report's limit of " +
                     std::to_string(kMaxLayoutRanks) + " (docs/cli.md, Limits)");
  const auto svg_path = args->value("svg");
  if (svg_path) {  // refuse before any work, and say why
    const Status writable = check_output_file("svg", *svg_path);
    if (!writable.ok()) return report_error(writable.error(), kExitBadInput);
  }
  if (auto key = args->value("key")) params.key = *key;
  const std::string design = args->value("design").value_or("shard-split");
  if (design != "gather" && design != "shard-split")
    return bad_input("--design must be gather or shard-split, got '" + design + "'");
  params.design = design == "gather" ? GtpSaveDesign::gather : GtpSaveDesign::shard_split;
  auto report = report::build_layout_report(params);
  if (!report.ok()) return report_error(report.error(), kExitBadInput);
  // A picture that cannot be written still leaves the table (or JSON) on stdout; the exit says it was lost.
  std::string svg_failure;
  if (svg_path) {
    std::ofstream svg(*svg_path);
    if (svg) svg << report::layout_report_svg(*report);
    if (svg) svg.close();
    if (!svg) svg_failure = "--svg " + *svg_path + ": write failed: " + std::strerror(errno);
  }
  if (args->has("json"))
    std::cout << report::layout_report_json(*report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << report::layout_report_text(*report);
  if (!svg_failure.empty()) return report_error(make_error(seam_kind::harness_error, svg_failure), kExitHarnessError);
  return report->integrity.ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace ih::cli
