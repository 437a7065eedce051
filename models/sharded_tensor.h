// The distributed-checkpoint data model (spec 3.1-3.4): metadata only, data is an opaque reference.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "models/result.h"

namespace ih {

using Shape = std::vector<std::int64_t>;

/// Megatron's replica id: an int or a tuple of ints; the main replica has every coordinate 0.
struct ReplicaId {
  std::vector<std::int64_t> coords{0};
  bool is_tuple = false;

  static ReplicaId scalar(std::int64_t value) { return {{value}, false}; }
  static ReplicaId tuple(std::vector<std::int64_t> values) { return {std::move(values), true}; }
  bool is_main() const;
  std::string to_string() const;
  bool operator==(const ReplicaId&) const = default;
};

/// A run of rows of a metadata-only tensor: rows [first_row, first_row + rows) of `storage`.
/// Storage 0 means zero-filled rows (padding), which no storage backs.
struct RowBlock {
  std::uint64_t storage = 0;
  std::int64_t first_row = 0;
  std::int64_t rows = 0;
  bool is_zero() const { return storage == 0; }
  bool operator==(const RowBlock&) const = default;
};

/// A tensor without elements: shape, dtype and, block by block, which storage rows it shows.
/// Views share storage ids with their base; copies would need new ids, so "is a view" is checkable.
struct TensorValue {
  Shape shape;
  std::string dtype = "float32";
  std::vector<RowBlock> blocks;

  /// A fresh tensor backed by `storage` rows [0, shape[0]).
  static TensorValue of_storage(std::uint64_t storage, Shape shape, std::string dtype = "float32");
  /// Zero-filled rows, like torch.zeros.
  static TensorValue zeros(Shape shape, std::string dtype = "float32");
  std::int64_t rows() const { return shape.empty() ? 1 : shape[0]; }
  /// Rows [begin, end) as a view (no new storage); requires 0 <= begin <= end <= rows().
  TensorValue row_view(std::int64_t begin, std::int64_t end) const;
  /// Concatenation along rows; adjacent blocks of one storage are joined.
  static Result<TensorValue> concat_rows(const std::vector<TensorValue>& parts);
  bool operator==(const TensorValue&) const = default;
};

/// An opaque ShardedObject payload (Megatron pickles it; we only need identity).
struct ObjectRef {
  std::uint64_t id = 0;
  bool operator==(const ObjectRef&) const = default;
};

/// The value a real Megatron object carries, as JSON text (a DistributedOptimizer's common state saved in a
/// per-DP-group object): no harness identity names it, so a round trip leaves it in place and holds the load to it.
struct CarriedValue {
  std::string json;
  bool operator==(const CarriedValue&) const = default;
};

/// A ShardedObject's data: the harness's identity of a synthetic object, or what Megatron's own object carries.
using ObjectData = std::variant<ObjectRef, CarriedValue>;

/// What a LocalNonpersistentObject wraps: an entry's data (possibly none).
using Payload = std::variant<std::monostate, TensorValue, ObjectRef, CarriedValue>;

/// An object's data as what LocalNonpersistentObject(object.data) wraps.
inline Payload payload_of(const ObjectData& data) {
  return std::visit([](const auto& d) { return Payload(d); }, data);
}

/// (axis, rank offset, fragments) as passed to from_rank_offsets (spec 3.2).
struct AxisOffset {
  std::int64_t axis = 0;
  std::int64_t rank_offset = 0;
  std::int64_t fragments = 1;
};

/// ShardedTensor (spec 3.1). Fields are public like the Python dataclass; retarget mutates them.
struct ShardedTensor {
  std::string key;
  std::optional<TensorValue> data;
  std::string dtype = "float32";
  Shape local_shape;
  Shape global_shape;
  Shape global_offset;
  std::optional<Shape> axis_fragmentations;  // nullopt: uneven ("irregular") layout
  ReplicaId replica_id;
  std::int64_t prepend_axis_num = 0;
  bool allow_shape_mismatch = false;
  bool has_flattened_range = false;  // legacy field; must stay false

  /// The construction-time checks of spec 3.1 (1)-(5), in Megatron's order.
  Status validate_metadata_integrity() const;
  bool has_regular_grid() const { return axis_fragmentations.has_value(); }
  bool is_main_replica() const { return replica_id.is_main(); }
  /// Prepended offsets as is, then offset / local per remaining axis (spec 3.1).
  Result<Shape> local_chunk_offset_in_global() const;
  ShardedTensor without_data() const;

  /// spec 3.2. `local_shape` and `dtype` come from `data` (or are given when data is absent).
  static Result<ShardedTensor> from_rank_offsets(std::string key, Shape local_shape,
                                                 const std::vector<AxisOffset>& offsets, ReplicaId replica_id = {},
                                                 std::int64_t prepend_axis_num = 0,
                                                 std::optional<TensorValue> data = std::nullopt,
                                                 std::string dtype = "float32");
  /// spec 3.3: rows [start, start + length) of a regular-grid tensor along local `dim`.
  Result<ShardedTensor> narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const;
  bool operator==(const ShardedTensor&) const = default;
};

/// ShardedObject (spec 3.4); offsets and shape count shards, not elements.
struct ShardedObject {
  std::string key;
  std::optional<ObjectData> data;
  Shape global_shape{1};
  Shape global_offset{0};
  ReplicaId replica_id;

  Status validate_metadata_integrity() const;
  bool is_main_replica() const { return replica_id.is_main(); }
  /// "<key>/shard_<offsets joined by .>_<shape joined by .>".
  std::string unique_key() const;
  /// Inverse of unique_key (with the legacy -1 shape extension); keys containing '/' do not parse.
  static Result<ShardedObject> from_unique_key(const std::string& unique_key);
  bool operator==(const ShardedObject&) const = default;
};

/// LocalNonpersistentObject: never saved; on load its payload is put back at its position.
struct LocalNonpersistent {
  Payload payload;
  bool operator==(const LocalNonpersistent&) const = default;
};

}  // namespace ih
