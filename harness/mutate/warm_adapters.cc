#include "harness/mutate/warm_adapters.h"

#include <cstdlib>
#include <utility>

#include "codec/json_codec.h"
#include "harness/install/data_dir.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/process/run_scope.h"

namespace ih::mutate {
namespace {

using std::chrono::milliseconds;

// The server answers its first status once torch is imported (seconds; minutes on a loaded machine), later ones
// at once.
constexpr milliseconds kStartTimeout{300'000}, kStatusTimeout{30'000};

Result<json::Json> status_of(LineSubprocess& server, milliseconds timeout) {
  IH_TRY_ASSIGN(line, server.request("status", timeout));
  IH_TRY_ASSIGN(status, json::parse(line));
  if (!status.is_object() || !status.value("ok", false))
    return make_error(seam_kind::harness_error, "the fork server answered " + line);
  return status;
}

}  // namespace

WarmAdapters WarmAdapters::start(bool cold, const std::string& tree, std::ostream& progress) {
  unsetenv(kForkServerVariable);
  if (cold) {
    progress << "INFO: cold adapters (--cold-adapters): each adapter imports torch, the adapter and Megatron itself\n";
    return WarmAdapters(std::nullopt);
  }
  const std::string socket = temp_dir() + "/adapter-fork.sock";
  auto server = LineSubprocess::start(
      {default_megatron_python(), (install::adapter_dir() / "adapter.py").string(), "--fork-server", socket, tree});
  auto status = server.ok() ? status_of(*server, kStartTimeout) : Result<json::Json>(server.error());
  if (!status.ok()) {
    progress << "WARNING: the adapters' fork server did not start (" << status.error().message
             << (server.ok() ? "; its stderr: " + server->stderr_tail(1000) : std::string())
             << "): every adapter starts cold\n";
    return WarmAdapters(std::nullopt);
  }
  setenv(kForkServerVariable, socket.c_str(), 1);
  progress << "INFO: warm adapters: a fork server with torch, the adapter and " << status->value("preloaded", 0)
           << " modules from outside Megatron that its import loads imported (" << status->value("warm_seconds", 0.0)
           << " s) starts each adapter, which imports Megatron itself from its own tree (the mutant's overlay)\n";
  return WarmAdapters(std::move(*server));
}

WarmAdapters::WarmAdapters(WarmAdapters&& other) noexcept
    : server_(std::exchange(other.server_, std::nullopt)), summary_(std::move(other.summary_)) {}

WarmAdapters::~WarmAdapters() {
  if (server_) unsetenv(kForkServerVariable);
}

void WarmAdapters::check(std::ostream& progress) {
  if (!server_) return;
  const auto status = status_of(*server_, kStatusTimeout);
  if (status.ok()) {
    summary_ = "warm adapters: " + std::to_string(status->value("started", 0)) + " started by the fork server, " +
               std::to_string(status->value("cold", 0)) + " cold" +
               (status->contains("last_cold") && (*status)["last_cold"].is_string()
                    ? " (the last because " + (*status)["last_cold"].get<std::string>() + ")"
                    : std::string());
    return;
  }
  progress << "WARNING: the adapters' fork server stopped (" << status.error().message
           << "): the remaining adapters start cold\n";
  summary_ += (summary_.empty() ? "" : "; ") + std::string("the fork server stopped, the rest started cold");
  unsetenv(kForkServerVariable);
  server_.reset();
}

}  // namespace ih::mutate
