// Strict reading of a user's state dict (retarget's stdin): repeated keys, unknown fields and
// negative or overflowing sizes are refused with the JSON place they occur at. The decoder itself
// (json_entries.cc) also reads the adapter's replies, so these checks are kept apart from it.
#include <limits>
#include <set>

#include "codec/json_codec.h"
#include "codec/json_fields.h"

namespace ih::json {
namespace {

using detail::bad;

/// One open list or object while parsing: where the parser is inside it, and the keys seen so far.
struct OpenValue {
  bool is_list = false;
  std::size_t index = 0;  // lists: the item being read
  std::string key;        // objects: the field being read
  std::set<std::string> keys;
};

std::string place_of(const std::string& root, const std::vector<OpenValue>& open) {
  std::string out = root;
  for (const OpenValue& v : open) out += v.is_list ? "[" + std::to_string(v.index) + "]" : "." + v.key;
  return out;
}

bool is_integer_in_64_bits(const Json& value) {
  return value.is_number_integer() &&
         !(value.is_number_unsigned() &&
           value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()));
}

Status only_fields(const Json& object, const std::string& where, std::initializer_list<const char*> fields) {
  for (const auto& [name, unused] : object.items()) {
    bool known = false;
    for (const char* field : fields) known = known || name == field;
    if (known) continue;
    std::string list;
    for (const char* field : fields) list += (list.empty() ? "" : ", ") + std::string(field);
    return bad(where + "." + name, "unknown field (this object takes " + list + ")");
  }
  return Ok{};
}

/// A list of sizes or offsets: each a 64-bit integer at least `minimum` (other types are left to
/// the decoder, which names them). Returns the values it could read.
Result<std::vector<std::int64_t>> sizes(const Json& list, const std::string& where, std::int64_t minimum) {
  std::vector<std::int64_t> out;
  if (!list.is_array()) return out;
  for (std::size_t i = 0; i < list.size(); ++i) {
    if (!is_integer_in_64_bits(list[i])) return out;
    const std::int64_t value = list[i].get<std::int64_t>();
    if (value < minimum)
      return bad(where + "[" + std::to_string(i) + "]",
                 "must be at least " + std::to_string(minimum) + ", got " + std::to_string(value));
    out.push_back(value);
  }
  return out;
}

/// The element count of a shape must fit in 64 bits (sizes are non-negative here).
Status count_fits(const std::vector<std::int64_t>& shape, const std::string& where) {
  std::int64_t count = 1;
  for (const std::int64_t size : shape) {
    if (size == 0) return Ok{};
    if (count > std::numeric_limits<std::int64_t>::max() / size)
      return bad(where, "the element count overflows 64 bits");
    count *= size;
  }
  return Ok{};
}

Status check_shape(const Json& object, const char* field, const std::string& where) {
  if (!object.contains(field)) return Ok{};
  IH_TRY_ASSIGN(shape, sizes(object.at(field), where + "." + field, 0));
  return count_fits(shape, where + "." + field);
}

Status check_replica(const Json& object, const std::string& where) {
  if (!object.contains("replica_id")) return Ok{};
  const Json& replica = object.at("replica_id");
  if (replica.is_array()) {
    IH_TRY_STATUS(sizes(replica, where + ".replica_id", 0));
    return Ok{};
  }
  if (is_integer_in_64_bits(replica) && replica.get<std::int64_t>() < 0)
    return bad(where + ".replica_id", "must be at least 0, got " + dump(replica));
  return Ok{};
}

Status check_tensor_data(const Json& data, const std::string& where) {
  if (!data.is_object()) return Ok{};
  IH_TRY_STATUS(only_fields(data, where, {"shape", "dtype", "blocks"}));
  IH_TRY_STATUS(check_shape(data, "shape", where));
  if (!data.contains("blocks") || !data.at("blocks").is_array()) return Ok{};
  for (std::size_t i = 0; i < data.at("blocks").size(); ++i) {
    const std::string block = where + ".blocks[" + std::to_string(i) + "]";
    IH_TRY_ASSIGN(numbers, sizes(data.at("blocks")[i], block, 0));
    if (numbers.size() == 3 && numbers[1] > std::numeric_limits<std::int64_t>::max() - numbers[2])
      return bad(block, "first_row + rows overflows 64 bits");
  }
  return Ok{};
}

Status check_entry(const Json& entry, const std::string& where);

Status check_tensor(const Json& t, const std::string& where) {
  IH_TRY_STATUS(only_fields(t, where,
                            {"kind", "key", "global_shape", "global_offset", "local_shape", "axis_fragmentations",
                             "replica_id", "prepend_axis_num", "dtype", "allow_shape_mismatch", "data"}));
  IH_TRY_STATUS(check_shape(t, "global_shape", where));
  IH_TRY_STATUS(check_shape(t, "local_shape", where));
  IH_TRY_STATUS(check_replica(t, where));
  if (t.contains("axis_fragmentations") && !t.at("axis_fragmentations").is_null())
    IH_TRY_STATUS(sizes(t.at("axis_fragmentations"), where + ".axis_fragmentations", 1));
  if (t.contains("global_offset")) {
    IH_TRY_ASSIGN(offsets, sizes(t.at("global_offset"), where + ".global_offset", 0));
    // The shard ends at offset + local length on its axis: that end must be a 64-bit number too.
    const std::int64_t prepend = t.contains("prepend_axis_num") && is_integer_in_64_bits(t.at("prepend_axis_num"))
                                     ? t.at("prepend_axis_num").get<std::int64_t>()
                                     : 0;
    const auto local = t.contains("local_shape") ? sizes(t.at("local_shape"), where, 0)
                                                 : Result<std::vector<std::int64_t>>(std::vector<std::int64_t>{});
    for (std::size_t i = 0; local.ok() && prepend >= 0 && i < local->size(); ++i) {
      const std::size_t axis = i + static_cast<std::size_t>(prepend);
      if (axis < offsets.size() && offsets[axis] > std::numeric_limits<std::int64_t>::max() - (*local)[i])
        return bad(where + ".global_offset[" + std::to_string(axis) + "]",
                   "offset + local_shape[" + std::to_string(i) + "] overflows 64 bits");
    }
  }
  if (t.contains("data") && !t.at("data").is_null()) return check_tensor_data(t.at("data"), where + ".data");
  return Ok{};
}

Status check_entry(const Json& entry, const std::string& where) {
  if (!entry.is_object() || !entry.contains("kind") || !entry.at("kind").is_string()) return Ok{};
  const std::string kind = entry.at("kind").get<std::string>();
  if (kind == "tensor") return check_tensor(entry, where);
  if (kind == "object") {
    IH_TRY_STATUS(only_fields(entry, where, {"kind", "key", "global_shape", "global_offset", "replica_id", "data"}));
    IH_TRY_STATUS(check_shape(entry, "global_shape", where));
    if (entry.contains("global_offset")) IH_TRY_STATUS(sizes(entry.at("global_offset"), where + ".global_offset", 0));
    IH_TRY_STATUS(check_replica(entry, where));
    if (entry.contains("data") && entry.at("data").is_object())
      IH_TRY_STATUS(only_fields(entry.at("data"), where + ".data", {"object", "value"}));
    return Ok{};
  }
  if (kind == "local") {
    IH_TRY_STATUS(only_fields(entry, where, {"kind", "value"}));
    const Json& value = entry.value("value", Json());
    if (value.is_object() && value.contains("blocks")) return check_tensor_data(value, where + ".value");
    if (value.is_object()) return only_fields(value, where + ".value", {"object", "value"});
    return Ok{};
  }
  if (kind == "plain") return only_fields(entry, where, {"kind", "value"});
  if (kind == "factory") {
    IH_TRY_STATUS(only_fields(entry, where, {"kind", "key", "built", "factory", "tensor", "sharded_offsets"}));
    if (entry.contains("tensor")) IH_TRY_STATUS(check_entry(entry.at("tensor"), where + ".tensor"));
    if (entry.contains("built")) return check_state_dict_input(entry.at("built"), where + ".built");
  }
  return Ok{};  // an unknown kind is the decoder's error
}

}  // namespace

