// The Megatron client's GTP operations: padding, the in_proj factory's pieces and merge, and the GTP
// parameter's own entry with its writer election, each answered in the layout's gloo world.
#include <utility>

#include "harness/megatron/adapter_replies.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/megatron/megatron_wire.h"

namespace ih {
namespace {

Result<TensorValue> data_from_json(const json::Json& value) {
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "local"}, {"value", value}}));
  const auto* lnp = std::get_if<LocalNonpersistent>(&leaf);
  const auto* t = lnp ? std::get_if<TensorValue>(&lnp->payload) : nullptr;
  if (!t) return protocol_error("not tensor data", json::dump(value));
  return *t;
}

Result<ShardedTensor> sharded_tensor_from_json(const json::Json& entry) {
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(entry));
  if (!std::holds_alternative<ShardedTensor>(leaf))
    return protocol_error("the parameter entry is not a tensor", json::dump(entry));
  return std::get<ShardedTensor>(std::move(leaf));
}

}  // namespace

Result<GtpPadding> MegatronImplementation::gtp_padding(std::int64_t rows, std::int64_t gtp_size,
                                                       std::int64_t pad_alignment) {
  return ask("gtp_padding", {{"rows", rows}, {"gtp_size", gtp_size}, {"pad_for_alignment", pad_alignment}},
             [&](const json::Json& result) {
               GtpPadding out;
               out.rows = rows, out.gtp_size = gtp_size, out.pad_alignment = pad_alignment;
               out.align_block = pad_alignment * gtp_size;
               out.shard_rows = result.at("shard_rows").get<std::int64_t>();
               out.pad = result.at("pad_length").get<std::int64_t>();
               out.padded_rows = rows + out.pad;
               return Result<GtpPadding>(out);
             });
}

Result<StateNode> MegatronImplementation::gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& p) {
  last_gtp_build_ = std::make_pair(design, p);  // what a factory asked for, read by load_state
  return ask("gtp_pieces", gtp_request(p, design), [&](const json::Json& result) -> Result<StateNode> {
    StateList pieces;
    for (json::Json piece : result.at("pieces")) {
      if (piece.at("kind") == "tensor" && !piece.contains("data") && p.shard) {
        // The adapter gives a piece's data only where it views a storage it was told of (the shard,
        // the gathered buffer): any other piece is a copy. Describe it as a fresh buffer so the
        // properties judge it (gtp_pieces_are_views fails), as for the parameter entry.
        const Shape local = piece.at("local_shape").get<Shape>();
        piece["data"] =
            data_json(TensorValue::of_storage(gather_storage(p) ^ (std::uint64_t{3} << 60), local, p.dtype));
      }
      IH_TRY_ASSIGN(leaf, json::leaf_from_json(piece));
      // Pieces always carry their data (the properties judge views and pad rows on it); an
      // adapter answer without it is a protocol error, never an empty optional downstream.
      if (const auto* t = std::get_if<ShardedTensor>(&leaf); t && !t->data)
        return protocol_error("a piece without its data (" + t->key + ")", json::dump(piece));
      if (const auto* l = std::get_if<LocalNonpersistent>(&leaf);
          l && std::holds_alternative<std::monostate>(l->payload))
        return protocol_error("a LocalNonpersistentObject without its payload", json::dump(piece));
      pieces.push_back(StateNode(std::move(leaf)));
    }
    if (pieces.size() == 1 && pieces.front().leaf_if<LocalNonpersistent>()) return pieces.front();
    return StateNode(std::move(pieces));
  });
}

