// `interop-harness retarget --pattern P`: sharded-state-dict JSON in, retargeted JSON out.
#include <cstdio>
#include <iostream>
#include <optional>
#include <vector>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "seam/reference_implementation.h"

namespace ih::cli {
namespace {

constexpr std::int64_t kDefaultMaxInputBytes = std::int64_t{1} << 30;
constexpr std::int64_t kMaxInputBytesLimit = std::int64_t{64} << 30;

const char* const kRetargetSynopsis =
    "interop-harness retarget --pattern P [--max-input-bytes N] < state_dict.json  (format: docs/state-dict-json.md)";

/// The command's options, filled from kRetargetFlags (defaults here).
struct RetargetOptions : GivenFlags {
  std::optional<std::string> pattern;
  bool pretty = false;
  std::int64_t max_input_bytes = kDefaultMaxInputBytes;
};

using R = RetargetOptions;
const std::vector<Flag<R>> kRetargetFlags = {
    {"pattern", &R::pattern, "the hybrid run's layer pattern"},
    {"pretty", &R::pretty, "indent the output"},
    {"max-input-bytes", &R::max_input_bytes,
     "refuse a larger input, 1.." + std::to_string(kMaxInputBytesLimit) + " (default 1 GiB)", 1, kMaxInputBytesLimit}};

/// Standard input, refused once it passes `limit` bytes (`retarget < /dev/zero` grew without bound).
Result<std::string> read_stdin(std::int64_t limit) {
  std::string input;
  std::vector<char> chunk(std::size_t{1} << 20);
  for (;;) {
    const std::size_t got = std::fread(chunk.data(), 1, chunk.size(), stdin);
    if (static_cast<std::int64_t>(input.size() + got) > limit)
      return make_error(ErrorKind::invalid_argument, "the input on stdin is larger than --max-input-bytes " +
                                                         std::to_string(limit) + " (docs/cli.md, Limits)");
    input.append(chunk.data(), got);
    if (got < chunk.size()) break;
  }
  if (std::ferror(stdin)) return make_error(seam_kind::harness_error, "cannot read stdin");
  return input;
}

}  // namespace

int retarget_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kRetargetSynopsis, kRetargetFlags, exit_code);
  if (!args) return exit_code;
  const auto fail = [](const Error& error) { return report_error(error, kExitBadInput); };
  if (!args->pattern) return fail(make_error(ErrorKind::invalid_argument, "--pattern is required (see --help)"));
  const auto input = read_stdin(args->max_input_bytes);
  if (!input.ok()) return report_error(input.error());
  // A user's state dict is read strictly (docs/state-dict-json.md, "Strict input").
  auto document = json::parse_without_duplicate_keys(*input, "entries");
  if (!document.ok()) return fail(document.error());
  if (const Status strict = json::check_state_dict_input(*document, "entries"); !strict.ok())
    return fail(strict.error());
  auto entries = json::entries_from_json(*document);
  if (!entries.ok()) return fail(entries.error());
  ReferenceImplementation reference;
  auto retargeted = reference.retarget(*args->pattern, *entries);
  if (!retargeted.ok()) return fail(retargeted.error());
  const json::Json out = json::entries_to_json(*retargeted);
  std::cout << (args->pretty ? out.dump(2, ' ', false, json::Json::error_handler_t::replace) : json::dump(out)) << "\n";
  return kExitOk;
}

}  // namespace ih::cli
