// The flat, JSON-shaped form of a sharded state dict that crosses the Implementation seam:
// a list of (path, entry). Paths are kept verbatim as the keys of one dict, like the flat dict
// Megatron's model.sharded_state_dict() returns; retargeting never renames structure keys.
#pragma once

#include <string>
#include <vector>

#include "models/state_tree.h"

namespace ih {

struct FlatEntry {
  std::string path;
  Leaf entry;  // ShardedTensor, ShardedObject, LocalNonpersistent or PlainValue
  bool operator==(const FlatEntry&) const = default;
};

/// One dict keyed by path, in order; a repeated path is an invalid_argument error.
Result<StateNode> unflatten(const std::vector<FlatEntry>& entries);
/// Every leaf with its dot-joined path, in tree order.
std::vector<FlatEntry> flatten(const StateNode& tree);

}  // namespace ih
