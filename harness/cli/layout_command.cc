// `interop-harness layout gdp|mamba ...`: which rank saves which rows of an in_proj weight.
#include <array>
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

const char* const kLayoutSynopsis =
    "interop-harness layout gdp|mamba --d-inner-local D --group-state-local S --nheads-local H "
    "[--householder M] --tp T --gtp G --pad-align P --cols C [--key K] [--design D] [--json] [--svg FILE]";

constexpr std::array<Named<report::MixerFamily>, 2> kFamilyNames = {
    {{"gdp", report::MixerFamily::gdp}, {"mamba", report::MixerFamily::mamba}}};
constexpr std::array<Named<GtpSaveDesign>, 2> kDesignNames = {
    {{"gather", GtpSaveDesign::gather}, {"shard-split", GtpSaveDesign::shard_split}}};

/// The command's options: the report's parameters (defaults there), filled from kLayoutFlags.
struct LayoutOptions : GivenFlags, report::LayoutParams {
  std::optional<std::string> svg;
  bool json = false;
};

// Every size is required (no silent default), and bounded so that a typo cannot make the report
// list billions of pieces (docs/cli.md, "Limits").
using L = LayoutOptions;
constexpr bool kRequired = true;
const std::vector<Flag<L>> kLayoutFlags = {
    {"d-inner-local", &L::d_inner_local, "TP-local d_inner D", 0, kMaxLayoutRows, kRequired},
    {"group-state-local", &L::group_state_local, "TP-local ngroups*d_state S", 0, kMaxLayoutRows, kRequired},
    {"nheads-local", &L::nheads_local, "TP-local heads H", 0, kMaxLayoutRows, kRequired},
    {"householder", &L::householder, "GDP Householder reflections M (default 3)", 0, kMaxHouseholder},
    {"tp", &L::tp, "tensor-parallel size T", 1, kMaxLayoutRanks, kRequired},
    {"gtp", &L::gtp, "GTP size G (1: the non-GTP split factory)", 1, kMaxLayoutRanks, kRequired},
    {"pad-align", &L::pad_align, "pad_for_alignment p", 0, kMaxLayoutRows, kRequired},
    {"cols", &L::cols, "columns C", 1, kMaxLayoutRows, kRequired},
    {"key", &L::key, "factory key (default decoder.layers.0.mixer.in_proj.weight)"},
    {"design", one_of<L>(&L::design, kDesignNames), "gather or shard-split (default)"},
    {"json", &L::json, "print the JSON object"},
    {"svg", &L::svg, "also write a picture of the tiling to FILE"}};

int bad_input(const std::string& message) {
  return report_error(make_error(ErrorKind::invalid_argument, message), kExitBadInput);
}

}  // namespace

int layout_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  auto args = open_command(argv, kLayoutSynopsis, kLayoutFlags, exit_code, {1, 1});
  if (!args) return exit_code;
  const std::string& family = args->positionals[0];
  const auto named_family = value_named(kFamilyNames, family);
  if (!named_family)
    return bad_input("layout takes " + names_text(kFamilyNames) + ", got '" + family + "' (see --help)");
  report::LayoutParams& params = *args;
  params.family = *named_family;
  if (params.tp * params.gtp > kMaxLayoutRanks)
    return bad_input("--tp " + std::to_string(params.tp) + " x --gtp " + std::to_string(params.gtp) + " = " +
                     std::to_string(params.tp * params.gtp) + " ranks, above the report's limit of " +
                     std::to_string(kMaxLayoutRanks) + " (docs/cli.md, Limits)");
  const auto& svg_path = args->svg;
  if (svg_path) {  // refuse before any work, and say why
    const Status writable = check_output_file("svg", *svg_path);
    if (!writable.ok()) return report_error(writable.error(), kExitBadInput);
  }
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
  if (args->json)
    std::cout << report::layout_report_json(*report).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
              << "\n";
  else
    std::cout << report::layout_report_text(*report);
  if (!svg_failure.empty()) return report_error(make_error(seam_kind::harness_error, svg_failure), kExitHarnessError);
  return report->integrity.ok() ? kExitOk : kExitCheckFailed;
}

}  // namespace ih::cli
