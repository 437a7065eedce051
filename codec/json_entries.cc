// State-dict entries, tensor data, factories and FSDP trees in JSON (docs/state-dict-json.md).
#include <limits>
#include <memory>

#include "codec/json_codec.h"
#include "codec/json_fields.h"

namespace ih::json {
namespace {

using detail::bad;
using detail::int_field;
using detail::shape_field;
using detail::shape_value;
using detail::string_field;

Json plain_to_json(const PlainValue& plain);
Json factory_to_json(const ShardedTensorFactory& factory);
Result<TensorValue> tensor_value_from_json(const Json& object, const std::string& where);
Json tensor_value_to_json(const TensorValue& value);

Result<ReplicaId> replica_field(const Json& object, const std::string& where) {
  if (!object.contains("replica_id")) return ReplicaId{};  // Megatron's default replica_id = 0
  const Json& value = object.at("replica_id");
  if (value.is_array()) {
    IH_TRY_ASSIGN(coords, shape_value(value, where, "replica_id"));
    return ReplicaId::tuple(std::move(coords));
  }
  IH_TRY_ASSIGN(scalar, int_field(object, "replica_id", where));
  return ReplicaId::scalar(scalar);
}

Json replica_to_json(const ReplicaId& replica) {
  if (replica.is_tuple) return Json(replica.coords);
  return Json(replica.coords.empty() ? 0 : replica.coords[0]);
}

Result<bool> bool_field(const Json& object, const char* field, bool fallback, const std::string& where) {
  if (!object.contains(field)) return fallback;
  if (!object.at(field).is_boolean()) return bad(where, std::string("field \"") + field + "\" must be true or false");
  return object.at(field).get<bool>();
}

Result<Leaf> tensor_from_json(const Json& object, const std::string& where) {
  ShardedTensor t;
  IH_TRY_ASSIGN(key, string_field(object, "key", where));
  IH_TRY_ASSIGN(global_shape, shape_field(object, "global_shape", where));
  IH_TRY_ASSIGN(global_offset, shape_field(object, "global_offset", where));
  IH_TRY_ASSIGN(local_shape, shape_field(object, "local_shape", where));
  IH_TRY_ASSIGN(prepend, int_field(object, "prepend_axis_num", where));
  IH_TRY_ASSIGN(replica, replica_field(object, where));
  IH_TRY_ASSIGN(allow_mismatch, bool_field(object, "allow_shape_mismatch", false, where));
  if (!object.contains("axis_fragmentations"))
    return bad(where, "missing field \"axis_fragmentations\" (use null for uneven)");
  if (!object.at("axis_fragmentations").is_null()) {
    IH_TRY_ASSIGN(frag, shape_value(object.at("axis_fragmentations"), where, "axis_fragmentations"));
    t.axis_fragmentations = std::move(frag);
  }
  if (object.contains("dtype")) {
    IH_TRY_ASSIGN(dtype, string_field(object, "dtype", where));
    t.dtype = std::move(dtype);
  }
  t.key = std::move(key);
  t.global_shape = std::move(global_shape);
  t.global_offset = std::move(global_offset);
  t.local_shape = std::move(local_shape);
  t.prepend_axis_num = prepend;
  t.replica_id = std::move(replica);
  t.allow_shape_mismatch = allow_mismatch;
  if (object.contains("data") && !object.at("data").is_null()) {
    IH_TRY_ASSIGN(data, tensor_value_from_json(object.at("data"), where + " data"));
    t.data = std::move(data);
  }
  if (auto status = t.validate_metadata_integrity(); !status.ok()) return status.error().with_context(where);
  return Leaf(std::move(t));
}

/// A value a real object carries travels as {"value": <its JSON>}.
Json carried_to_json(const CarriedValue& carried) {
  auto parsed = parse(carried.json);
  return Json{{"value", parsed.ok() ? *parsed : Json(carried.json)}};
}

/// An object's data: {"object": id} (the harness's identity) or {"value": ...} (what a real object carries).
Result<ObjectData> object_data_from_json(const Json& data, const std::string& where) {
  if (data.is_object() && data.contains("value")) {
    if (data.size() != 1) return bad(where, "data is {\"object\": id} or {\"value\": ...}, got " + dump(data));
    return ObjectData(CarriedValue{dump(data.at("value"))});
  }
  IH_TRY_ASSIGN(id, int_field(data, "object", where));
  return ObjectData(ObjectRef{static_cast<std::uint64_t>(id)});
}

Json object_data_to_json(const ObjectData& data) {
  if (const auto* carried = std::get_if<CarriedValue>(&data)) return carried_to_json(*carried);
  return Json{{"object", std::get<ObjectRef>(data).id}};
}

Result<Leaf> object_from_json(const Json& object, const std::string& where) {
  IH_TRY_ASSIGN(key, string_field(object, "key", where));
  IH_TRY_ASSIGN(global_shape, shape_field(object, "global_shape", where));
  IH_TRY_ASSIGN(global_offset, shape_field(object, "global_offset", where));
  IH_TRY_ASSIGN(replica, replica_field(object, where));
  ShardedObject out{std::move(key), std::nullopt, std::move(global_shape), std::move(global_offset),
                    std::move(replica)};
  if (object.contains("data") && !object.at("data").is_null()) {
    IH_TRY_ASSIGN(data, object_data_from_json(object.at("data"), where + " data"));
    out.data = std::move(data);
  }
  if (auto status = out.validate_metadata_integrity(); !status.ok()) return status.error().with_context(where);
  return Leaf(std::move(out));
}

/// A tensor's data identity: {"shape", "dtype", "blocks": [[storage, first_row, rows], ...]}.
Json tensor_value_to_json(const TensorValue& value) {
  Json blocks = Json::array();
  for (const RowBlock& b : value.blocks) blocks.push_back({b.storage, b.first_row, b.rows});
  return Json{{"shape", value.shape}, {"dtype", value.dtype}, {"blocks", blocks}};
}

Result<TensorValue> tensor_value_from_json(const Json& object, const std::string& where) {
  TensorValue out;
  IH_TRY_ASSIGN(shape, shape_field(object, "shape", where));
  IH_TRY_ASSIGN(dtype, string_field(object, "dtype", where));
  if (!object.contains("blocks") || !object.at("blocks").is_array()) return bad(where, "data needs \"blocks\"");
  for (const Json& block : object.at("blocks")) {
    IH_TRY_ASSIGN(numbers, shape_value(block, where, "blocks"));
    if (numbers.size() != 3 || numbers[0] < 0) return bad(where, "a data block is [storage, first_row, rows]");
    out.blocks.push_back({static_cast<std::uint64_t>(numbers[0]), numbers[1], numbers[2]});
  }
  out.shape = std::move(shape);
  out.dtype = std::move(dtype);
  return out;
}

/// What an LNP wraps: tensor data, an object reference, or nothing; anything else is reported.
Json payload_to_json(const Payload& payload) {
  if (const auto* t = std::get_if<TensorValue>(&payload)) return tensor_value_to_json(*t);
  if (const auto* o = std::get_if<ObjectRef>(&payload)) return object_data_to_json(*o);
  if (const auto* carried = std::get_if<CarriedValue>(&payload)) return carried_to_json(*carried);
  return nullptr;
}

Result<Payload> payload_from_json(const Json& value, const std::string& where) {
  if (value.is_null()) return Payload();
  if (value.is_object() && value.contains("blocks")) {
    IH_TRY_ASSIGN(tensor, tensor_value_from_json(value, where));
    return Payload(std::move(tensor));
  }
  if (value.is_object() && (value.contains("object") || value.contains("value"))) {
    IH_TRY_ASSIGN(data, object_data_from_json(value, where));
    return payload_of(data);
  }
  return bad(where,
             "a local value must be null, tensor data, {\"object\": id} or {\"value\": ...}, got " + dump(value));
}

/// A plain value's repr is JSON text when it came from JSON; anything else travels as a string.
Json plain_to_json(const PlainValue& plain) {
  auto parsed = parse(plain.repr);
  return parsed.ok() ? *parsed : Json(plain.repr);
}

/// A factory as already built elsewhere (the adapter's reply): build returns the decoded entries. Built
/// under another key (retargeting renames a factory), their keys follow it as Megatron's build functions
/// derive them from the key they are given: the decoded factory key's prefix is replaced by the new one.
class BuiltFactory : public FactoryBuilder {
 public:
  BuiltFactory(std::string key, StateNode built) : key_(std::move(key)), built_(std::move(built)) {}
  std::string name() const override { return "built"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>&, const ReplicaId&) const override {
    StateNode built = built_;
    if (key == key_) return built;
    const auto rebase = [&](std::string& k) {
      if (k.rfind(key_, 0) == 0) k = key + k.substr(key_.size());
    };
    for (StateNode& piece : built.list()) {  // factory_from_json decodes the pieces as a list of leaves
      if (auto* t = piece.leaf_if<ShardedTensor>()) rebase(t->key);
      if (auto* o = piece.leaf_if<ShardedObject>()) rebase(o->key);
    }
    return built;
  }
  Result<TensorValue> merge(const StateNode&) const override {
    return make_error(seam_kind::unsupported, "a factory decoded from JSON has no merge");
  }

