// The codec's core: parsing (with its depth limit), dumping, errors, layer maps and the field
// readers (json_fields.h). State-dict entries and trees are in json_entries.cc.
#include "codec/json_codec.h"

#include <algorithm>
#include <limits>

#include "codec/json_fields.h"

namespace ih::json {
namespace detail {

Error bad(const std::string& where, const std::string& what) {
  return make_error(ErrorKind::bad_json, where + ": " + what);
}

Result<std::int64_t> int_field(const Json& object, const char* field, const std::string& where) {
  if (!object.contains(field)) return bad(where, std::string("missing field \"") + field + "\"");
  const Json& value = object.at(field);
  if (value.is_number_integer() &&
      !(value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
    return value.get<std::int64_t>();
  return bad(where, std::string("field \"") + field + "\" must be a 64-bit integer, got " + dump(value));
}

Result<Shape> shape_value(const Json& value, const std::string& where, const char* field) {
  if (!value.is_array())
    return bad(where, std::string("field \"") + field + "\" must be a list of integers, got " + dump(value));
  Shape out;
  for (std::size_t i = 0; i < value.size(); ++i) {
    const Json& item = value[i];
    if (!item.is_number_integer() ||
        (item.is_number_unsigned() &&
         item.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())))
      return bad(where, std::string("field \"") + field + "\"[" + std::to_string(i) +
                            "] must be a 64-bit integer, got " + dump(item));
    out.push_back(item.get<std::int64_t>());
  }
  return out;
}

Result<Shape> shape_field(const Json& object, const char* field, const std::string& where) {
  if (!object.contains(field)) return bad(where, std::string("missing field \"") + field + "\"");
  return shape_value(object.at(field), where, field);
}

Result<std::string> string_field(const Json& object, const char* field, const std::string& where) {
  if (!object.contains(field)) return bad(where, std::string("missing field \"") + field + "\"");
  if (!object.at(field).is_string()) return bad(where, std::string("field \"") + field + "\" must be a string");
  return object.at(field).get<std::string>();
}

}  // namespace detail
namespace {

using detail::bad;
using detail::int_field;
using detail::shape_field;
using detail::shape_value;

Json index_map_to_json(const pattern::IndexMap& map) {
  Json out = Json::array();
  for (const auto& [hybrid, gpt] : map) out.push_back(Json::array({hybrid, gpt}));
  return out;
}

Result<pattern::IndexMap> index_map_from_json(const Json& object, const char* field) {
  if (!object.contains(field) || !object.at(field).is_array())
    return bad("layer maps", std::string("missing list \"") + field + "\"");
  pattern::IndexMap out;
  for (const Json& pair : object.at(field)) {
    IH_TRY_ASSIGN(values, shape_value(pair, "layer maps", field));
    if (values.size() != 2)
      return bad("layer maps", std::string("\"") + field + "\" items must be [hybrid, gpt] pairs");
    out.emplace_back(values[0], values[1]);
  }
  return out;
}

}  // namespace

std::string dump(const Json& value) { return value.dump(-1, ' ', false, Json::error_handler_t::replace); }

/// The deepest nesting of [ and { outside strings, stopping once past `limit`.
static std::size_t nesting_depth(std::string_view text, std::size_t limit) {
  std::size_t depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
      if (deepest > limit) break;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Result<Json> parse(std::string_view text) { return detail::parse_tracked(text, nullptr); }

Result<Json> detail::parse_tracked(std::string_view text, const Json::parser_callback_t& callback) {
  // The codec walks documents recursively; a bounded depth keeps a hostile document from
  // exhausting the stack (a 50,000-deep list crashed `retarget` before this limit).
  if (nesting_depth(text, kMaxJsonDepth) > kMaxJsonDepth)
    return make_error(ErrorKind::bad_json, "not valid JSON: nested deeper than " + std::to_string(kMaxJsonDepth) +
                                               " levels (the codec's limit, docs/cli.md)");
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const nlohmann::json::exception& e) {
    return make_error(ErrorKind::bad_json, std::string("not valid JSON: ") + e.what());
  }
}

Json error_to_json(const Error& error) {
  return Json{{"kind", std::string(to_string(error.kind))}, {"message", error.message}};
}

Error error_from_json(const Json& object) {
  const std::string kind = object.is_object() && object.contains("kind") && object["kind"].is_string()
                               ? object["kind"].get<std::string>()
                               : "";
  const std::string message = object.is_object() && object.contains("message") && object["message"].is_string()
                                  ? object["message"].get<std::string>()
                                  : dump(object);
  if (const auto known = error_kind_from_name(kind)) return Error{*known, message};
  return Error{ErrorKind::invalid_argument, "[" + kind + "] " + message};
}

Json layer_maps_to_json(std::string_view pattern, const Result<GptCompatLayerMaps>& maps) {
  Json out;
  out["pattern"] = std::string(pattern);
  out["ok"] = maps.ok();
  if (!maps.ok()) {
    out["error"] = error_to_json(maps.error());
    return out;
  }
  out["num_gpt_layers"] = maps->num_gpt_layers;
  out["attention_to_gpt"] = index_map_to_json(maps->attention_to_gpt);
  out["mlp_to_gpt"] = index_map_to_json(maps->mlp_to_gpt);
  out["fresh_init"] = maps->fresh_init;
  return out;
}

Result<GptCompatLayerMaps> layer_maps_from_json(const Json& object) {
  if (!object.is_object() || !object.contains("ok") || !object["ok"].is_boolean())
    return bad("layer maps", "missing \"ok\"");
  if (!object["ok"].get<bool>()) return error_from_json(object.value("error", Json::object()));
  GptCompatLayerMaps out;
  IH_TRY_ASSIGN(attention, index_map_from_json(object, "attention_to_gpt"));
  IH_TRY_ASSIGN(mlp, index_map_from_json(object, "mlp_to_gpt"));
  IH_TRY_ASSIGN(fresh, shape_field(object, "fresh_init", "layer maps"));
  IH_TRY_ASSIGN(layers, int_field(object, "num_gpt_layers", "layer maps"));
  out.attention_to_gpt = std::move(attention);
  out.mlp_to_gpt = std::move(mlp);
  out.fresh_init = std::move(fresh);
  out.num_gpt_layers = layers;
  return out;
}

}  // namespace ih::json
