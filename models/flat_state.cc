#include "models/flat_state.h"

#include <unordered_set>

namespace ih {

Result<StateNode> unflatten(const std::vector<FlatEntry>& entries) {
  StateDict dict;
  dict.reserve(entries.size());
  std::unordered_set<std::string> seen;
  for (const FlatEntry& entry : entries) {
    if (!seen.insert(entry.path).second)
      return make_error(ErrorKind::invalid_argument, "path '" + entry.path + "' appears more than once");
    dict.push_back({entry.path, StateNode(entry.entry)});
  }
  return StateNode(std::move(dict));
}

std::vector<FlatEntry> flatten(const StateNode& tree) {
  std::vector<FlatEntry> out;
  visit_leaves(tree, [&](const std::string& path, const Leaf& leaf) { out.push_back({path, leaf}); });
  return out;
}

}  // namespace ih
