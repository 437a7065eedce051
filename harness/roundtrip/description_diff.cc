#include "harness/roundtrip/description_diff.h"

#include <map>

#include "codec/json_codec.h"
#include "harness/roundtrip/plan_segments.h"

namespace ih {
namespace {

/// An entry as the plan reads it, without data: what the two trees' descriptions are compared on.
std::string entry_text(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return json::dump(json::leaf_to_json(t->without_data()));
  return json::dump(json::leaf_to_json(leaf));
}

DescriptionDifference structural(const std::string& path, const std::string& what) {
  return {true, path + ": " + what};
}

DescriptionDifference layout(const std::string& path, const std::string& save_text, const std::string& load_text) {
  return {false, path + ": the save tree describes " + save_text + ", the load tree " + load_text};
}

/// A factory's built tensors, in order (the plan lays them on its data rows one after the other).
Result<std::vector<FlatEntry>> built_tensors(const ShardedTensorFactory& f) {
  IH_TRY_ASSIGN(built, f.build());
  return flatten(built);
}

std::optional<DescriptionDifference> factory_difference(const std::string& path, const ShardedTensorFactory& a,
                                                        const ShardedTensorFactory& b) {
  auto shape_a = factory_local_shape(a), shape_b = factory_local_shape(b);
  auto built_a = built_tensors(a), built_b = built_tensors(b);
  if (!shape_a.ok() || !shape_b.ok() || !built_a.ok() || !built_b.ok())
    return structural(path, "a factory whose built tensors cannot be read in one of the descriptions");
  if (*shape_a != *shape_b || built_a->size() != built_b->size())
    return structural(path, "the factory's local data or its number of built tensors differs (save tree " +
                                std::to_string(built_a->size()) + " built tensors, load tree " +
                                std::to_string(built_b->size()) + ")");
  for (std::size_t i = 0; i < built_a->size(); ++i) {
    const std::string ta = entry_text((*built_a)[i].entry), tb = entry_text((*built_b)[i].entry);
    if (ta != tb) return layout(path + " (built tensor " + std::to_string(i) + ")", ta, tb);
  }
  return std::nullopt;
}

std::optional<DescriptionDifference> entry_difference(const std::string& path, const Leaf& a, const Leaf& b) {
  if (a.index() != b.index()) return structural(path, "another kind of entry in each tree");
  if (const auto* fa = std::get_if<ShardedTensorFactory>(&a))
    return factory_difference(path, *fa, std::get<ShardedTensorFactory>(b));
  if (const auto* ta = std::get_if<ShardedTensor>(&a); ta && ta->local_shape != std::get<ShardedTensor>(b).local_shape)
    return structural(path, "another local shape in each tree");
  const std::string text_a = entry_text(a), text_b = entry_text(b);
  if (text_a != text_b) return layout(path, text_a, text_b);
  return std::nullopt;
}

}  // namespace

std::optional<DescriptionDifference> description_difference(const std::vector<FlatEntry>& save_tree,
                                                            const std::vector<FlatEntry>& load_tree) {
  std::map<std::string, const Leaf*> in_load;
  for (const FlatEntry& e : load_tree) in_load.emplace(e.path, &e.entry);
  std::optional<DescriptionDifference> first_layout;
  for (const FlatEntry& e : save_tree) {
    const auto it = in_load.find(e.path);
    if (it == in_load.end()) return structural(e.path, "described by the save tree only");
    auto d = entry_difference(e.path, e.entry, *it->second);
    in_load.erase(it);
    if (d && d->structural) return d;
    if (d && !first_layout) first_layout = std::move(d);
  }
  if (!in_load.empty()) return structural(in_load.begin()->first, "described by the load tree only");
  return first_layout;
}

}  // namespace ih
