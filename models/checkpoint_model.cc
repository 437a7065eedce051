#include "models/checkpoint_model.h"

namespace ih {
namespace {

bool is_lnp(const Leaf& leaf) { return std::holds_alternative<LocalNonpersistent>(leaf); }

/// What a value carried by a real object loads as: the plain value it is.
Leaf carried_plain(const CarriedValue& carried) { return PlainValue{carried.json}; }

Leaf unwrap(const LocalNonpersistent& lnp) {
  if (const auto* tensor = std::get_if<TensorValue>(&lnp.payload)) return *tensor;
  if (const auto* object = std::get_if<ObjectRef>(&lnp.payload)) return *object;
  if (const auto* carried = std::get_if<CarriedValue>(&lnp.payload)) return carried_plain(*carried);
  return PlainValue{"None"};
}

/// What loading a saved object gives: its identity, or the value it carries.
Leaf loaded_object(const std::optional<ObjectData>& data) {
  if (!data) return ObjectRef{};
  if (const auto* carried = std::get_if<CarriedValue>(&*data)) return carried_plain(*carried);
  return std::get<ObjectRef>(*data);
}

void store_tensor(Checkpoint& out, std::int64_t rank, const ShardedTensor& t) {
  if (!t.is_main_replica()) return;  // only main replicas are written
  Box box{t.global_offset, t.global_offset};
  for (std::size_t a = 0; a < box.rank(); ++a)
    box.hi[a] += a < static_cast<std::size_t>(t.prepend_axis_num) ? 1 : t.local_shape[a - t.prepend_axis_num];
  out.index.chunks[{t.key, t.global_shape}].push_back({rank, std::move(box), t.prepend_axis_num, t.dtype, t.data});
}

Status store_rank(Checkpoint& out, std::int64_t rank, const StateNode& sharded) {
  Status status = Ok{};
  visit_leaves(sharded, [&](const std::string& path, const Leaf& leaf) {
    if (const auto* t = std::get_if<ShardedTensor>(&leaf)) {
      if (!status.ok()) return;
      if (auto valid = t->validate_metadata_integrity(); !valid.ok())
        status = valid.error().with_context("rank " + std::to_string(rank) + " entry " + path);
      else
        store_tensor(out, rank, *t);
    } else if (const auto* o = std::get_if<ShardedObject>(&leaf)) {
      if (o->is_main_replica()) out.objects.try_emplace(o->unique_key(), o->data);
    }
  });
  if (!status.ok()) return status;
  out.metadata.add_tree(rank, sharded);
  return Ok{};
}

// Replaces every ST/SO leaf of `tree` by its loaded value.
Status fill_loaded(const Checkpoint& checkpoint, StateNode& tree) {
  return map_leaves_inplace(tree, [&](Leaf& leaf) -> Status {
    if (const auto* t = std::get_if<ShardedTensor>(&leaf)) {
      IH_TRY_ASSIGN(value, read_value(checkpoint.index, *t));
      leaf = std::move(value);
    } else if (const auto* o = std::get_if<ShardedObject>(&leaf)) {
      const auto it = checkpoint.objects.find(o->unique_key());
      if (it == checkpoint.objects.end())
        return make_error(ErrorKind::load_not_covered, "object " + o->unique_key() + " is not in the checkpoint");
      leaf = loaded_object(it->second);
    }
    return Ok{};
  });
}

bool is_empty_dict(const StateNode& node) { return node.is_dict() && node.dict().empty(); }

}  // namespace

Result<SavePreprocessed> save_preprocess(const StateNode& tree) {
  StateNode built = tree;
  IH_TRY_STATUS(apply_factories(built));
  StateNode persistent = extract_matching_values(built, is_lnp).second;
  auto [sharded, common] = extract_matching_values(persistent, is_sharded_base);
  return SavePreprocessed{std::move(sharded), std::move(common)};
}

Result<Checkpoint> save_checkpoint(const std::vector<StateNode>& rank_trees) {
  Checkpoint out;
  for (std::size_t rank = 0; rank < rank_trees.size(); ++rank) {
    auto pre = save_preprocess(rank_trees[rank]);
    if (!pre.ok()) return pre.error().with_context("save of rank " + std::to_string(rank));
    IH_TRY_STATUS(store_rank(out, static_cast<std::int64_t>(rank), pre->sharded));
    if (rank == 0) out.common = std::move(pre->common);  // rank 0's common tree is what gets saved
  }
  return out;
}

Result<LoadPreprocessed> load_preprocess(const StateNode& request) {
  StateNode sharded = request;  // containers copied, leaves are values here
  const auto is_factory = [](const Leaf& leaf) { return std::holds_alternative<ShardedTensorFactory>(leaf); };
  StateNode factories = extract_matching_values(sharded, is_factory, /*lists_as_dicts=*/true).first;
  IH_TRY_STATUS(apply_factories(sharded));
  // A merge must never rely on the factory's data: strip it, as Megatron does.
  IH_TRY_STATUS(map_leaves_inplace(factories, [](Leaf& leaf) -> Status {
    if (auto* f = std::get_if<ShardedTensorFactory>(&leaf)) leaf = f->without_data();
    return Ok{};
  }));
  auto [nonpersistent, rest] = extract_matching_values(sharded, is_lnp);
  IH_TRY_STATUS(map_leaves_inplace(nonpersistent, [](Leaf& leaf) -> Status {
    if (const auto* lnp = std::get_if<LocalNonpersistent>(&leaf)) leaf = unwrap(*lnp);
    return Ok{};
  }));
  return LoadPreprocessed{std::move(rest), std::move(nonpersistent), std::move(factories)};
}

std::string to_string(LoadOrder order) {
  switch (order) {
    case LoadOrder::serialization_load: return "serialization_load";
    case LoadOrder::to_state_dict_baseline: return "to_state_dict_baseline";
    case LoadOrder::to_state_dict_fixed: return "to_state_dict_fixed";
  }
  return "unknown";
}

Result<StateNode> load_checkpoint(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) {
  StateNode result = checkpoint.common;  // the saved common tree (Rec in to_state_dict)
  if (order != LoadOrder::serialization_load && is_empty_dict(request)) return result;
  IH_TRY_ASSIGN(pre, load_preprocess(request));
  IH_TRY_STATUS(merge_into(result, std::move(pre.nonpersistent)));
  StateNode loaded = extract_matching_values(pre.sharded, is_sharded_base).first;
  IH_TRY_STATUS(fill_loaded(checkpoint, loaded));
  if (order == LoadOrder::to_state_dict_baseline) {
    // Baseline step 7: factories merge against the loaded shards alone; LNP values are in `result`.
    IH_TRY_STATUS(apply_factory_merges(loaded, pre.factories));
    IH_TRY_STATUS(merge_into(result, std::move(loaded)));
    return result;
  }
  IH_TRY_STATUS(merge_into(result, std::move(loaded)));
  IH_TRY_STATUS(apply_factory_merges(result, pre.factories));
  return result;
}

}  // namespace ih
