// Fuzzes the CLI's argument parser (harness/cli/args.h) with argv words separated by '\0': any
// words give a typed error or a parse whose flags, written back as argv, parse to the same flags.
// Links args.cc and the model only (no harness, no subprocesses).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "harness/cli/args.h"
#include "models/text.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  using namespace ih::cli;
  static const std::vector<FlagSpec> flags = {{"json", false, "switch"},
                                              {"pattern", true, "value"},
                                              {"gpt-layers", true, "integer"},
                                              {"help", false, "switch"}};
  const std::vector<std::string> argv = ih::split(std::string_view(reinterpret_cast<const char*>(data), size), '\0');
  const auto parsed = parse_args(argv, flags);
  if (!parsed.ok()) return 0;
  (void)parsed->int_value("gpt-layers", 0);  // any text: a number or a typed error
  std::vector<std::string> again;
  for (const std::string& s : parsed->switches) again.push_back("--" + s);
  for (const auto& [name, value] : parsed->values) again.push_back("--" + name + "=" + value);
  const auto reparsed = parse_args(again, flags);
  IH_FUZZ_CHECK(reparsed.ok(), "the parsed flags, written back, parse");
  IH_FUZZ_CHECK(reparsed->values == parsed->values, "values round-trip");
  for (const std::string& s : parsed->switches) IH_FUZZ_CHECK(reparsed->has(s), "switches round-trip");
  return 0;
}
