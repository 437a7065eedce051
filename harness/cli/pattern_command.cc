// `interop-harness pattern maps|make|check`: layer maps, pattern construction, pairing checks.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <limits>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "models/gpt_layer_maps.h"
#include "models/text.h"

namespace ih::cli {
namespace {

// Limits (docs/cli.md, "Limits"): far above any real model, low enough that a typo cannot ask
// for gigabytes of pattern text or millions of printed stages.
constexpr std::int64_t kMaxGptLayers = 100'000;
constexpr std::int64_t kMaxPatternChars = std::int64_t{1} << 24;
constexpr std::int64_t kMaxPipelineRanks = 4096;

const char* const kMapsSynopsis =
    "interop-harness pattern maps [--json] PATTERN... ('-' reads one pattern per line from stdin)";
const char* const kMakeSynopsis = "interop-harness pattern make --gpt-layers N --block BLOCK [--segments S]";
const char* const kCheckSynopsis = "interop-harness pattern check PATTERN [--gpt-layers N] [--pp P]";

/// Each subcommand's options, filled from its flag table (defaults here).
struct MapsOptions : GivenFlags {
  bool json = false;
};
struct MakeOptions : GivenFlags {
  std::int64_t gpt_layers = 0, segments = 1;
  std::optional<std::string> block;
};
struct CheckOptions : GivenFlags {
  std::int64_t gpt_layers = 0, pp = 1;
};

constexpr bool kRequired = true;
// make's counts are checked against the block (a multiple of its GPT layers, dividing its blocks)
// and the printed pattern's length, with messages that say which; the table takes any integer.
constexpr std::int64_t kAnyLow = std::numeric_limits<std::int64_t>::min();
constexpr std::int64_t kAnyHigh = std::numeric_limits<std::int64_t>::max();

const std::vector<Flag<MapsOptions>> kMapsFlags = {
    {"json", &MapsOptions::json, "one JSON object per pattern (docs/cli.md)"}};
const std::vector<Flag<MakeOptions>> kMakeFlags = {
    {"gpt-layers", &MakeOptions::gpt_layers, "number of GPT layers N", kAnyLow, kAnyHigh, kRequired},
    {"block", &MakeOptions::block, "the pattern of one GPT layer (or of k layers), e.g. 'M*-'", 0, 0, kRequired},
    {"segments", &MakeOptions::segments, "pipeline segments S; S must divide the block count", kAnyLow, kAnyHigh}};
const std::vector<Flag<CheckOptions>> kCheckFlags = {
    {"gpt-layers", &CheckOptions::gpt_layers, "the GPT checkpoint's layer count N, 0.." + std::to_string(kMaxGptLayers),
     0, kMaxGptLayers},
    {"pp", &CheckOptions::pp, "pipeline-parallel size P, 1.." + std::to_string(kMaxPipelineRanks), 1,
     kMaxPipelineRanks}};

int bad_input(ErrorKind kind, const std::string& message) {
  return report_error(make_error(kind, message), kExitBadInput);
}

std::string pairs_text(const pattern::IndexMap& map) {
  std::string out;
  for (const auto& [hybrid, gpt] : map)
    out += (out.empty() ? "" : " ") + std::to_string(hybrid) + "->" + std::to_string(gpt);
  return out;
}

std::string list_text(const std::vector<std::int64_t>& values) {
  std::string out;
  for (const std::int64_t v : values) out += (out.empty() ? "" : " ") + std::to_string(v);
  return out.empty() ? "-" : out;
}

/// Reads the patterns: positionals, with "-" meaning one pattern per stdin line. A closed or unreadable
/// standard input, or no pattern at all, is invalid_argument: never a run that checked nothing.
Result<std::vector<std::string>> collect_patterns(const std::vector<std::string>& positionals) {
  std::vector<std::string> patterns;
  for (const std::string& arg : positionals) {
    if (arg != "-") {
      patterns.push_back(arg);
      continue;
    }
    if (fcntl(STDIN_FILENO, F_GETFD) < 0)
      return make_error(ErrorKind::invalid_argument, "'-' reads patterns from standard input, which is closed");
    std::string line;
    while (std::getline(std::cin, line)) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      patterns.push_back(line);
    }
    if (std::cin.bad() || std::ferror(stdin))
      return make_error(ErrorKind::invalid_argument,
                        std::string("cannot read patterns from standard input: ") + std::strerror(errno));
  }
  if (patterns.empty()) return make_error(ErrorKind::invalid_argument, "no pattern: standard input ('-') had no line");
  return patterns;
}

int maps_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args =
      open_command(argv, kMapsSynopsis, kMapsFlags, exit_code, {1, std::numeric_limits<std::size_t>::max()});
  if (!args) return exit_code;
  const auto patterns = collect_patterns(args->positionals);
  if (!patterns.ok()) return report_error(patterns.error(), kExitBadInput);
  bool all_ok = true;
  for (const std::string& text : *patterns) {
    const auto maps = gpt_compatible_layer_maps(std::string_view(text));
    all_ok = all_ok && maps.ok();
    if (!maps.ok())  // errors on stderr in both forms; the JSON object stays the documented stdout line
      std::cerr << "ERROR: " << to_string(maps.error().kind) << ": pattern " << py_repr(text) << ": "
                << maps.error().message << "\n";
    if (args->json) {
      std::cout << json::dump(json::layer_maps_to_json(text, maps)) << "\n";
    } else if (maps.ok()) {
      std::cout << "pattern " << text << "\n  gpt layers  " << maps->num_gpt_layers << "\n  attention   "
                << pairs_text(maps->attention_to_gpt) << "\n  mlp         " << pairs_text(maps->mlp_to_gpt)
                << "\n  fresh init  " << list_text(maps->fresh_init) << "\n";
    }
  }
  return all_ok ? kExitOk : kExitBadInput;
}

