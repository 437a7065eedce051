// Exact sharding-integrity checks on boxes (what a save must satisfy), and Megatron's own weaker
// validate_sharding_integrity (spec 3.7) beside it, so a report can show what Megatron misses.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/box_tiling.h"
#include "models/state_tree.h"

namespace ih {

/// One rank's ShardedTensor metadata (data stripped), as determine_global_metadata gathers it.
struct RankedTensor {
  std::int64_t rank = 0;
  ShardedTensor tensor;
};

/// One rank's ShardedObject metadata.
struct RankedObject {
  std::int64_t rank = 0;
  ShardedObject object;
};

/// The all-gathered metadata of every rank, in rank order.
struct GlobalMetadata {
  std::vector<RankedTensor> tensors;
  std::vector<RankedObject> objects;
  /// Ranks that took part in the save, entries or not (0: the highest rank seen + 1). DCP's fill
  /// check depends on it: it runs only when more than one rank plans (models/dcp_plan.h).
  std::int64_t world_size = 0;

  /// Appends the ST/SO leaves of one rank's save-preprocessed sharded tree (without data).
  void add_tree(std::int64_t rank, const StateNode& sharded);
};

/// What an integrity problem is about.
enum class ProblemKind {
  hole,              // part of a key's global shape no main replica writes
  overlap,           // two main replicas write the same elements
  out_of_bounds,     // offset + local outside the global shape, negative sizes, or rank mismatch
  shape_mismatch,    // entries of one key disagree on the global shape
  dtype_mismatch,    // entries of one key disagree on the dtype
  missing_key,       // in the reference key set, not saved
  unexpected_key,    // saved, not in the reference key set
  duplicate_object,  // two main-replica ShardedObjects with one unique key
  missing_object,    // a ShardedObject shard nobody saves
};

/// The stable snake_case name of a problem kind.
std::string to_string(ProblemKind kind);

/// One problem, with the key, the box (if any) and the ranks involved.
struct IntegrityProblem {
  ProblemKind kind;
  std::string key;
  std::optional<Box> box;
  std::vector<std::int64_t> ranks;
  std::string message;  // self-contained: names key, box and ranks
};

/// Every problem found (the check never stops at the first).
struct IntegrityReport {
  std::vector<IntegrityProblem> problems;
  bool ok() const { return problems.empty(); }
  /// The messages, one per problem.
  std::vector<std::string> messages() const;
};

/// Exact checks: per key, main-replica tensors tile the global shape exactly once (regular and
/// uneven grids alike), every box lies inside the global shape, all entries agree on global shape
/// and dtype; objects are unique and complete; key sets equal `reference_keys` when given.
/// Cost: O(n log n) in the number of entries plus the boundary slabs; nothing per element.
IntegrityReport check_integrity(const GlobalMetadata& metadata,
                                const std::optional<std::vector<std::string>>& reference_keys = std::nullopt);

/// The ShardedObject half of check_integrity for one key (integrity_objects.cc).
void check_object_key(const std::string& key, const std::vector<const RankedObject*>& entries,
                      std::vector<IntegrityProblem>& out);

/// What Megatron's validate_sharding_integrity concludes (spec 3.7 steps 3-6, rank 0's view).
struct MegatronValidation {
  std::optional<std::string> assertion;  // an assert fired (the run aborts there)
  /// What stopped the checks was another exception than an assert (`assertion` holds its message): the run aborts
  /// too, but on a crash of the checks themselves (an IndexError in the access counter), not on their verdict.
  bool crashed = false;
  std::vector<std::string> errors;  // collected "Invalid access pattern ..." messages
  /// What PyTorch DCP's coordinator then concludes on the main replicas' save plans
  /// (_validate_global_plan, models/dcp_plan.h); nullopt where the implementation does not say.
  /// A real save reaches it only when the checks above pass (or validation is off).
  std::optional<std::vector<std::string>> dcp_plan_errors;
  /// Whether the public entry a save calls (validate_sharding_integrity over every rank's entries) accepted the
  /// save; nullopt where the implementation runs only the per-key checks above. It must refuse exactly what they
  /// refuse: a save path that skips keys or ranks would accept a broken save its per-key checks catch.
  std::optional<bool> entry_accepted;
  /// Ok, sharding_assertion, or invalid_sharding_pattern with every error joined.
  Status status() const;
  /// "validate_sharding_integrity accepted it" or "... refused it" where the entry disagrees with the per-key
  /// checks' verdict; empty where it agrees or did not run.
  std::string entry_disagreement() const;
};

/// Megatron's checks: asserts on dtype/global shape/grid kind/local shape, a counter over
/// axis_fragmentations for regular grids only (irregular grids are skipped), SO duplicates/count.
MegatronValidation megatron_validate_sharding(const GlobalMetadata& metadata);

}  // namespace ih
