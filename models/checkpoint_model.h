// The checkpoint model (spec 3.6, 3.8): save preprocessing with main-replica selection, the
// stored-chunk index keyed by (key, global shape), load-plan resolution on boxes, and the three
// load orderings (serialization.load, the baseline to_state_dict and its fix).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "models/box_tiling.h"
#include "models/integrity.h"
#include "models/state_tree.h"

namespace ih {

/// save_preprocess output of one rank: sharded entries and everything else (the common part).
struct SavePreprocessed {
  StateNode sharded;
  StateNode common;
};

/// Applies factories, drops LNPs, splits ShardedBase leaves from the common part (spec 3.6).
Result<SavePreprocessed> save_preprocess(const StateNode& tree);

/// One stored chunk: a main replica's box (prepended axes have extent 1) and its data view.
struct StoredChunk {
  std::int64_t rank = 0;
  Box box;  // in global coordinates
  std::int64_t prepend_axis_num = 0;
  std::string dtype;
  std::optional<TensorValue> data;  // what the saver's entry viewed (nullopt: metadata only)
};

/// Stored chunks by (key, global shape), in rank order; a key may be stored under several shapes.
struct ChunkIndex {
  std::map<std::pair<std::string, Shape>, std::vector<StoredChunk>> chunks;

  /// The chunks of (key, global), or nullptr.
  const std::vector<StoredChunk>* find(const std::string& key, const Shape& global) const;
  /// The global shapes stored under `key` (for "stored under another shape" messages).
  std::vector<Shape> shapes_of(const std::string& key) const;
};

/// A saved checkpoint: stored chunks, object payloads by unique key, rank 0's common tree, and the
/// all-gathered metadata (every replica) for integrity checks.
struct Checkpoint {
  ChunkIndex index;
  std::map<std::string, std::optional<ObjectData>> objects;
  StateNode common;
  GlobalMetadata metadata;
};

/// Saves each rank's tree (index = rank): main replicas are stored, first writer wins in the index
/// order; the common tree is rank 0's.
Result<Checkpoint> save_checkpoint(const std::vector<StateNode>& rank_trees);

/// One read: `source` in the stored chunk's local coordinates, `target` in the request's.
struct ReadBox {
  std::size_t chunk = 0;  // index into the ChunkIndex vector of (key, global)
  Box source;
  Box target;
};

/// The exact stored sub-boxes one requested shard reads, each requested element exactly once.
struct LoadPlan {
  std::string key;
  Shape global_shape;
  std::vector<ReadBox> reads;
  /// The stored shape the reads index (== global_shape unless allow_shape_mismatch found another).
  Shape stored_shape;
  /// allow_shape_mismatch only: requested boxes no stored chunk covers, in the request's local
  /// coordinates. Megatron zero-fills the request before DCP reads, so these stay zero.
  std::vector<Box> zero_fill;
};

/// Resolves `request` against the index (spec 3.9, addendum B). A key stored under another global
/// shape is global_shape_mismatch unless the request has allow_shape_mismatch: then the reads are
/// the overlaps with the key's stored chunks (DCP's size is the first saver's) and every other
/// requested element is zero-filled, never refused. Otherwise a request not fully covered is load_not_covered naming
/// the key, the requested box and the first uncovered box.
Result<LoadPlan> resolve_load_plan(const ChunkIndex& index, const ShardedTensor& request);

/// The loaded value of `request`: row views of the stored data in row order (element provenance).
/// Needs row-shaped reads (full trailing extents) and stored data; else unsupported.
Result<TensorValue> read_value(const ChunkIndex& index, const ShardedTensor& request);

/// load_preprocess output (spec 3.6).
struct LoadPreprocessed {
  StateNode sharded;        // factories built, LNPs removed
  StateNode nonpersistent;  // unwrapped LNP payloads at their paths
  StateNode factories;      // the factories (lists as index dicts), without data
};

/// load_preprocess (spec 3.6).
Result<LoadPreprocessed> load_preprocess(const StateNode& request);

/// The load paths of spec 3.8.
enum class LoadOrder {
  serialization_load,      // merge loaded + nonpersistent + common, then factory merges
  to_state_dict_baseline,  // factory merges on the loaded shards alone, then merge into common
  to_state_dict_fixed,     // the review's fix: merge first, then factory merges (= serialization_load)
};

/// "serialization_load", "to_state_dict_baseline", "to_state_dict_fixed".
std::string to_string(LoadOrder order);

/// Loads `request` from `checkpoint` along `order`. On an all-padding GTP rank the baseline order
/// fails with merge_key_mismatch ("Different dict keys ..."), the others return zeros (R, C).
Result<StateNode> load_checkpoint(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order);

}  // namespace ih
