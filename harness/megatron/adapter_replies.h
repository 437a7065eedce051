// Reading the adapter's reply lines (docs/adapter-protocol.md, "Framing" and "Error kinds"): every
// reply becomes its result or an error typed by who broke, so a check never blames Megatron for the
// harness (a protocol break, an adapter bug, a request the adapter could not read) or passes without
// an answer.
#pragma once

#include <string>
#include <string_view>

#include "codec/json_codec.h"
#include "seam/error_kinds.h"

namespace ih {

/// A harness_error naming what broke the protocol, with (the start of) the reply that broke it.
Error protocol_error(const std::string& what, std::string_view reply);

/// One reply line read as a reply: a JSON object with a boolean "ok". Anything else (a stray print,
/// a traceback, a cut line) is harness_error naming the line: the protocol broke.
Result<json::Json> adapter_reply(std::string_view line);

/// What a reply answers: its "result" when ok (harness_error when it has none), else its error,
/// typed by who broke: Megatron's own kinds stay Megatron's (a finding where the reference
/// disagrees); `unsupported` and the adapter's own limits (`too_large`) are unsupported (not run);
/// the adapter kinds that say the harness broke (`internal`, `bad_request`, `protocol_mismatch`,
/// `megatron_import`, `mutant_failed`, `already_mutated`, `unknown_mutant`, `harness_error`) and an
/// error that is not an object with a kind are harness_error (no verdict).
Result<json::Json> adapter_result(const json::Json& reply);

/// An ok reply's result read by `decode` (result -> Result<T>). The adapter said ok, so what the
/// decoding cannot read is the protocol's break, harness_error naming `op`: a field missing or of
/// another type, whether the codec says so (bad_json) or a JSON access throws. Required fields are
/// read with `at`, never defaulted: a reply without them is not an empty answer.
template <class Decode>
auto decode_result(std::string_view op, const json::Json& result, Decode&& decode) -> decltype(decode(result)) {
  try {
    auto out = decode(result);
    if (!out.ok() && out.error().kind == ErrorKind::bad_json)
      return protocol_error(std::string(op) + " result unreadable (" + out.error().message + ")", json::dump(result));
    return out;
  } catch (const nlohmann::json::exception& e) {
    return protocol_error(std::string(op) + " result unreadable (" + e.what() + ")", json::dump(result));
  }
}

}  // namespace ih
