// A cross-version round trip (docs/roundtrip.md, "Cross-version round trips") saves with one Megatron tree and
// loads with another, planned from the save tree's description of every rank's model. Where the load tree
// describes a rank's model otherwise, that is said: a structural difference (another set of paths, another
// local shape: the plan cannot be laid on the load tree's model) ends the scenario before it runs; a layout
// difference (the same tensors kept at other keys, offsets or replicas) is a problem of the scenario, which still
// runs so that the elements it moves are named.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "models/flat_state.h"

namespace ih {

struct DescriptionDifference {
  bool structural = false;  // the plan of one tree does not fit the other's model
  std::string text;         // the first difference, named by path
};

/// The first difference between two descriptions of one rank's model (its `model dump` entries), nullopt when
/// they agree. Compared: the paths, each entry's kind and local shape (structural), then each tensor's and each
/// factory's built tensors' key, shapes, offsets, fragmentation and replica id (layout).
std::optional<DescriptionDifference> description_difference(const std::vector<FlatEntry>& save_tree,
                                                            const std::vector<FlatEntry>& load_tree);

}  // namespace ih