int make_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kMakeSynopsis, kMakeFlags, exit_code);
  if (!args) return exit_code;
  const std::int64_t layers = args->gpt_layers, segments = args->segments;
  const std::string& block = *args->block;
  const auto block_maps = gpt_compatible_layer_maps(std::string_view(block));
  std::string problem;
  if (layers > kMaxGptLayers)
    problem = "--gpt-layers " + std::to_string(layers) + " is above the limit of " + std::to_string(kMaxGptLayers) +
              " (docs/cli.md, Limits)";
  else if (!block_maps.ok())
    problem = "--block '" + block + "': " + std::string(to_string(block_maps.error().kind)) + ": " +
              block_maps.error().message;
  else if (block.find(pattern::kPipe) != std::string::npos || block.find('/') != std::string::npos)
    problem = "--block must not contain '|' or '/'; use --segments";
  else if (layers < 1 || layers % block_maps->num_gpt_layers != 0)
    problem = "--gpt-layers " + std::to_string(layers) + " is not a positive multiple of the block's " +
              std::to_string(block_maps->num_gpt_layers) + " GPT layer(s)";
  else if (segments < 1 || (layers / block_maps->num_gpt_layers) % segments != 0)
    problem = "--segments " + std::to_string(segments) + " does not divide the " +
              std::to_string(layers / block_maps->num_gpt_layers) + " blocks";
  const std::int64_t blocks_per_segment = problem.empty() ? layers / block_maps->num_gpt_layers / segments : 0;
  if (problem.empty() &&
      blocks_per_segment * segments * static_cast<std::int64_t>(block.size()) + segments > kMaxPatternChars)
    problem =
        "the pattern would be longer than " + std::to_string(kMaxPatternChars) + " characters (docs/cli.md, Limits)";
  if (!problem.empty()) return bad_input(ErrorKind::invalid_argument, problem);
  std::string out;
  for (std::int64_t s = 0; s < segments; ++s) {
    if (s) out += pattern::kPipe;
    for (std::int64_t b = 0; b < blocks_per_segment; ++b) out += block;
  }
  std::cout << out << "\n";
  return kExitOk;
}

