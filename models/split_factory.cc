#include "models/split_factory.h"

#include "models/checked_math.h"
#include "models/text.h"

namespace ih {

Result<ShardedTensor> tp_row_sharded(const std::string& key, std::int64_t rows, std::int64_t cols, std::int64_t tp_size,
                                     std::int64_t tp_rank, ReplicaId replica_id, std::optional<TensorValue> data,
                                     const std::string& dtype) {
  IH_TRY_STATUS(require_positive(rows, "rows of " + key));
  IH_TRY_STATUS(require_positive(cols, "cols of " + key));
  IH_TRY_STATUS(require_positive(tp_size, "tp_size"));
  if (tp_rank < 0 || tp_rank >= tp_size)
    return make_error(ErrorKind::invalid_layout_parameter,
                      "tp_rank " + std::to_string(tp_rank) + " is outside [0, " + std::to_string(tp_size) + ")");
  return ShardedTensor::from_rank_offsets(key, {rows, cols}, {{0, tp_rank, tp_size}}, std::move(replica_id), 0,
                                          std::move(data), dtype);
}

Result<std::shared_ptr<const SplitFactoryBuilder>> SplitFactoryBuilder::create(const ShardedTensor& orig,
                                                                               SplitLayout layout) {
  if (orig.local_shape.empty())
    return make_error(ErrorKind::invalid_layout_parameter,
                      "split factory for '" + orig.key + "': tensor has no rows axis");
  IH_TRY_ASSIGN(total, layout.total_rows());
  if (total != orig.local_shape[0])
    return make_error(ErrorKind::split_sections_mismatch,
                      "Split sections must cover the whole dimension size, got split_sections=[" +
                          join_ints(layout.sections, ", ") + "] vs dimensions size " +
                          std::to_string(orig.local_shape[0]) + " (key " + orig.key + ")");
  IH_TRY_STATUS(validate_layout(layout, "split factory for '" + orig.key + "'"));
  return std::shared_ptr<const SplitFactoryBuilder>(new SplitFactoryBuilder(orig.without_data(), std::move(layout)));
}

Result<std::vector<ShardedTensor>> SplitFactoryBuilder::chunks(const std::string& key,
                                                               const std::optional<TensorValue>& data,
                                                               const ReplicaId& replica_id) const {
  ShardedTensor base = orig_;
  base.key = key;
  base.data = data;
  if (data) base.dtype = data->dtype;
  base.replica_id = replica_id;
  std::vector<ShardedTensor> out;
  std::int64_t start = 0;
  for (std::size_t j = 0; j < layout_.sections.size(); ++j) {
    auto chunk = base.narrow(0, start, layout_.sections[j]);
    if (!chunk.ok()) return chunk.error().with_context("split of '" + key + "' section " + layout_.names[j]);
    chunk->key = key + "." + layout_.names[j];
    out.push_back(std::move(chunk).value());
    start += layout_.sections[j];
  }
  return out;
}

Result<StateNode> SplitFactoryBuilder::build(const std::string& key, const std::optional<TensorValue>& data,
                                             const ReplicaId& replica_id) const {
  IH_TRY_ASSIGN(list, chunks(key, data, replica_id));
  StateList nodes;
  for (ShardedTensor& chunk : list) nodes.emplace_back(std::move(chunk));
  return StateNode(std::move(nodes));
}

Result<TensorValue> SplitFactoryBuilder::merge(const StateNode& loaded) const {
  IH_TRY_ASSIGN(parts, loaded_tensors(loaded, "split factory merge of '" + orig_.key + "'"));
  return TensorValue::concat_rows(parts);
}

std::optional<FactoryRecipe> SplitFactoryBuilder::recipe(const ShardedTensorFactory& factory) const {
  ShardedTensor original = orig_;
  original.key = factory.key;
  original.replica_id = factory.replica_id;
  original.data = factory.data;  // its identity crosses with it: a fresh layer's LNP(data) names it
  if (factory.data) original.dtype = factory.data->dtype;
  return FactoryRecipe{"split", std::move(original), {}, layout_.sections, layout_.names};
}

Result<ShardedTensorFactory> make_split_factory(const ShardedTensor& orig, SplitLayout layout) {
  IH_TRY_ASSIGN(builder, SplitFactoryBuilder::create(orig, std::move(layout)));
  return ShardedTensorFactory{orig.key, orig.data, orig.replica_id, builder, {}};
}

Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout) {
  IH_TRY_ASSIGN(builder, SplitFactoryBuilder::create(orig, layout));
  return builder->chunks(orig.key, orig.data, orig.replica_id);
}

Result<std::vector<TensorValue>> loaded_tensors(const StateNode& loaded, const std::string& what) {
  std::vector<TensorValue> out;
  const auto take = [&](const StateNode& node, const std::string& where) -> Status {
    const auto* tensor = node.leaf_if<TensorValue>();
    if (!tensor) return make_error(ErrorKind::invalid_argument, what + ": entry " + where + " is not a loaded tensor");
    out.push_back(*tensor);
    return Ok{};
  };
  if (loaded.is_list()) {
    for (std::size_t i = 0; i < loaded.list().size(); ++i) IH_TRY_STATUS(take(loaded.list()[i], std::to_string(i)));
  } else if (loaded.is_dict()) {
    for (std::size_t i = 0; i < loaded.dict().size(); ++i) {
      const DictItem& item = loaded.dict()[i];
      if (item.key != DictKey(static_cast<std::int64_t>(i)))
        return make_error(ErrorKind::invalid_argument,
                          what + ": dict key " + to_string(item.key) + " is not list index " + std::to_string(i));
      IH_TRY_STATUS(take(item.value, to_string(item.key)));
    }
  } else {
    IH_TRY_STATUS(take(loaded, "<root>"));
  }
  return out;
}

}  // namespace ih