 private:
  std::string key_;
  StateNode built_;
};

/// {"kind": "factory", "key", "built": [entries]} plus the recipe ("factory", "tensor",
/// "sharded_offsets"; a split's "sections", "names", "split_dim") when the builder has a Megatron counterpart, so the
/// adapter can rebuild it.
Json factory_to_json(const ShardedTensorFactory& factory) {
  Json out{{"kind", "factory"}, {"key", factory.key}};
  if (const auto recipe = factory.builder ? factory.builder->recipe(factory) : std::nullopt) {
    out["factory"] = recipe->kind;
    out["tensor"] = leaf_to_json(recipe->original);
    Json offsets = Json::array();
    for (const AxisOffset& a : recipe->sharded_offsets) offsets.push_back({a.axis, a.rank_offset, a.fragments});
    out["sharded_offsets"] = offsets;
    if (recipe->kind == "split") {
      out["sections"] = recipe->sections;
      out["names"] = recipe->names;
      out["split_dim"] = 0;
    }
  }
  auto built = factory.build();
  if (!built.ok()) {
    out["built"] = Json{{"error", error_to_json(built.error())}};
    return out;
  }
  out["built"] = entries_to_json(flatten(*built));
  // Built pieces are new tensors on the Megatron side (torch.chunk), so their data identity cannot cross.
  for (Json& item : out["built"]) item["entry"].erase("data");
  return out;
}

Result<Leaf> factory_from_json(const Json& object, const std::string& where) {
  IH_TRY_ASSIGN(key, string_field(object, "key", where));
  if (!object.contains("built")) return bad(where, "a factory entry needs \"built\" (its built entries)");
  IH_TRY_ASSIGN(entries, entries_from_json(object.at("built")));
  StateList built;
  for (FlatEntry& e : entries) built.push_back(StateNode(std::move(e.entry)));
  auto builder = std::make_shared<BuiltFactory>(key, StateNode(std::move(built)));
  return Leaf(ShardedTensorFactory{std::move(key), std::nullopt, ReplicaId{}, std::move(builder), {}});
}

Json shape_or_null(const std::optional<Shape>& shape) { return shape ? Json(*shape) : Json(nullptr); }

}  // namespace

Json leaf_to_json(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) {
    Json out{{"kind", "tensor"},
             {"key", t->key},
             {"global_shape", t->global_shape},
             {"global_offset", t->global_offset},
             {"local_shape", t->local_shape},
             {"axis_fragmentations", shape_or_null(t->axis_fragmentations)},
             {"replica_id", replica_to_json(t->replica_id)},
             {"prepend_axis_num", t->prepend_axis_num}};
    if (t->dtype != "float32") out["dtype"] = t->dtype;
    if (t->allow_shape_mismatch) out["allow_shape_mismatch"] = true;
    if (t->data) out["data"] = tensor_value_to_json(*t->data);
    return out;
  }
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) {
    Json out{{"kind", "object"},
             {"key", o->key},
             {"global_shape", o->global_shape},
             {"global_offset", o->global_offset},
             {"replica_id", replica_to_json(o->replica_id)}};
    if (o->data) out["data"] = object_data_to_json(*o->data);
    return out;
  }
  if (const auto* local = std::get_if<LocalNonpersistent>(&leaf)) {
    Json out{{"kind", "local"}};
    if (!std::holds_alternative<std::monostate>(local->payload)) out["value"] = payload_to_json(local->payload);
    return out;
  }
  if (const auto* p = std::get_if<PlainValue>(&leaf)) return Json{{"kind", "plain"}, {"value", plain_to_json(*p)}};
  if (const auto* f = std::get_if<ShardedTensorFactory>(&leaf)) return factory_to_json(*f);
  return Json{{"kind", "tensor_value"}};
}

