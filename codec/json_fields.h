// Field readers shared by the codec's translation units (not part of its interface): each names
// the entry and field in its bad_json error.
#pragma once

#include <string>

#include "codec/json_codec.h"

namespace ih::json::detail {

/// parse (its depth limit included) with a parser callback that sees every value as it is read.
Result<Json> parse_tracked(std::string_view text, const Json::parser_callback_t& callback);
Error bad(const std::string& where, const std::string& what);
Result<std::int64_t> int_field(const Json& object, const char* field, const std::string& where);
Result<Shape> shape_value(const Json& value, const std::string& where, const char* field);
Result<Shape> shape_field(const Json& object, const char* field, const std::string& where);
Result<std::string> string_field(const Json& object, const char* field, const std::string& where);

}  // namespace ih::json::detail