Result<Json> parse_without_duplicate_keys(std::string_view text, const std::string& root) {
  std::vector<OpenValue> open;
  std::string duplicate;  // the first repeated key's place
  const Json::parser_callback_t track = [&](int, Json::parse_event_t event, Json& parsed) {
    using Event = Json::parse_event_t;
    const auto item_done = [&] {
      if (!open.empty() && open.back().is_list) ++open.back().index;
    };
    switch (event) {
      case Event::object_start: open.push_back({}); break;
      case Event::array_start: open.push_back({true, 0, {}, {}}); break;
      case Event::key: {
        OpenValue& object = open.back();
        object.key = parsed.get<std::string>();
        if (!object.keys.insert(object.key).second && duplicate.empty()) duplicate = place_of(root, open);
        break;
      }
      case Event::object_end:
      case Event::array_end:
        open.pop_back();
        item_done();
        break;
      case Event::value: item_done(); break;
    }
    return true;
  };
  IH_TRY_ASSIGN(document, detail::parse_tracked(text, track));
  if (!duplicate.empty())
    return bad(duplicate, "the key is given twice in one object (a JSON object names each field once)");
  return document;
}

Status check_state_dict_input(const Json& document, const std::string& root) {
  if (!document.is_array()) return Ok{};  // the decoder says what a state dict is
  for (std::size_t i = 0; i < document.size(); ++i) {
    const Json& item = document[i];
    const std::string where = root + "[" + std::to_string(i) + "]";
    if (!item.is_object()) continue;
    IH_TRY_STATUS(only_fields(item, where, {"path", "entry"}));
    if (item.contains("entry")) IH_TRY_STATUS(check_entry(item.at("entry"), where + ".entry"));
  }
  return Ok{};
}

}  // namespace ih::json
