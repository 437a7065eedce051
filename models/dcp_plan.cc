#include "models/dcp_plan.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <utility>

#include "models/text.h"

namespace ih {
namespace {

std::string show_chunk(const DcpWriteItem& item) {
  return "offsets (" + join_ints(item.offsets, ", ") + ") sizes (" + join_ints(item.sizes, ", ") + ")";
}

/// Product of `dims`, nullopt on overflow or a negative entry.
std::optional<std::int64_t> volume(const Shape& dims) {
  std::int64_t v = 1;
  for (std::int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(v, d, &v)) return std::nullopt;
  return v;
}

bool in_bounds(const Shape& size, const DcpWriteItem& c) {
  if (c.offsets.size() != size.size() || c.sizes.size() != size.size()) return false;
  for (std::size_t i = 0; i < size.size(); ++i) {
    std::int64_t end = 0;
    if (c.offsets[i] < 0 || c.sizes[i] < 0 || __builtin_add_overflow(c.offsets[i], c.sizes[i], &end) || end > size[i])
      return false;
  }
  return true;
}

/// offset + size, saturated at the int64 limits (metadata may be hostile; Python ints do not wrap).
std::int64_t end_of(std::int64_t offset, std::int64_t size) {
  std::int64_t end = 0;
  if (!__builtin_add_overflow(offset, size, &end)) return end;
  return size > 0 ? INT64_MAX : INT64_MIN;
}

bool boxes_overlap(const DcpWriteItem& a, const DcpWriteItem& b) {
  const std::size_t n = std::min({a.offsets.size(), b.offsets.size(), a.sizes.size(), b.sizes.size()});
  for (std::size_t i = 0; i < n; ++i) {
    if (a.offsets[i] >= end_of(b.offsets[i], b.sizes[i])) return false;
    if (b.offsets[i] >= end_of(a.offsets[i], a.sizes[i])) return false;
  }
  return true;
}

/// The pairwise overlap sweep of _validate_global_plan on one key's chunks.
void sweep_overlaps(const std::string& key, const Shape& size, const std::vector<const DcpWriteItem*>& chunks,
                    std::vector<std::string>& errors) {
  const std::size_t dims = size.size();
  std::size_t sweep = 0;  // the first largest axis
  for (std::size_t d = 1; d < dims; ++d)
    if (size[d] > size[sweep]) sweep = d;
  std::vector<std::size_t> order(chunks.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  const auto sort_key = [&](std::size_t i) {
    Shape k{chunks[i]->offsets.size() > sweep ? chunks[i]->offsets[sweep] : 0};
    k.insert(k.end(), chunks[i]->offsets.begin(), chunks[i]->offsets.end());
    return k;
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return sort_key(x) < sort_key(y); });
  std::vector<std::pair<std::int64_t, std::size_t>> active;  // (end on the sweep axis, chunk), sorted
  for (std::size_t idx : order) {
    const DcpWriteItem& current = *chunks[idx];
    const std::int64_t start = current.offsets.size() > sweep ? current.offsets[sweep] : 0;
    const std::int64_t end = end_of(start, current.sizes.size() > sweep ? current.sizes[sweep] : 0);
    // Drop every active chunk that ends at or before this one starts.
    active.erase(active.begin(),
                 std::upper_bound(active.begin(), active.end(), std::make_pair(start, static_cast<std::size_t>(-1))));
    for (const auto& [_, other] : active)
      if (boxes_overlap(current, *chunks[other]))
        errors.push_back("key:" + key + " has overlapping chunks: " + show_chunk(current) + " " +
                         show_chunk(*chunks[other]));
    active.insert(std::upper_bound(active.begin(), active.end(), std::make_pair(end, idx)), {end, idx});
  }
}

}  // namespace

Status DcpPlanReport::status() const {
  if (errors.empty()) return Ok{};
  std::string joined;
  for (const std::string& e : errors) joined += (joined.empty() ? "" : "; ") + e;
  if (joined.size() > 500) joined = joined.substr(0, 500) + "... (truncated)";
  return make_error(ErrorKind::invalid_sharding_pattern, "Failed to validate global plan: " + joined);
}

std::int64_t dcp_element_size(const std::string& dtype) {
  if (dtype == "bfloat16" || dtype == "float16" || dtype == "int16") return 2;
  if (dtype == "float64" || dtype == "int64") return 8;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool" || dtype.starts_with("float8")) return 1;
  return 4;
}

std::vector<std::vector<DcpWriteItem>> dcp_dedup_save_plans(const std::vector<std::vector<DcpWriteItem>>& plans) {
  using Index = std::pair<std::string, Shape>;  // MetadataIndex: fqn and offset
  std::vector<Index> first_seen;
  std::map<Index, std::set<std::size_t>> planned_by;
  std::map<Index, const DcpWriteItem*> last_item;
  for (std::size_t p = 0; p < plans.size(); ++p)
    for (const DcpWriteItem& item : plans[p]) {
      Index index{item.key, item.offsets};
      auto& owners = planned_by[index];
      if (owners.empty() && !last_item.count(index)) first_seen.push_back(index);
      owners.insert(p);
      last_item[index] = &item;
    }
  std::vector<std::int64_t> plan_size(plans.size(), 0);
  std::map<Index, std::size_t> keeper;
  for (const Index& index : first_seen) {
    const std::set<std::size_t>& owners = planned_by[index];
    std::size_t chosen = *owners.begin();
    for (std::size_t p : owners)
      if (plan_size[p] < plan_size[chosen]) chosen = p;  // ties keep the lowest rank
    const std::int64_t bytes = volume(last_item[index]->sizes).value_or(0) * last_item[index]->element_size;
    plan_size[chosen] += bytes == 0 ? 1 : bytes;
    keeper[index] = chosen;
  }
  std::vector<std::vector<DcpWriteItem>> out(plans.size());
  for (std::size_t p = 0; p < plans.size(); ++p)
    for (const DcpWriteItem& item : plans[p])
      if (keeper[{item.key, item.offsets}] == p) out[p].push_back(item);
  return out;
}

std::vector<std::string> dcp_validate_global_plan(const std::vector<std::vector<DcpWriteItem>>& plans) {
  // create_default_global_save_plan: a key's size comes from its first item, chunks in plan order.
  std::vector<std::string> keys;
  std::map<std::string, std::pair<Shape, std::vector<const DcpWriteItem*>>> metadata;
  for (const auto& plan : plans)
    for (const DcpWriteItem& item : plan) {
      auto [it, inserted] = metadata.try_emplace(item.key, item.tensor_size, std::vector<const DcpWriteItem*>{});
      if (inserted) keys.push_back(item.key);
      it->second.second.push_back(&item);
    }
  std::vector<std::string> errors;
  for (const std::string& key : keys) {
    const auto& [size, chunks] = metadata[key];
    if (size.empty()) continue;  // 0-dim tensors are not checked
    std::int64_t chunks_volume = 0;
    bool overflow = false;
    for (const DcpWriteItem* chunk : chunks) {
      if (!in_bounds(size, *chunk))
        errors.push_back("key:" + key + " has out of bounds chunk: tensor-size:(" + join_ints(size, ", ") +
                         ") chunk: " + show_chunk(*chunk));
      const auto v = volume(chunk->sizes);
      if (!v || __builtin_add_overflow(chunks_volume, *v, &chunks_volume)) overflow = true;
    }
    if (chunks.size() > 1) sweep_overlaps(key, size, chunks, errors);
    const auto tensor_volume = volume(size);
    if (plans.size() > 1 && (overflow || !tensor_volume || *tensor_volume != chunks_volume))
      errors.push_back("key:" + key + " invalid fill tensor-volume: " +
                       (tensor_volume ? std::to_string(*tensor_volume) : std::string("overflow")) +
                       " chunks-volume: " + (overflow ? std::string("overflow") : std::to_string(chunks_volume)));
  }
  return errors;
}

DcpPlanReport dcp_validate_save_plan(const GlobalMetadata& metadata, std::optional<std::int64_t> world_size) {
  std::int64_t world = 1;
  for (const RankedTensor& t : metadata.tensors) world = std::max(world, t.rank + 1);
  for (const RankedObject& o : metadata.objects) world = std::max(world, o.rank + 1);
  if (metadata.world_size > world) world = metadata.world_size;
  if (world_size && *world_size > world) world = *world_size;
  std::vector<std::vector<DcpWriteItem>> plans(static_cast<std::size_t>(world));
  for (const RankedTensor& t : metadata.tensors) {
    if (!t.tensor.is_main_replica() || t.rank < 0) continue;  // only main replicas are written
    DcpWriteItem item{t.tensor.key, t.tensor.global_offset,
                      Shape(static_cast<std::size_t>(std::max<std::int64_t>(0, t.tensor.prepend_axis_num)), 1),
                      t.tensor.global_shape, dcp_element_size(t.tensor.dtype)};
    item.sizes.insert(item.sizes.end(), t.tensor.local_shape.begin(), t.tensor.local_shape.end());
    plans[static_cast<std::size_t>(t.rank)].push_back(std::move(item));
  }
  DcpPlanReport out;
  out.plans = dcp_dedup_save_plans(plans);
  out.errors = dcp_validate_global_plan(out.plans);
  return out;
}

}  // namespace ih
