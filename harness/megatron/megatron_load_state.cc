// The Megatron client's load_state: a checkpoint and a request tree sent to the adapter (a GTP in_proj
// factory as the gtp_pieces request its build makes, a retargeted one as its recipe), the loaded tree read
// back with its row provenance.
#include <functional>
#include <utility>

#include "harness/megatron/megatron_implementation.h"
#include "harness/megatron/megatron_wire.h"

namespace ih {
namespace {

using FactoryJson = std::function<Result<json::Json>(const ShardedTensorFactory&)>;

Result<json::Json> node_json(const StateNode& node, const FactoryJson& factory_json) {
  if (node.is_dict()) {
    json::Json items = json::Json::array();
    for (const DictItem& item : node.dict()) {
      IH_TRY_ASSIGN(child, node_json(item.value, factory_json));
      json::Json key = std::holds_alternative<std::string>(item.key) ? json::Json(std::get<std::string>(item.key))
                                                                     : json::Json(std::get<std::int64_t>(item.key));
      items.push_back(json::Json::array({key, child}));
    }
    return json::Json::array({"dict", items});
  }
  if (node.is_list()) {
    json::Json items = json::Json::array();
    for (const StateNode& child : node.list()) {
      IH_TRY_ASSIGN(c, node_json(child, factory_json));
      items.push_back(c);
    }
    return json::Json::array({"list", items});
  }
  if (const auto* f = std::get_if<ShardedTensorFactory>(&node.leaf())) {
    IH_TRY_ASSIGN(entry, factory_json(*f));
    return json::Json::array({"leaf", entry});
  }
  return json::Json::array({"leaf", json::leaf_to_json(node.leaf())});
}

Result<StateNode> node_from_json(const json::Json& node, const std::string& dtype_hint) {
  if (!node.is_array() || node.empty() || !node[0].is_string())
    return make_error(seam_kind::harness_error, "adapter protocol: bad load_state tree node " + json::dump(node));
  const std::string kind = node[0].get<std::string>();
  if (kind == "dict") {
    StateDict out;
    for (const json::Json& item : node.at(1)) {
      IH_TRY_ASSIGN(child, node_from_json(item.at(1), dtype_hint));
      DictKey key =
          item.at(0).is_string() ? DictKey(item.at(0).get<std::string>()) : DictKey(item.at(0).get<std::int64_t>());
      out.push_back({std::move(key), std::move(child)});
    }
    return StateNode(std::move(out));
  }
  if (kind == "list") {
    StateList out;
    for (const json::Json& item : node.at(1)) {
      IH_TRY_ASSIGN(child, node_from_json(item, dtype_hint));
      out.push_back(std::move(child));
    }
    return StateNode(std::move(out));
  }
  if (kind == "tensor") return StateNode(Leaf(TensorValue{}));  // filled by the caller (needs the request's dtype)
  if (kind == "local") {
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "local"}, {"value", node.at(1)}}));
    const auto& payload = std::get<LocalNonpersistent>(leaf).payload;
    if (const auto* t = std::get_if<TensorValue>(&payload)) return StateNode(Leaf(*t));
    if (const auto* o = std::get_if<ObjectRef>(&payload)) return StateNode(Leaf(*o));
    return StateNode(Leaf(LocalNonpersistent{}));
  }
  if (kind == "object" && node.at(1).is_number_integer())
    return StateNode(Leaf(ObjectRef{node.at(1).get<std::uint64_t>()}));
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "plain"}, {"value", node.at(1)}}));
  return StateNode(std::move(leaf));
}

