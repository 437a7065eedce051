// The non-GTP split factory `_split_tensor_factory` (spec 4.3): one TP-local tensor saved as one
// checkpoint key per section, so a TP change concatenates within a section, never across them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "models/gdp_layout.h"
#include "models/state_tree.h"

namespace ih {

/// A TP-local 2-D weight sharded on rows: from_rank_offsets(key, (rows, cols), (0, t, T)).
Result<ShardedTensor> tp_row_sharded(const std::string& key, std::int64_t rows, std::int64_t cols, std::int64_t tp_size,
                                     std::int64_t tp_rank, ReplicaId replica_id = {},
                                     std::optional<TensorValue> data = std::nullopt,
                                     const std::string& dtype = "bfloat16");

/// build/merge of `_split_tensor_factory(orig, sections, names, 0)`.
class SplitFactoryBuilder : public FactoryBuilder {
 public:
  /// Fails with split_sections_mismatch when the sections do not sum to orig's local rows.
  static Result<std::shared_ptr<const SplitFactoryBuilder>> create(const ShardedTensor& orig, SplitLayout layout);

  std::string name() const override { return "split"; }
  /// A list of chunks in section order: key `<key>.<name>`, global (T*s_j, C), offset (t*s_j, 0).
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica_id) const override;
  /// Concatenates the loaded chunks along rows back to (D, C).
  Result<TensorValue> merge(const StateNode& loaded) const override;
  /// Megatron's `_split_tensor_factory(orig, sections, names, 0)` over the factory's tensor.
  std::optional<FactoryRecipe> recipe(const ShardedTensorFactory& factory) const override;
  /// The chunks as a flat vector (what build returns, without the tree wrapper).
  Result<std::vector<ShardedTensor>> chunks(const std::string& key, const std::optional<TensorValue>& data,
                                            const ReplicaId& replica_id) const;
  const SplitLayout& layout() const { return layout_; }

 private:
  SplitFactoryBuilder(ShardedTensor orig, SplitLayout layout) : orig_(std::move(orig)), layout_(std::move(layout)) {}
  ShardedTensor orig_;  // metadata only: build gets data from the factory, like Megatron's closure
  SplitLayout layout_;
};

/// A ready factory over `orig` (its key, data and replica id).
Result<ShardedTensorFactory> make_split_factory(const ShardedTensor& orig, SplitLayout layout);

/// The chunks the split factory saves for `orig`, in section order.
Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout);

/// The tensors a merge receives, in build order: a list, an int-keyed dict (lists as dicts) or a
/// bare tensor. Anything else (an unloaded entry, an object) is an error naming `what`.
Result<std::vector<TensorValue>> loaded_tensors(const StateNode& loaded, const std::string& what);

}  // namespace ih
