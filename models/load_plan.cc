// Load-plan resolution on boxes (part of checkpoint_model.h): box subtraction, no elements.
#include <algorithm>

#include "models/checkpoint_model.h"
#include "models/text.h"

namespace ih {

const std::vector<StoredChunk>* ChunkIndex::find(const std::string& key, const Shape& global) const {
  const auto it = chunks.find({key, global});
  return it == chunks.end() ? nullptr : &it->second;
}

std::vector<Shape> ChunkIndex::shapes_of(const std::string& key) const {
  std::vector<Shape> out;
  for (auto it = chunks.lower_bound({key, Shape{}}); it != chunks.end() && it->first.first == key; ++it)
    out.push_back(it->first.second);
  return out;
}

namespace {

// r minus c, as disjoint boxes (c intersects r): peel off the parts of r outside c axis by axis.
void subtract(Box r, const Box& c, std::vector<Box>& out) {
  for (std::size_t a = 0; a < r.rank(); ++a) {
    if (r.lo[a] < c.lo[a]) {
      Box below = r;
      below.hi[a] = c.lo[a];
      out.push_back(below);
      r.lo[a] = c.lo[a];
    }
    if (c.hi[a] < r.hi[a]) {
      Box above = r;
      above.lo[a] = c.hi[a];
      out.push_back(above);
      r.hi[a] = c.hi[a];
    }
  }
}

Box shifted(const Box& b, const std::vector<std::int64_t>& origin) {
  Box out = b;
  for (std::size_t a = 0; a < b.rank(); ++a) out.lo[a] -= origin[a], out.hi[a] -= origin[a];
  return out;
}

Result<Box> request_box(const ShardedTensor& request) {
  const std::size_t n = request.global_shape.size();
  if (request.global_offset.size() != n || request.local_shape.size() + request.prepend_axis_num != n)
    return make_error(ErrorKind::metadata_integrity,
                      "request '" + request.key + "': offset/local/global ranks disagree");
  Box box{request.global_offset, request.global_offset};
  for (std::size_t a = 0; a < n; ++a) {
    const std::int64_t local =
        a < static_cast<std::size_t>(request.prepend_axis_num) ? 1 : request.local_shape[a - request.prepend_axis_num];
    if (local < 0 || __builtin_add_overflow(box.lo[a], local, &box.hi[a]))
      return make_error(ErrorKind::overflow,
                        "request '" + request.key + "': offset + local overflows on axis " + std::to_string(a));
  }
  return box;
}

Error not_stored(const ChunkIndex& index, const ShardedTensor& request) {
  std::string shapes;
  for (const Shape& s : index.shapes_of(request.key))
    shapes += (shapes.empty() ? "" : ", ") + ("(" + join_ints(s, ", ") + ")");
  if (!shapes.empty())  // Megatron's load planner: "Global shape mismatch for loaded ... and expected ..."
    return make_error(
        ErrorKind::global_shape_mismatch,
        "global shape mismatch for key " + request.key + ": requested (" + join_ints(request.global_shape, ", ") +
            "), stored shapes: " + shapes +
            (request.allow_shape_mismatch ? " (allow_shape_mismatch does not bridge a different number of axes)" : ""));
  return make_error(ErrorKind::load_not_covered,
                    "key " + request.key + " with global shape (" + join_ints(request.global_shape, ", ") +
                        ") is not in the checkpoint" + (shapes.empty() ? "" : "; stored shapes: " + shapes));
}

/// The stored shape DCP reports for `key`: the size of the first chunk saved (lowest rank).
std::optional<Shape> first_stored_shape(const ChunkIndex& index, const std::string& key) {
  std::optional<Shape> best;
  std::int64_t best_rank = 0;
  for (const Shape& shape : index.shapes_of(key)) {
    const auto* chunks = index.find(key, shape);
    if (!chunks || chunks->empty()) continue;
    if (!best || chunks->front().rank < best_rank) best = shape, best_rank = chunks->front().rank;
  }
  return best;
}

}  // namespace

Result<LoadPlan> resolve_load_plan(const ChunkIndex& index, const ShardedTensor& request) {
  IH_TRY_ASSIGN(want, request_box(request));
  Shape stored_shape = request.global_shape;
  const std::vector<StoredChunk>* chunks = index.find(request.key, request.global_shape);
  if (!chunks) {
    const std::optional<Shape> stored = first_stored_shape(index, request.key);
    if (!stored) return not_stored(index, request);
    if (!request.allow_shape_mismatch || stored->size() != request.global_shape.size())
      return not_stored(index, request);
    stored_shape = *stored;
    chunks = index.find(request.key, stored_shape);
  }
  LoadPlan plan{request.key, request.global_shape, {}, stored_shape, {}};
  std::vector<Box> remaining;
  if (!want.empty()) remaining.push_back(want);
  for (std::size_t i = 0; i < chunks->size() && !remaining.empty(); ++i) {
    const Box& stored = (*chunks)[i].box;
    std::vector<Box> next;
    for (const Box& r : remaining) {
      const Box part = intersect(r, stored);
      if (part.empty()) {
        next.push_back(r);
        continue;
      }
      plan.reads.push_back({i, shifted(part, stored.lo), shifted(part, want.lo)});  // earlier chunks win overlaps
      subtract(r, stored, next);
    }
    remaining = std::move(next);
  }
  if (!remaining.empty() && request.allow_shape_mismatch) {
    for (const Box& r : remaining) plan.zero_fill.push_back(shifted(r, want.lo));  // zeroed before the reads
    return plan;
  }
  if (!remaining.empty())
    return make_error(ErrorKind::load_not_covered, "key " + request.key + ": requested " + want.to_string() +
                                                       " is not fully stored; first uncovered " +
                                                       remaining.front().to_string() + " (" +
                                                       std::to_string(remaining.size()) + " uncovered boxes)");
  return plan;
}

Result<TensorValue> read_value(const ChunkIndex& index, const ShardedTensor& request) {
  IH_TRY_ASSIGN(plan, resolve_load_plan(index, request));
  const std::vector<StoredChunk>& chunks = *index.find(request.key, plan.stored_shape);
  const std::size_t row_axis = request.prepend_axis_num;
  if (request.local_shape.empty()) {  // a scalar: its one stored chunk is the value
    if (plan.reads.empty()) return TensorValue::zeros({}, request.dtype);  // allow_shape_mismatch, nothing stored
    const auto& data = chunks[plan.reads.front().chunk].data;
    if (!data) return make_error(ErrorKind::not_modelled, "read_value of '" + request.key + "': chunk has no data");
    return *data;
  }
  std::sort(plan.reads.begin(), plan.reads.end(),
            [&](const ReadBox& x, const ReadBox& y) { return x.target.lo[row_axis] < y.target.lo[row_axis]; });
  std::vector<TensorValue> parts;
  for (const ReadBox& read : plan.reads) {
    const StoredChunk& chunk = chunks[read.chunk];
    for (std::size_t a = row_axis + 1; a < read.source.rank(); ++a)
      if (read.source.lo[a] != 0 || read.source.hi[a] != chunk.box.hi[a] - chunk.box.lo[a] ||
          read.target.hi[a] - read.target.lo[a] != request.local_shape[a - row_axis])
        return make_error(ErrorKind::not_modelled, "read_value of '" + request.key + "': a read is not whole rows");
    if (!chunk.data)
      return make_error(ErrorKind::not_modelled, "read_value of '" + request.key + "': chunk has no data");
    parts.push_back(chunk.data->row_view(read.source.lo[row_axis], read.source.hi[row_axis]));
  }
  if (plan.zero_fill.empty()) {
    if (parts.empty()) return TensorValue{request.local_shape, request.dtype, {}};
    return TensorValue::concat_rows(parts);
  }
  // allow_shape_mismatch: zero rows where nothing was stored, in row order with the reads.
  std::vector<std::pair<std::int64_t, TensorValue>> ordered;
  for (std::size_t i = 0; i < plan.reads.size(); ++i) ordered.emplace_back(plan.reads[i].target.lo[row_axis], parts[i]);
  for (const Box& zero : plan.zero_fill) {
    for (std::size_t a = row_axis + 1; a < zero.rank(); ++a)
      if (zero.lo[a] != 0 || zero.hi[a] != request.local_shape[a - row_axis])
        return make_error(ErrorKind::not_modelled,
                          "read_value of '" + request.key + "': a zero-filled box is not whole rows");
    Shape shape = request.local_shape;
    shape[0] = zero.hi[row_axis] - zero.lo[row_axis];
    ordered.emplace_back(zero.lo[row_axis], TensorValue::zeros(shape, request.dtype));
  }
  std::stable_sort(ordered.begin(), ordered.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::vector<TensorValue> rows;
  for (auto& [_, part] : ordered) rows.push_back(std::move(part));
  return TensorValue::concat_rows(rows);
}

}  // namespace ih
