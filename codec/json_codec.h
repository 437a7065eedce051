// JSON forms of the model's values, shared by the CLI and the Megatron adapter client.
// Parsing is strict: a wrong type, a missing field or a non-64-bit integer is a bad_json
// error naming the entry and field.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "models/flat_state.h"
#include "models/gpt_layer_maps.h"
#include "models/model_state_dict.h"
#include "seam/error_kinds.h"

namespace ih::json {

using Json = nlohmann::ordered_json;

/// Serializes with invalid UTF-8 replaced, so an odd byte in a pattern never throws.
std::string dump(const Json& value);
/// The deepest nesting of lists and objects parse accepts (Megatron state dicts nest a few levels).
inline constexpr std::size_t kMaxJsonDepth = 256;
/// Parses a document; syntax errors and nesting deeper than kMaxJsonDepth become bad_json.
Result<Json> parse(std::string_view text);

/// parse, also refusing an object that gives a key twice (the parser would keep the last one
/// silently); the error names the place from `root`, e.g. `entries[3].entry.global_shape`.
Result<Json> parse_without_duplicate_keys(std::string_view text, const std::string& root);

/// The checks a state dict from a user gets before it is decoded (docs/state-dict-json.md,
/// "Strict input"): no field the format does not define, no negative shape, offset, replica id or
/// data block, no shape whose element count or offset + length overflows 64 bits. Errors are
/// bad_json naming the place from `root`, e.g. `entries[3].entry.global_shape[1]`.
Status check_state_dict_input(const Json& document, const std::string& root);

/// {"pattern", "ok": true, "num_gpt_layers", "attention_to_gpt", "mlp_to_gpt", "fresh_init"} or
/// {"pattern", "ok": false, "error": {"kind", "message"}} (docs/cli.md).
Json layer_maps_to_json(std::string_view pattern, const Result<GptCompatLayerMaps>& maps);
/// The inverse of layer_maps_to_json for ok answers (used to read the adapter's replies).
Result<GptCompatLayerMaps> layer_maps_from_json(const Json& object);

/// {"kind", "message"}.
Json error_to_json(const Error& error);
/// Reads {"kind", "message"}; an unknown kind keeps its text in the message.
Error error_from_json(const Json& object);

/// One state-dict entry: {"kind": "tensor"|"object"|"local"|"plain", ...} (docs/state-dict-json.md).
Json leaf_to_json(const Leaf& leaf);
Result<Leaf> leaf_from_json(const Json& object);

/// A list of {"path", "entry"}.
Json entries_to_json(const std::vector<FlatEntry>& entries);
Result<std::vector<FlatEntry>> entries_from_json(const Json& document);

/// An FSDP-style tree: JSON objects are dicts, arrays lists, scalars plain leaves.
Json tree_to_json(const StateNode& tree);
StateNode tree_from_json(const Json& value);

/// A `model dump` configuration and rank as the adapter's model_dump request (docs/adapter-protocol.md):
/// the model, the layout's sizes (dp included) and every dimension, so both sides build the same model.
Json model_dump_spec_to_json(const ModelDumpSpec& spec, std::int64_t rank);
/// entries_to_json without tensor data: what `model dump --json` prints (docs/state-dict-json.md).
Json dump_entries_to_json(const std::vector<FlatEntry>& entries);

}  // namespace ih::json
