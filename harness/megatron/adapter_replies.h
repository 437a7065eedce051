// Reading the adapter's reply lines (docs/adapter-protocol.md, "Framing" and "Error kinds"): every
// reply becomes its result or an error typed by who broke, so a check never blames Megatron for the
// harness (a protocol break, an adapter bug, a request the adapter could not read) or passes without
// an answer.
#pragma once

#include <string_view>

#include "codec/json_codec.h"
#include "seam/error_kinds.h"

namespace ih {

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

}  // namespace ih