Result<TensorValue> MegatronImplementation::gtp_merge(GtpSaveDesign design, const GtpFactoryParams& p,
                                                      const StateNode& loaded) {
  json::Json request = gtp_request(p, design);
  json::Json tensors = json::Json::array();
  const auto add = [&](const StateNode& node) -> Status {
    if (const auto* t = node.leaf_if<TensorValue>()) {
      tensors.push_back(data_json(*t));
      return Ok{};
    }
    if (const auto* st = node.leaf_if<ShardedTensor>(); st && st->data) {
      tensors.push_back(data_json(*st->data));
      return Ok{};
    }
    return make_error(ErrorKind::invalid_argument,
                      "gtp_merge: a loaded entry is neither a tensor nor a tensor with data");
  };
  if (loaded.is_list()) {
    for (const StateNode& n : loaded.list()) IH_TRY_STATUS(add(n));
    request["loaded"] = std::move(tensors);
  } else if (loaded.is_dict()) {
    for (const DictItem& item : loaded.dict()) IH_TRY_STATUS(add(item.value));
    request["loaded"] = std::move(tensors);
  } else {
    IH_TRY_STATUS(add(loaded));
    request["loaded"] = tensors[0];
    request["bare"] = true;
  }
  return ask("gtp_merge", std::move(request), data_from_json);
}

namespace {

bool default_orders(const WorldGrids& w) {
  const auto order = [](const char* text) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* c = text;; ++c) {
      if (*c == '-' || *c == 0) {
        out.push_back(cur), cur.clear();
        if (*c == 0) break;
      } else {
        cur += *c;
      }
    }
    return out;
  };
  return w.dense.order == order(kDenseGridOrder) && w.expert.order == order(kExpertGridOrder);
}

json::Json world_sizes(const WorldGrids& w) {
  return json::Json{{"tp", w.dense.size("tp")},          {"gtp", w.dense.size("gtp_remat")},
                    {"cp", w.dense.size("cp")},          {"dp", w.dense.size("dp")},
                    {"etp", w.expert.size("tp")},        {"ep", w.expert.size("ep")},
                    {"egtp", w.expert.size("gtp_remat")}};
}

}  // namespace

Result<ShardedTensor> MegatronImplementation::gtp_param_entry(const GtpFactoryParams& p) {
  if (p.election) {
    const GtpElection& e = *p.election;
    if (e.explicit_replica_id || e.local_experts != 1 || !e.distributed)
      return unsupported(
          name_, "a writer election with an explicit replica_id, several local experts or no torch.distributed");
    json::Json election{{"expert", e.expert}, {"caller", e.caller.has_value()}, {"global_rank", e.global_rank}};
    if (e.caller && !default_orders(*e.caller))
      return unsupported(name_, "a writer election over non-default rank orders");
    if (e.globals && !default_orders(*e.globals))
      return unsupported(name_, "a writer election over non-default rank orders");
    if (e.caller) {
      election["world"] = world_sizes(*e.caller);
    } else if (e.globals) {
      election["world"] = world_sizes(*e.globals);
    } else {  // nothing to elect over: Megatron raises on every rank; a world of T x G ranks shows it
      election["world"] = json::Json{{"tp", p.tp_size},  {"gtp", p.gtp_size}, {"cp", 1},           {"dp", 1},
                                     {"etp", p.tp_size}, {"ep", 1},           {"egtp", p.gtp_size}};
      election["global_rank"] = p.tp_rank * p.gtp_size + p.gtp_rank;
    }
    election["globals"] = e.globals ? world_sizes(*e.globals) : json::Json(nullptr);
    IH_TRY_ASSIGN(rows, p.layout.total_rows());
    json::Json request{{"key", p.key},     {"rows", rows},
                       {"cols", p.cols},   {"pad_for_alignment", p.pad_alignment},
                       {"dtype", p.dtype}, {"election", std::move(election)}};
    if (p.shard && p.shard->blocks.size() == 1) request["shard_storage"] = p.shard->blocks.front().storage;
    return ask("gtp_param_entry", std::move(request),
               [](const json::Json& result) { return sharded_tensor_from_json(result.at("entry")); });
  }
  return ask("gtp_param_entry", gtp_request(p, GtpSaveDesign::gather), [&](const json::Json& result) {
    json::Json entry = result.at("entry");
    if (!entry.contains("data") && p.shard) {
      // Megatron's entry does not view the parameter: describe its data as a fresh buffer so the
      // property reports it (a copy) instead of finding no data.
      TensorValue copy = TensorValue::of_storage(gather_storage(p) ^ (std::uint64_t{3} << 60), p.shard->shape, p.dtype);
      entry["data"] = data_json(copy);
    }
    return sharded_tensor_from_json(entry);
  });
}

}  // namespace ih
