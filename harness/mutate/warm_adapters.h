// A campaign's warm adapter: the Megatron adapter's fork server (adapter.py --fork-server), started once per
// campaign and named to the gate children through the environment, so each adapter start forks a process that
// has torch and the adapter imported already and imports Megatron from its mutant's overlay
// (docs/guides/mutation-testing.md, "How a mutant runs").
#pragma once

#include <optional>
#include <ostream>
#include <string>

#include "harness/process/line_subprocess.h"

namespace ih::mutate {

/// The variable naming the fork server's socket to adapter.py (megatron_adapter/fork_client.py's ENV).
inline constexpr const char* kForkServerVariable = "IH_ADAPTER_FORK_SERVER";

class WarmAdapters {
 public:
  /// Starts the fork server, warmed with what importing `tree`'s Megatron loads from outside it, and sets
  /// kForkServerVariable; with `cold` (mutate --cold-adapters), or where it cannot start, says so on `progress`
  /// and every adapter starts cold (the variable unset).
  static WarmAdapters start(bool cold, const std::string& tree, std::ostream& progress);
  WarmAdapters(WarmAdapters&& other) noexcept;
  WarmAdapters& operator=(WarmAdapters&&) = delete;
  ~WarmAdapters();

  /// After a run: whether the server still answers (its counts then go into summary()); when it stopped, says
  /// so once and unsets the variable (the rest start cold).
  void check(std::ostream& progress);
  /// How many adapter starts it served warm and how many went cold (and why the last did), as of the last
  /// check(); empty when cold from the start.
  const std::string& summary() const { return summary_; }

 private:
  explicit WarmAdapters(std::optional<LineSubprocess> server) : server_(std::move(server)) {}
  std::optional<LineSubprocess> server_;
  std::string summary_;
};

}  // namespace ih::mutate
