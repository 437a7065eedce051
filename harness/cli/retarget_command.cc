// `interop-harness retarget --pattern P`: sharded-state-dict JSON in, retargeted JSON out.
#include <cstdio>
#include <iostream>
#include <vector>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "seam/reference_implementation.h"

namespace ih::cli {
namespace {

constexpr std::int64_t kDefaultMaxInputBytes = std::int64_t{1} << 30;
constexpr std::int64_t kMaxInputBytesLimit = std::int64_t{64} << 30;

const CommandSpec kRetarget = {
    "interop-harness retarget --pattern P [--max-input-bytes N] < state_dict.json  (format: docs/state-dict-json.md)",
    {{"pattern", true, "the hybrid run's layer pattern"},
     {"pretty", false, "indent the output"},
     {"max-input-bytes", true,
      "refuse a larger input, 1.." + std::to_string(kMaxInputBytesLimit) + " (default 1 GiB)"}}};

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
  const auto args = open_command(argv, kRetarget, exit_code);
  if (!args) return exit_code;
  const auto fail = [](const Error& error) { return report_error(error, kExitBadInput); };
  if (!args->value("pattern"))
    return fail(make_error(ErrorKind::invalid_argument, "--pattern is required (see --help)"));
  const auto limit = args->int_value("max-input-bytes", kDefaultMaxInputBytes, 1, kMaxInputBytesLimit);
  if (!limit.ok()) return fail(limit.error());
  const auto input = read_stdin(*limit);
  if (!input.ok()) return report_error(input.error());
  // A user's state dict is read strictly (docs/state-dict-json.md, "Strict input").
  auto document = json::parse_without_duplicate_keys(*input, "entries");
  if (!document.ok()) return fail(document.error());
  if (const Status strict = json::check_state_dict_input(*document, "entries"); !strict.ok())
    return fail(strict.error());
  auto entries = json::entries_from_json(*document);
  if (!entries.ok()) return fail(entries.error());
  ReferenceImplementation reference;
  auto retargeted = reference.retarget(*args->value("pattern"), *entries);
  if (!retargeted.ok()) return fail(retargeted.error());
  const json::Json out = json::entries_to_json(*retargeted);
  std::cout << (args->has("pretty") ? out.dump(2, ' ', false, json::Json::error_handler_t::replace) : json::dump(out))
            << "\n";
  return kExitOk;
}

}  // namespace ih::cli
