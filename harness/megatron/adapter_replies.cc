#include "harness/megatron/adapter_replies.h"

#include <array>
#include <string>

namespace ih {
namespace {

/// The adapter's own kinds that say the harness broke, not Megatron (docs/adapter-protocol.md).
constexpr std::array<std::string_view, 7> kHarnessKinds = {"internal",        "bad_request",   "protocol_mismatch",
                                                           "megatron_import", "mutant_failed", "already_mutated",
                                                           "unknown_mutant"};
/// The adapter's own limits: the operation cannot run here at this size.
constexpr std::array<std::string_view, 1> kLimitKinds = {"too_large"};

bool among(std::string_view kind, const auto& kinds) {
  for (std::string_view k : kinds)
    if (k == kind) return true;
  return false;
}

}  // namespace

Error protocol_error(const std::string& what, std::string_view line) {
  constexpr std::size_t kShown = 300;
  return make_error(seam_kind::harness_error, "adapter protocol: " + what + " in reply '" +
                                                  std::string(line.substr(0, kShown)) +
                                                  (line.size() > kShown ? "...'" : "'"));
}

Result<json::Json> adapter_reply(std::string_view line) {
  auto reply = json::parse(line);
  if (!reply.ok()) return protocol_error("a line that is not JSON", line);
  if (!reply->is_object() || !reply->contains("ok") || !(*reply)["ok"].is_boolean())
    return protocol_error("no boolean \"ok\"", line);
  return reply;
}

Result<json::Json> adapter_result(const json::Json& reply) {
  if (reply["ok"].get<bool>()) {
    if (!reply.contains("result")) return protocol_error("no \"result\"", json::dump(reply));
    return reply["result"];
  }
  const json::Json fault = reply.value("error", json::Json());
  if (!fault.is_object() || !fault.contains("kind") || !fault["kind"].is_string())
    return protocol_error("an error without a kind", json::dump(reply));
  Error error = json::error_from_json(fault);
  const std::string kind = fault["kind"].get<std::string>();
  if (reply.value("unsupported", false) || among(kind, kLimitKinds)) error.kind = seam_kind::unsupported;
  if (among(kind, kHarnessKinds)) error.kind = seam_kind::harness_error;
  return error;
}

}  // namespace ih
