#include "models/sharded_tensor.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include "models/checked_math.h"
#include "models/text.h"

namespace ih {

bool ReplicaId::is_main() const {
  return std::all_of(coords.begin(), coords.end(), [](std::int64_t c) { return c == 0; });
}

std::string ReplicaId::to_string() const {
  if (!is_tuple) return std::to_string(coords.empty() ? 0 : coords[0]);
  return "(" + join_ints(coords, ", ") + (coords.size() == 1 ? ",)" : ")");
}

TensorValue TensorValue::of_storage(std::uint64_t storage, Shape shape, std::string dtype) {
  TensorValue out{std::move(shape), std::move(dtype), {}};
  if (out.rows() > 0) out.blocks.push_back({storage, 0, out.rows()});
  return out;
}

TensorValue TensorValue::zeros(Shape shape, std::string dtype) {
  return of_storage(0, std::move(shape), std::move(dtype));
}

TensorValue TensorValue::row_view(std::int64_t begin, std::int64_t end) const {
  TensorValue out{shape, dtype, {}};
  if (!out.shape.empty()) out.shape[0] = end - begin;
  std::int64_t row = 0;
  for (const RowBlock& block : blocks) {
    const std::int64_t lo = std::max(begin, row), hi = std::min(end, row + block.rows);
    if (lo < hi) out.blocks.push_back({block.storage, block.is_zero() ? 0 : block.first_row + (lo - row), hi - lo});
    row += block.rows;
  }
  return out;
}

Result<TensorValue> TensorValue::concat_rows(const std::vector<TensorValue>& parts) {
  if (parts.empty()) return make_error(ErrorKind::invalid_argument, "concat_rows: no tensors to concatenate");
  TensorValue out{parts.front().shape, parts.front().dtype, {}};
  std::int64_t total = 0;
  for (const TensorValue& part : parts) {
    const bool same_tail = part.shape.size() == out.shape.size() && !part.shape.empty() &&
                           std::equal(part.shape.begin() + 1, part.shape.end(), out.shape.begin() + 1);
    if (!same_tail || part.dtype != out.dtype)
      return make_error(ErrorKind::invalid_argument, "concat_rows: shape (" + join_ints(part.shape, ", ") +
                                                         ") or dtype " + part.dtype + " does not match (" +
                                                         join_ints(out.shape, ", ") + ") " + out.dtype);
    IH_TRY_ASSIGN(sum, checked_add(total, part.shape[0], "concat_rows rows"));
    total = sum;
    for (const RowBlock& block : part.blocks) {
      RowBlock* last = out.blocks.empty() ? nullptr : &out.blocks.back();
      if (last && last->storage == block.storage &&
          (block.is_zero() || last->first_row + last->rows == block.first_row))
        last->rows += block.rows;
      else
        out.blocks.push_back(block);
    }
  }
  out.shape[0] = total;
  return out;
}

Status ShardedTensor::validate_metadata_integrity() const {
  const std::string self = "ShardedTensor(key='" + key + "')";
  if (data) {
    if (data->dtype != dtype)
      return make_error(ErrorKind::metadata_integrity, "Data dtype should match `dtype` attribute for " + self);
    if (data->shape != local_shape)
      return make_error(ErrorKind::metadata_integrity, "Data shape should match `local_shape` attribute for " + self);
  }
  if (global_shape.size() != global_offset.size())
    return make_error(ErrorKind::metadata_integrity,
                      "Global offset dimensions should be equal to global shape dimensions for " + self);
  if (prepend_axis_num < 0 || local_shape.size() + static_cast<std::size_t>(prepend_axis_num) != global_shape.size())
    return make_error(ErrorKind::metadata_integrity,
                      "Local shape together with `prepend_axis_num` dimensions should be equal to global shape "
                      "dimensions for " +
                          self);
  if (axis_fragmentations) {
    for (std::size_t i = 0; i < local_shape.size(); ++i) {
      const std::int64_t off = global_offset[i + prepend_axis_num], sh = local_shape[i];
      if (sh != 0 && floor_mod(off, sh) != 0)
        return make_error(ErrorKind::metadata_integrity, "Global offset (" + std::to_string(off) +
                                                             ") must be divisible by local shape (" +
                                                             std::to_string(sh) + ") for " + self + ".");
    }
  }
  if (has_flattened_range)
    return make_error(ErrorKind::metadata_integrity, "ShardedTensor.flattened_range is not supported.");
  return Ok{};
}

Result<Shape> ShardedTensor::local_chunk_offset_in_global() const {
  if (global_offset.size() != local_shape.size() + static_cast<std::size_t>(prepend_axis_num))
    return make_error(ErrorKind::metadata_integrity,
                      "key " + key + ": offset rank does not match local rank + prepend");
  Shape chunk(global_offset.begin(), global_offset.begin() + prepend_axis_num);
  for (std::size_t i = 0; i < local_shape.size(); ++i) {
    const std::int64_t off = global_offset[i + prepend_axis_num], sh = local_shape[i];
    if (sh == 0 || floor_mod(off, sh) != 0)
      return make_error(ErrorKind::metadata_integrity, "key " + key + ": offset " + std::to_string(off) +
                                                           " is not a multiple of local size " + std::to_string(sh));
    chunk.push_back(floor_div(off, sh));
  }
  return chunk;
}

ShardedTensor ShardedTensor::without_data() const {
  ShardedTensor copy = *this;
  copy.data.reset();
  return copy;
}

Result<ShardedTensor> ShardedTensor::from_rank_offsets(std::string key, Shape local_shape,
                                                       const std::vector<AxisOffset>& offsets, ReplicaId replica_id,
                                                       std::int64_t prepend_axis_num, std::optional<TensorValue> data,
                                                       std::string dtype) {
  if (data) {
    local_shape = data->shape;
    dtype = data->dtype;
  }
  if (prepend_axis_num < 0)
    return make_error(ErrorKind::invalid_rank_offsets, "negative prepend_axis_num for key " + key);
  const std::size_t rank = local_shape.size() + static_cast<std::size_t>(prepend_axis_num);
  ShardedTensor out;
  out.global_offset.assign(rank, 0);
  out.global_shape.assign(prepend_axis_num, 1);
  out.global_shape.insert(out.global_shape.end(), local_shape.begin(), local_shape.end());
  out.axis_fragmentations = Shape(rank, 1);
  for (const AxisOffset& t : offsets) {
    if (t.axis < 0 || t.rank_offset < 0 || t.fragments < 1 || t.rank_offset >= t.fragments)
      return make_error(ErrorKind::invalid_rank_offsets, "Invalid rank offsets: (" + std::to_string(t.axis) + ", " +
                                                             std::to_string(t.rank_offset) + ", " +
                                                             std::to_string(t.fragments) + ") for key " + key + ".");
    if (static_cast<std::size_t>(t.axis) >= rank)
      return make_error(ErrorKind::invalid_rank_offsets, "axis " + std::to_string(t.axis) + " is beyond the " +
                                                             std::to_string(rank) + " axes of key " + key);
    const std::int64_t local = t.axis < prepend_axis_num ? 1 : local_shape[t.axis - prepend_axis_num];
    IH_TRY_ASSIGN(global, checked_mul(t.fragments, local, "global shape of " + key));
    IH_TRY_ASSIGN(offset, checked_mul(t.rank_offset, local, "global offset of " + key));
    out.global_shape[t.axis] = global;
    out.global_offset[t.axis] = offset;
    (*out.axis_fragmentations)[t.axis] = t.fragments;
  }
  out.key = std::move(key);
  out.data = std::move(data);
  out.dtype = std::move(dtype);
  out.local_shape = std::move(local_shape);
  out.replica_id = std::move(replica_id);
  out.prepend_axis_num = prepend_axis_num;
  IH_TRY_STATUS(out.validate_metadata_integrity());
  return out;
}

Result<ShardedTensor> ShardedTensor::narrow(std::int64_t dim, std::int64_t start, std::int64_t length) const {
  if (dim < 0 || static_cast<std::size_t>(dim) >= local_shape.size() || start < 0 || length < 0 ||
      length > local_shape[dim] || start > local_shape[dim] - length)  // no start + length: it can overflow
    return make_error(ErrorKind::narrow_misaligned, "narrow(" + std::to_string(dim) + ", " + std::to_string(start) +
                                                        ", " + std::to_string(length) + ") out of range for key " +
                                                        key);
  const std::size_t axis = dim + prepend_axis_num;
  const std::int64_t local = local_shape[dim];
  if (local == 0 || global_shape[axis] % local != 0 || global_offset[axis] % local != 0)
    return make_error(ErrorKind::narrow_misaligned,
                      "Only regular grid of local tensors is supported for narrowing, got key " + key);
  ShardedTensor out = *this;
  // Both are multiples of `local` (checked above), so dividing first is exact and overflows only
  // when the answer itself does not fit.
  IH_TRY_ASSIGN(shape_scaled, checked_mul(global_shape[axis] / local, length, "narrow of " + key));
  IH_TRY_ASSIGN(offset_scaled, checked_mul(global_offset[axis] / local, length, "narrow of " + key));
  out.global_shape[axis] = shape_scaled;
  out.global_offset[axis] = offset_scaled;
  out.local_shape[dim] = length;
  if (data) {
    if (dim != 0)
      return make_error(ErrorKind::narrow_misaligned,
                        "the metadata model narrows data along rows only (key " + key + ")");
    out.data = data->row_view(start, start + length);
  }
  return out;
}

Status ShardedObject::validate_metadata_integrity() const {
  if (global_shape.size() != global_offset.size())
    return make_error(
        ErrorKind::metadata_integrity,
        "Global offset dimensions should be equal to global shape dimensions for ShardedObject(key='" + key + "')");
  return Ok{};
}

std::string ShardedObject::unique_key() const {
  return key + "/shard_" + join_ints(global_offset, ".") + "_" + join_ints(global_shape, ".");
}

Result<ShardedObject> ShardedObject::from_unique_key(const std::string& unique_key) {
  const auto parts = split(unique_key, '/');
  if (parts.size() != 2)
    return make_error(ErrorKind::invalid_argument, "unique key '" + unique_key + "' must have exactly one '/'");
  const auto fields = split(parts[1], '_');
  if (fields.size() != 3 || fields[0] != "shard")
    return make_error(ErrorKind::invalid_argument,
                      "unique key '" + unique_key + "' must end in /shard_<offset>_<shape>");
  IH_TRY_ASSIGN(offset, parse_int_list(fields[1], '.'));
  IH_TRY_ASSIGN(shape, parse_int_list(fields[2], '.'));
  if (shape.size() + 1 == offset.size()) shape.push_back(-1);  // legacy keys lack the last shape entry
  ShardedObject out{parts[0], std::nullopt, shape, offset, ReplicaId{}};
  IH_TRY_STATUS(out.validate_metadata_integrity());
  return out;
}

}  // namespace ih
