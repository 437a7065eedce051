#include "harness/megatron/adapter_mutants.h"

#include <filesystem>

#include "harness/install/data_dir.h"
#include "harness/process/child_run.h"

namespace ih {

Result<std::vector<std::string>> adapter_mutant_names(const MegatronOptions& options) {
  const std::string python = options.python.empty() ? default_megatron_python() : options.python;
  const std::string adapter =
      options.adapter.empty() ? (install::adapter_dir() / "adapter.py").string() : options.adapter;
  for (const std::string& needed : {python, adapter})
    if (!std::filesystem::exists(needed))
      return make_error(seam_kind::harness_error, "cannot list the adapter's mutants: no " + needed);
  std::vector<std::string> names;
  constexpr auto kListingTimeout = std::chrono::seconds(60);  // Python and the table, no torch: under a second
  IH_TRY_ASSIGN(listed, run_child({python, adapter, "--mutant-names"}, kListingTimeout, [&](const std::string& line) {
                  if (!line.empty()) names.push_back(line);
                }));
  if (listed.timed_out || listed.signaled || listed.exit_code != 0 || names.empty())
    return make_error(seam_kind::harness_error,
                      "cannot list the adapter's mutants (" + adapter + " --mutant-names): " + listed.stderr_tail);
  return names;
}

}  // namespace ih
