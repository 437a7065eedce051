// `interop-harness retarget --pattern P`: sharded-state-dict JSON in, retargeted JSON out.
#include <iostream>
#include <iterator>

#include "codec/json_codec.h"
#include "harness/cli/args.h"
#include "harness/cli/commands.h"
#include "seam/reference_implementation.h"

namespace ih::cli {

int retarget_command(const std::vector<std::string>& argv) {
  const std::vector<FlagSpec> flags = {{"pattern", true, "the hybrid run's layer pattern"},
                                       {"pretty", false, "indent the output"},
                                       {"help", false, "show this help"}};
  auto args = parse_args(argv, flags);
  if (!args.ok() || args->has("help") || !args->value("pattern") || !args->positionals.empty()) {
    if (args.ok() && args->has("help")) {
      std::cout << usage("interop-harness retarget --pattern P < state_dict.json  (format: docs/state-dict-json.md)",
                         flags);
      return kExitOk;
    }
    std::cerr << "ERROR: invalid_argument: " << (args.ok() ? "missing or unexpected arguments" : args.error().message)
              << "\n"
              << usage("interop-harness retarget --pattern P < state_dict.json  (format: docs/state-dict-json.md)",
                       flags);
    return kExitBadInput;
  }
  const std::string input((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
  const auto fail = [](const Error& error) {
    std::cerr << "ERROR: " << to_string(error.kind) << ": " << error.message << "\n";
    return kExitBadInput;
  };
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