int check_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kCheckSynopsis, kCheckFlags, exit_code, {1, 1});
  if (!args) return exit_code;
  const std::string& text = args->positionals[0];
  const auto counts = pattern::layer_counts(text);
  if (!counts.ok()) return report_error(counts.error(), kExitBadInput);
  // Not given: no layer count to compare (-1); given: a real count (`--gpt-layers -3` paired "yes").
  const std::int64_t gpt_layers = args->has("gpt-layers") ? args->gpt_layers : -1;
  const std::int64_t pp = args->pp;
  const auto count = [&](char c) { return (*counts)[pattern::symbol_index(c)]; };
  const auto parsed = pattern::parse(text).value();
  const std::string main = parsed.main.value_or("");
  const std::int64_t segments = pattern::pipeline_segment_count(main);
  std::cout << "pattern    " << text << "\nlayers     " << pattern::strip_pipes(main).size() << " in " << segments
            << " segment(s)"
            << (parsed.mtp_depth ? " + MTP '" + *parsed.mtp + "' x" + std::to_string(parsed.mtp_depth) : "")
            << "\nattention  " << count('*') << "\nmlp        " << count('-') << " dense, " << count('E') << " MoE"
            << "\nmamba      " << count('M') << "\nother      " << count('G') + count('D') + count('+')
            << " (G, D, +)\n";
  bool ok = true;
  const auto maps = gpt_compatible_layer_maps(std::string_view(text));
  if (!maps.ok()) {
    std::cout << "gpt pairing  NO: " << to_string(maps.error().kind) << ": " << maps.error().message << "\n";
    ok = false;
  } else if (gpt_layers >= 0 && maps->num_gpt_layers != gpt_layers) {
    std::cout << "gpt pairing  NO: the pattern pairs with " << maps->num_gpt_layers << " GPT layers, not " << gpt_layers
              << "\n";
    ok = false;
  } else {
    std::cout << "gpt pairing  yes: one-to-one with a " << maps->num_gpt_layers << "-layer GPT checkpoint\n";
  }
  if (args->has("pp")) {
    for (std::int64_t rank = 0; rank < pp; ++rank) {
      const auto stage = pattern::select_segment(
          main, {rank, pp, segments > pp ? std::optional<std::int64_t>(0) : std::nullopt, {}, {}});
      if (!stage.ok()) {
        std::cout << "pp rank " << rank << "  NO: " << to_string(stage.error().kind) << ": " << stage.error().message
                  << "\n";
        ok = false;
        break;
      }
      std::cout << "pp rank " << rank << "  '" << stage->layers << "' from layer " << stage->offset
                << (segments > pp ? " (first virtual stage of " + std::to_string(segments / pp) + ")" : "") << "\n";
    }
  }
  return ok ? kExitOk : kExitCheckFailed;
}

}  // namespace

int pattern_command(const std::vector<std::string>& args) {
  const std::string sub = args.empty() ? "" : args[0];
  const std::vector<std::string> rest(args.begin() + (args.empty() ? 0 : 1), args.end());
  if (sub == "maps") return maps_command(rest);
  if (sub == "make") return make_command(rest);
  if (sub == "check") return check_command(rest);
  if (sub == "--help" || sub == "-h" || sub == "help") {
    std::cout << "usage: interop-harness pattern maps|make|check ... (--help on each)\n";
    return kExitOk;
  }
  std::cerr << "ERROR: invalid_argument: "
            << (sub.empty() ? "pattern needs a subcommand" : "unknown pattern subcommand '" + sub + "'")
            << "\nusage: interop-harness pattern maps|make|check ... (--help on each)\n";
  return kExitBadInput;
}

}  // namespace ih::cli