Result<Leaf> leaf_from_json(const Json& object) {
  const std::string where = "entry";
  if (!object.is_object()) return bad(where, "must be an object");
  IH_TRY_ASSIGN(kind, string_field(object, "kind", where));
  if (kind == "tensor") return tensor_from_json(object, where);
  if (kind == "object") return object_from_json(object, where);
  if (kind == "local") {
    IH_TRY_ASSIGN(payload, payload_from_json(object.value("value", Json()), where + " value"));
    return Leaf(LocalNonpersistent{std::move(payload)});
  }
  if (kind == "plain") return Leaf(PlainValue{object.contains("value") ? dump(object["value"]) : "null"});
  if (kind == "factory") return factory_from_json(object, where);
  return bad(where, "unknown kind \"" + kind + "\" (expected tensor, object, local or plain)");
}

Json entries_to_json(const std::vector<FlatEntry>& entries) {
  Json out = Json::array();
  for (const FlatEntry& entry : entries)
    out.push_back(Json{{"path", entry.path}, {"entry", leaf_to_json(entry.entry)}});
  return out;
}

Result<std::vector<FlatEntry>> entries_from_json(const Json& document) {
  if (!document.is_array()) return bad("state dict", "must be a list of {\"path\", \"entry\"} objects");
  std::vector<FlatEntry> out;
  out.reserve(document.size());
  for (std::size_t i = 0; i < document.size(); ++i) {
    const Json& item = document[i];
    const std::string where = "entry " + std::to_string(i);
    if (!item.is_object()) return bad(where, "must be an object with \"path\" and \"entry\"");
    IH_TRY_ASSIGN(path, string_field(item, "path", where));
    if (!item.contains("entry")) return bad(where, "missing field \"entry\"");
    auto leaf = leaf_from_json(item.at("entry"));
    if (!leaf.ok()) return leaf.error().with_context(where + " (path '" + path + "')");
    out.push_back({std::move(path), std::move(leaf).value()});
  }
  return out;
}

Json tree_to_json(const StateNode& tree) {
  if (tree.is_dict()) {
    Json out = Json::object();
    for (const DictItem& item : tree.dict()) out[to_string(item.key)] = tree_to_json(item.value);
    return out;
  }
  if (tree.is_list()) {
    Json out = Json::array();
    for (const StateNode& child : tree.list()) out.push_back(tree_to_json(child));
    return out;
  }
  if (const auto* plain = tree.leaf_if<PlainValue>()) return plain_to_json(*plain);
  return leaf_to_json(tree.leaf());
}

StateNode tree_from_json(const Json& value) {
  if (value.is_object()) {
    StateDict dict;
    for (const auto& [key, child] : value.items()) dict.push_back({key, tree_from_json(child)});
    return StateNode(std::move(dict));
  }
  if (value.is_array()) {
    StateList list;
    for (const Json& child : value) list.push_back(tree_from_json(child));
    return StateNode(std::move(list));
  }
  return StateNode(PlainValue{dump(value)});
}

}  // namespace ih::json
