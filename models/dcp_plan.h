// PyTorch DCP's save-plan validation as Megatron's torch_dist save reaches it (spec addendum D):
// the main replicas become write items, the coordinator de-duplicates them by (key, offset), takes
// each key's size from the first item and runs _validate_global_plan (bounds, pairwise overlaps on
// a sweep, and a volume-only fill check when more than one rank plans).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/integrity.h"

namespace ih {

/// One write item of a save plan: a chunk of a tensor key.
struct DcpWriteItem {
  std::string key;
  Shape offsets;      // global_offset
  Shape sizes;        // (1,) * prepend_axis_num + local_shape
  Shape tensor_size;  // global_shape of the entry that planned it
  std::int64_t element_size = 4;
};

/// What the coordinator concludes.
struct DcpPlanReport {
  std::vector<std::vector<DcpWriteItem>> plans;  // per rank, after de-duplication
  std::vector<std::string> errors;               // _validate_global_plan's messages, in its order
  /// ValueError "Failed to validate global plan: ..." when errors are present.
  Status status() const;
};

/// Bytes per element of a dtype name (bfloat16 2, float32 4, ...; 4 when unknown).
std::int64_t dcp_element_size(const std::string& dtype);

/// The save plans of every rank (main-replica tensors only; ShardedObjects are byte items, which
/// the validation skips), de-duplicated and validated. The number of plans is the largest of
/// `world_size`, metadata.world_size and the highest rank seen + 1.
DcpPlanReport dcp_validate_save_plan(const GlobalMetadata& metadata,
                                     std::optional<std::int64_t> world_size = std::nullopt);

/// dedup_save_plans (save_to_lowest_rank = false): an item planned by several ranks (same key and
/// offset) stays with the rank whose plan is smallest so far; the others drop it.
std::vector<std::vector<DcpWriteItem>> dcp_dedup_save_plans(const std::vector<std::vector<DcpWriteItem>>& plans);

/// _validate_global_plan on de-duplicated plans.
std::vector<std::string> dcp_validate_global_plan(const std::vector<std::vector<DcpWriteItem>>& plans);

}  // namespace ih
