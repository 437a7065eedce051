// `interop-harness retarget --pattern P`: sharded-state-dict JSON in, retargeted JSON out.
#include <iostream>
#include <iterator>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "seam/reference_implementation.h"

namespace ih::cli {
namespace {

const CommandSpec kRetarget = {
    "interop-harness retarget --pattern P < state_dict.json  (format: docs/state-dict-json.md)",
    {{"pattern", true, "the hybrid run's layer pattern"}, {"pretty", false, "indent the output"}}};

}  // namespace

int retarget_command(const std::vector<std::string>& argv) {
  int exit_code = kExitOk;
  const auto args = open_command(argv, kRetarget, exit_code);
  if (!args) return exit_code;
  const auto fail = [](const Error& error) { return report_error(error, kExitBadInput); };
  if (!args->value("pattern"))
    return fail(make_error(ErrorKind::invalid_argument, "--pattern is required (see --help)"));
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  auto document = json::parse(input);
  if (!document.ok()) return fail(document.error());
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