/// Fills the tensors of `out` (decoded from `node`) with their row blocks, the dtype from the request.
void fill_tensors(StateNode& out, const json::Json& node, const StateNode* request) {
  const std::string kind = node.at(0).get<std::string>();
  if (kind == "dict" && out.is_dict()) {
    for (std::size_t i = 0; i < out.dict().size(); ++i)
      fill_tensors(out.dict()[i].value, node.at(1).at(i).at(1),
                   request && request->is_dict() ? request->find(out.dict()[i].key) : nullptr);
  } else if (kind == "list" && out.is_list()) {
    for (std::size_t i = 0; i < out.list().size(); ++i)
      fill_tensors(out.list()[i], node.at(1).at(i),
                   request && request->is_list() && i < request->list().size() ? &request->list()[i] : nullptr);
  } else if (kind == "tensor") {
    TensorValue t;
    t.shape = node.at(1).get<Shape>();
    // A tensor keeps its request entry's dtype; a factory's merge result its parameter's (the factory data's).
    const auto* st = request ? request->leaf_if<ShardedTensor>() : nullptr;
    const auto* factory = request ? request->leaf_if<ShardedTensorFactory>() : nullptr;
    t.dtype = st ? st->dtype : factory && factory->data ? factory->data->dtype : "float32";
    for (const json::Json& b : node.at(2))
      t.blocks.push_back({b.at(0).get<std::uint64_t>(), b.at(1).get<std::int64_t>(), b.at(2).get<std::int64_t>()});
    out = StateNode(Leaf(std::move(t)));
  }
}

}  // namespace

Result<StateNode> MegatronImplementation::load_state(const Checkpoint& checkpoint, const StateNode& request,
                                                     LoadOrder order) {
  // Megatron has one to_state_dict; which of spec 3.8's orders it follows is what the properties judge.
  const std::string adapter_order = order == LoadOrder::serialization_load ? "serialization_load" : "to_state_dict";
  json::Json chunks = json::Json::array();
  for (const auto& [id, list] : checkpoint.index.chunks)
    for (const StoredChunk& c : list) {
      if (!c.data) return unsupported(name_, "load_state of a checkpoint stored without data");
      Shape local;
      for (std::size_t a = static_cast<std::size_t>(c.prepend_axis_num); a < c.box.rank(); ++a)
        local.push_back(c.box.hi[a] - c.box.lo[a]);
      chunks.push_back({{"key", id.first},
                        {"global_shape", id.second},
                        {"global_offset", c.box.lo},
                        {"local_shape", local},
                        {"prepend_axis_num", c.prepend_axis_num},
                        {"data", data_json(*c.data)}});
    }
  json::Json objects = json::Json::array();
  for (const auto& [key, data] : checkpoint.objects) {
    const auto* ref = data ? std::get_if<ObjectRef>(&*data) : nullptr;
    if (data && !ref) return unsupported(name_, "load_state of an object carrying a real value (" + key + ")");
    objects.push_back(json::Json::array({key, ref ? json::Json(ref->id) : json::Json(nullptr)}));
  }
  json::Json common = json::Json::object();
  if (checkpoint.common.is_dict())
    for (const DictItem& item : checkpoint.common.dict())
      if (const auto* p = item.value.leaf_if<PlainValue>(); p && std::holds_alternative<std::string>(item.key))
        common[std::get<std::string>(item.key)] = json::leaf_to_json(Leaf(*p))["value"];
  // A GTP in_proj factory crosses as the gtp_pieces request its build makes (the adapter rebuilds
  // Megatron's own factory from it in the layout's world; Megatron builds, loads and merges it).
  const FactoryJson factory_json = [this](const ShardedTensorFactory& f) -> Result<json::Json> {
    if (const auto* r = dynamic_cast<const RetargetedFactory*>(f.builder.get()))
      return json::Json{
          {"kind", "factory"}, {"key", f.key}, {"retargeted", {{"pattern", r->pattern()}, {"entry", r->original()}}}};
    last_gtp_build_.reset();
    if (auto built = f.build(); !built.ok()) return built.error();
    if (!last_gtp_build_)
      return unsupported(name_, "load_state of a factory other than a GTP in_proj factory (" + f.key +
                                    ": its Megatron construction does not cross the adapter)");
    const auto [design, params] = *last_gtp_build_;
    last_gtp_build_.reset();
    return json::Json{{"kind", "factory"}, {"key", f.key}, {"gtp", gtp_request(params, design)}};
  };
  IH_TRY_ASSIGN(tree, node_json(request, factory_json));
  return ask("load_state",
             {{"order", adapter_order},
              {"chunks", std::move(chunks)},
              {"objects", std::move(objects)},
              {"common", std::move(common)},
              {"request", std::move(tree)}},
             [&](const json::Json& result) -> Result<StateNode> {
               const json::Json& node = result.at("tree");
               IH_TRY_ASSIGN(out, node_from_json(node, ""));
               fill_tensors(out, node, &request);
               return out;
             });
}

}  // namespace ih
