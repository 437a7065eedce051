// Nested sharded state dicts (spec 3.4-3.5): dicts and lists whose leaves are sharded entries,
// factories, local objects or plain values, plus the factory machinery that builds and merges them.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "models/sharded_tensor.h"

namespace ih {

struct StateNode;

/// A common (non-sharded) value, e.g. an int or a string; compared by its printed form.
struct PlainValue {
  std::string repr;
  bool operator==(const PlainValue&) const = default;
};

struct ShardedTensorFactory;

/// How Megatron itself would construct a factory (apply_swiglu_sharded_factory(original, sharded_offsets),
/// or ssm/utils' _split_tensor_factory(original, sections, names, 0)), so an adapter can build the real
/// one from the same facts.
struct FactoryRecipe {
  std::string kind;  // "swiglu" | "split"
  ShardedTensor original;
  std::vector<AxisOffset> sharded_offsets;  // swiglu
  std::vector<std::int64_t> sections;       // split: rows of each piece, in order
  std::vector<std::string> names;           // split: the pieces' key suffixes
};

/// The build and merge functions of a ShardedTensorFactory, as a data-free description.
class FactoryBuilder {
 public:
  virtual ~FactoryBuilder() = default;
  /// Short name for reports (e.g. "swiglu", "split", "gtp_split").
  virtual std::string name() const = 0;
  /// build_fn(key, data, replica_id): a sub-tree of sharded entries, LNPs or values.
  virtual Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                                  const ReplicaId& replica_id) const = 0;
  /// merge_fn(loaded sub-tree): the tensor to put back at the factory's position.
  virtual Result<TensorValue> merge(const StateNode& loaded) const = 0;
  /// The Megatron construction of `factory`, or nullopt when it has no Megatron counterpart.
  virtual std::optional<FactoryRecipe> recipe(const ShardedTensorFactory& factory) const { return std::nullopt; }
};

/// The GPT layer axis that retargeting adds to every entry a factory builds (spec 2.5).
struct LayerAxisPrepend {
  std::int64_t layer_index = 0;
  std::int64_t num_layers = 0;
  bool operator==(const LayerAxisPrepend&) const = default;
};

/// ShardedTensorFactory (spec 3.4). Retargeting wraps the build by appending to `build_wrappers`.
struct ShardedTensorFactory {
  std::string key;
  std::optional<TensorValue> data;
  ReplicaId replica_id;
  std::shared_ptr<const FactoryBuilder> builder;
  std::vector<LayerAxisPrepend> build_wrappers;

  /// builder->build with the factory's own fields, then each wrapper on every sharded leaf.
  Result<StateNode> build() const;
  Result<TensorValue> merge(const StateNode& loaded) const { return builder->merge(loaded); }
  ShardedTensorFactory without_data() const;
  bool operator==(const ShardedTensorFactory& other) const;
};

using Leaf = std::variant<PlainValue, TensorValue, ObjectRef, ShardedTensor, ShardedObject, ShardedTensorFactory,
                          LocalNonpersistent>;

/// A dict key: Python state dicts use strings, optimizers and list-as-dict views use ints.
using DictKey = std::variant<std::string, std::int64_t>;
std::string to_string(const DictKey& key);

struct DictItem;
using StateDict = std::vector<DictItem>;  // insertion-ordered, like a Python dict
using StateList = std::vector<StateNode>;

/// One node of a nested state dict.
struct StateNode {
  std::variant<StateDict, StateList, Leaf> value;

  // Bodies below DictItem: a vector of an incomplete element may not be built or destroyed yet.
  StateNode();
  StateNode(StateDict dict);
  StateNode(StateList list);
  template <class T>
  requires std::is_constructible_v<Leaf, T> StateNode(T leaf);
  StateNode(const StateNode&);
  StateNode(StateNode&&) noexcept;
  StateNode& operator=(const StateNode&);
  StateNode& operator=(StateNode&&) noexcept;
  ~StateNode();

  bool is_dict() const { return std::holds_alternative<StateDict>(value); }
  bool is_list() const { return std::holds_alternative<StateList>(value); }
  bool is_leaf() const { return std::holds_alternative<Leaf>(value); }
  StateDict& dict() { return std::get<StateDict>(value); }
  const StateDict& dict() const { return std::get<StateDict>(value); }
  StateList& list() { return std::get<StateList>(value); }
  const StateList& list() const { return std::get<StateList>(value); }
  Leaf& leaf() { return std::get<Leaf>(value); }
  const Leaf& leaf() const { return std::get<Leaf>(value); }
  template <class T>
  const T* leaf_if() const {
    return is_leaf() ? std::get_if<T>(&leaf()) : nullptr;
  }
  template <class T>
  T* leaf_if() {
    return is_leaf() ? std::get_if<T>(&leaf()) : nullptr;
  }
  /// The child under `key`, or nullptr.
  StateNode* find(const DictKey& key);
  const StateNode* find(const DictKey& key) const;
  bool operator==(const StateNode& other) const;
};

struct DictItem {
  DictKey key;
  StateNode value;
  bool operator==(const DictItem&) const = default;
};

inline StateNode::StateNode() : value(StateDict{}) {}
inline StateNode::StateNode(StateDict dict) : value(std::move(dict)) {}
inline StateNode::StateNode(StateList list) : value(std::move(list)) {}
template <class T>
requires std::is_constructible_v<Leaf, T> StateNode::StateNode(T leaf) : value(Leaf(std::move(leaf))) {}
inline StateNode::StateNode(const StateNode&) = default;
inline StateNode::StateNode(StateNode&&) noexcept = default;
inline StateNode& StateNode::operator=(const StateNode&) = default;
inline StateNode& StateNode::operator=(StateNode&&) noexcept = default;
inline StateNode::~StateNode() = default;
inline bool StateNode::operator==(const StateNode& other) const { return value == other.value; }

/// _prepend_gpt_layer_axis (spec 2.5) on one entry: ST gains a leading axis, an SO placeholder
/// (1,)/(0,) is replaced (else prepended), a factory's build is wrapped. Uneven STs fail (TypeError).
Status prepend_gpt_layer_axis(Leaf& entry, const LayerAxisPrepend& axis);

/// True for ShardedTensor, ShardedObject and ShardedTensorFactory leaves (Megatron's ShardedBase).
bool is_sharded_base(const Leaf& leaf);

/// dict_list_map_inplace: replaces every leaf by fn(leaf); the first error stops the walk.
Status map_leaves_inplace(StateNode& tree, const std::function<Status(Leaf&)>& fn);
/// Visits every leaf with its dot-joined path, in tree order.
void visit_leaves(const StateNode& tree, const std::function<void(const std::string& path, const Leaf&)>& fn);

/// extract_matching_values (spec 3.5): (matching, non-matching), hierarchy kept. With
/// lists_as_dicts, lists become dicts keyed by index.
std::pair<StateNode, StateNode> extract_matching_values(const StateNode& tree,
                                                        const std::function<bool(const Leaf&)>& pred,
                                                        bool lists_as_dicts = false);
/// merge(x1, x2) (spec 3.5): adds x2 into x1.
Status merge_into(StateNode& x1, StateNode x2);
/// apply_factories: every factory leaf replaced in place by its build output (one level).
Status apply_factories(StateNode& tree);
/// apply_factory_merges(x1, x2) (spec 3.4): x1 loaded tree, x2 tree of factories; mutates x1.
Status apply_factory_merges(StateNode& x1, const StateNode& x2);

}  // namespace ih
