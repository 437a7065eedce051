#include "models/state_tree.h"

#include <algorithm>

namespace ih {

std::string to_string(const DictKey& key) {
  if (const auto* text = std::get_if<std::string>(&key)) return *text;
  return std::to_string(std::get<std::int64_t>(key));
}

StateNode* StateNode::find(const DictKey& key) {
  if (!is_dict()) return nullptr;
  for (DictItem& item : dict())
    if (item.key == key) return &item.value;
  return nullptr;
}

const StateNode* StateNode::find(const DictKey& key) const { return const_cast<StateNode*>(this)->find(key); }

bool is_sharded_base(const Leaf& leaf) {
  return std::holds_alternative<ShardedTensor>(leaf) || std::holds_alternative<ShardedObject>(leaf) ||
         std::holds_alternative<ShardedTensorFactory>(leaf);
}

Result<StateNode> ShardedTensorFactory::build() const {
  if (!builder) return make_error(ErrorKind::invalid_argument, "factory '" + key + "' has no build function");
  IH_TRY_ASSIGN(built, builder->build(key, data, replica_id));
  for (const LayerAxisPrepend& axis : build_wrappers)
    IH_TRY_STATUS(map_leaves_inplace(built, [&](Leaf& leaf) { return prepend_gpt_layer_axis(leaf, axis); }));
  return built;
}

ShardedTensorFactory ShardedTensorFactory::without_data() const {
  ShardedTensorFactory copy = *this;
  copy.data.reset();
  return copy;
}

bool ShardedTensorFactory::operator==(const ShardedTensorFactory& other) const {
  if (key != other.key || data != other.data || replica_id != other.replica_id ||
      build_wrappers != other.build_wrappers)
    return false;
  if (builder == other.builder) return true;
  // Different builder objects (e.g. one decoded from an adapter's reply) are equal when they build the same.
  const auto mine = build(), theirs = other.build();
  return mine.ok() && theirs.ok() && *mine == *theirs;
}

Status prepend_gpt_layer_axis(Leaf& entry, const LayerAxisPrepend& axis) {
  if (auto* tensor = std::get_if<ShardedTensor>(&entry)) {
    if (!tensor->axis_fragmentations)
      return make_error(ErrorKind::uneven_prepend,
                        "cannot prepend the GPT layer axis to '" + tensor->key +
                            "': axis_fragmentations is None (uneven shard), Python raises TypeError");
    tensor->global_shape.insert(tensor->global_shape.begin(), axis.num_layers);
    tensor->global_offset.insert(tensor->global_offset.begin(), axis.layer_index);
    tensor->axis_fragmentations->insert(tensor->axis_fragmentations->begin(), axis.num_layers);
    tensor->prepend_axis_num += 1;
  } else if (auto* object = std::get_if<ShardedObject>(&entry)) {
    if (object->global_shape == Shape{1} && object->global_offset == Shape{0}) {
      object->global_shape = {axis.num_layers};
      object->global_offset = {axis.layer_index};
    } else {
      object->global_shape.insert(object->global_shape.begin(), axis.num_layers);
      object->global_offset.insert(object->global_offset.begin(), axis.layer_index);
    }
  } else if (auto* factory = std::get_if<ShardedTensorFactory>(&entry)) {
    factory->build_wrappers.push_back(axis);
  }
  return Ok{};
}

Status map_leaves_inplace(StateNode& tree, const std::function<Status(Leaf&)>& fn) {
  if (tree.is_leaf()) return fn(tree.leaf());
  if (tree.is_dict()) {
    for (DictItem& item : tree.dict()) IH_TRY_STATUS(map_leaves_inplace(item.value, fn));
  } else {
    for (StateNode& child : tree.list()) IH_TRY_STATUS(map_leaves_inplace(child, fn));
  }
  return Ok{};
}

namespace {

void visit_leaves_at(const StateNode& node, const std::string& path,
                     const std::function<void(const std::string&, const Leaf&)>& fn) {
  const auto child_path = [&](const std::string& name) { return path.empty() ? name : path + "." + name; };
  if (node.is_leaf()) {
    fn(path, node.leaf());
  } else if (node.is_dict()) {
    for (const DictItem& item : node.dict()) visit_leaves_at(item.value, child_path(to_string(item.key)), fn);
  } else {
    const StateList& list = node.list();
    for (std::size_t i = 0; i < list.size(); ++i) visit_leaves_at(list[i], child_path(std::to_string(i)), fn);
  }
}

bool is_nonempty_container(const StateNode& node) {
  if (node.is_dict()) return !node.dict().empty();
  if (node.is_list()) return !node.list().empty();
  return false;
}

bool is_empty(const StateNode& node) { return !node.is_leaf() && !is_nonempty_container(node); }

std::string describe(const StateNode& node) {
  if (node.is_dict()) return "dict";
  if (node.is_list()) return "list";
  return "leaf";
}

}  // namespace

void visit_leaves(const StateNode& tree, const std::function<void(const std::string&, const Leaf&)>& fn) {
  visit_leaves_at(tree, "", fn);
}

std::pair<StateNode, StateNode> extract_matching_values(const StateNode& tree,
                                                        const std::function<bool(const Leaf&)>& pred,
                                                        bool lists_as_dicts) {
  if (tree.is_dict()) {
    StateDict matching, nonmatching;
    for (const DictItem& item : tree.dict()) {
      if (!item.value.is_leaf()) {
        auto [match, nonmatch] = extract_matching_values(item.value, pred, lists_as_dicts);
        if (is_nonempty_container(match)) matching.push_back({item.key, std::move(match)});
        if (is_nonempty_container(nonmatch) || is_empty(item.value))
          nonmatching.push_back({item.key, std::move(nonmatch)});
      } else {
        (pred(item.value.leaf()) ? matching : nonmatching).push_back(item);
      }
    }
    return {StateNode(std::move(matching)), StateNode(std::move(nonmatching))};
  }
  // A list: lists_as_dicts keeps the indices as int keys; empty containers in a list count as leaves.
  StateDict match_dict, nonmatch_dict;
  StateList match_list, nonmatch_list;
  const auto put = [&](bool matching, std::int64_t index, StateNode value) {
    if (lists_as_dicts)
      (matching ? match_dict : nonmatch_dict).push_back({index, std::move(value)});
    else
      (matching ? match_list : nonmatch_list).push_back(std::move(value));
  };
  const StateList& list = tree.is_list() ? tree.list() : StateList{};
  for (std::size_t i = 0; i < list.size(); ++i) {
    const StateNode& value = list[i];
    if (is_nonempty_container(value)) {
      auto [match, nonmatch] = extract_matching_values(value, pred, lists_as_dicts);
      if (is_nonempty_container(match)) put(true, static_cast<std::int64_t>(i), std::move(match));
      if (is_nonempty_container(nonmatch)) put(false, static_cast<std::int64_t>(i), std::move(nonmatch));
    } else {
      // Megatron applies the predicate to an empty container too; no leaf predicate matches one.
      const bool matching = value.is_leaf() && pred(value.leaf());
      put(matching, static_cast<std::int64_t>(i), value);
    }
  }
  if (lists_as_dicts) return {StateNode(std::move(match_dict)), StateNode(std::move(nonmatch_dict))};
  return {StateNode(std::move(match_list)), StateNode(std::move(nonmatch_list))};
}

Status merge_into(StateNode& x1, StateNode x2) {
  if (x1.is_dict() && x2.is_dict()) {
    for (DictItem& item : x2.dict()) {
      if (StateNode* existing = x1.find(item.key))
        IH_TRY_STATUS(merge_into(*existing, std::move(item.value)));
      else
        x1.dict().push_back(std::move(item));
    }
    return Ok{};
  }
  if (x1.is_list() && x2.is_list()) {
    if (x1.list().size() != x2.list().size())
      return make_error(ErrorKind::merge_list_length, "Cannot merge two lists with different lengths (" +
                                                          std::to_string(x1.list().size()) + " and " +
                                                          std::to_string(x2.list().size()) + ")");
    for (std::size_t i = 0; i < x2.list().size(); ++i) IH_TRY_STATUS(merge_into(x1.list()[i], std::move(x2.list()[i])));
    return Ok{};
  }
  return make_error(ErrorKind::merge_duplicate_leaf,
                    "Duplicate non-dict and non-list values encountered: a " + describe(x1) + " and a " + describe(x2));
}

Status apply_factories(StateNode& tree) {
  if (tree.is_leaf()) {
    if (const auto* factory = tree.leaf_if<ShardedTensorFactory>()) {
      IH_TRY_ASSIGN(built, factory->build());
      tree = std::move(built);
    }
    return Ok{};
  }
  if (tree.is_dict()) {
    for (DictItem& item : tree.dict()) IH_TRY_STATUS(apply_factories(item.value));
  } else {
    for (StateNode& child : tree.list()) IH_TRY_STATUS(apply_factories(child));
  }
  return Ok{};
}

namespace {

std::string keys_of(const StateNode& node) {
  std::string out;
  if (!node.is_dict()) return out;
  for (const DictItem& item : node.dict()) out += (out.empty() ? "" : ", ") + to_string(item.key);
  return "[" + out + "]";
}

Status apply_factory_merges_at(StateNode& x1, const StateNode& x2, const std::string& where) {
  if (const auto* factory = x2.leaf_if<ShardedTensorFactory>()) {
    auto merged = factory->merge(x1);
    if (!merged.ok()) return merged.error().with_context("merge of factory '" + factory->key + "' at " + where);
    x1 = StateNode(std::move(merged).value());
    return Ok{};
  }
  const auto at = [&](const DictKey& key) { return where + "." + to_string(key); };
  if (x1.is_dict() && x2.is_dict()) {
    for (const DictItem& item : x2.dict()) {
      StateNode* target = x1.find(item.key);
      if (!target)
        return make_error(ErrorKind::merge_key_mismatch, "Different dict keys encountered in `apply_factory_merges` (" +
                                                             keys_of(x1) + " vs " + keys_of(x2) + ") at " + where);
      IH_TRY_STATUS(apply_factory_merges_at(*target, item.value, at(item.key)));
    }
    return Ok{};
  }
  if (x1.is_list() && x2.is_list()) {
    if (x1.list().size() != x2.list().size())
      return make_error(ErrorKind::merge_list_length, "Cannot merge two lists with different lengths (" +
                                                          std::to_string(x1.list().size()) + " and " +
                                                          std::to_string(x2.list().size()) + ") at " + where);
    for (std::size_t i = 0; i < x2.list().size(); ++i)
      IH_TRY_STATUS(apply_factory_merges_at(x1.list()[i], x2.list()[i], at(static_cast<std::int64_t>(i))));
    return Ok{};
  }
  if (x1.is_list() && x2.is_dict()) {
    for (const DictItem& item : x2.dict()) {
      const auto* index = std::get_if<std::int64_t>(&item.key);
      if (!index)
        return make_error(ErrorKind::merge_key_mismatch, "Invalid dict key " + to_string(item.key) +
                                                             " non-integer type encountered in a list-dict merge at " +
                                                             where);
      if (*index < 0 || static_cast<std::size_t>(*index) >= x1.list().size())
        return make_error(ErrorKind::merge_key_mismatch, "Dict key " + std::to_string(*index) +
                                                             " out of bound for list of length " +
                                                             std::to_string(x1.list().size()) + " at " + where);
      IH_TRY_STATUS(apply_factory_merges_at(x1.list()[*index], item.value, at(*index)));
    }
    return Ok{};
  }
  return make_error(ErrorKind::merge_duplicate_leaf, "Duplicate non-dict and non-list values encountered: a " +
                                                         describe(x1) + " and a " + describe(x2) + " at " + where);
}

}  // namespace

Status apply_factory_merges(StateNode& x1, const StateNode& x2) { return apply_factory_merges_at(x1, x2, "<root>"); }

}  // namespace ih
