// ShardedObject checks of check_integrity: unique main replicas covering every shard once.
#include <map>
#include <set>

#include "models/integrity.h"
#include "models/text.h"

namespace ih {
namespace {

constexpr std::int64_t kMaxEnumeratedShards = 100'000;  // list missing offsets only for small grids
constexpr std::size_t kMaxListedMissing = 8;

bool offset_inside(const ShardedObject& o) {
  if (o.global_offset.size() != o.global_shape.size()) return false;
  for (std::size_t a = 0; a < o.global_shape.size(); ++a)
    if (o.global_offset[a] < 0 || o.global_offset[a] >= o.global_shape[a]) return false;
  return true;
}

// Product of the shard grid, or -1 when it overflows or is not positive.
std::int64_t grid_size(const Shape& shape) {
  std::int64_t total = 1;
  for (std::int64_t s : shape)
    if (s <= 0 || __builtin_mul_overflow(total, s, &total)) return -1;
  return total;
}

Shape unravel(std::int64_t index, const Shape& shape) {
  Shape out(shape.size());
  for (std::size_t a = shape.size(); a-- > 0;) {
    out[a] = index % shape[a];
    index /= shape[a];
  }
  return out;
}

std::string missing_list(const std::set<Shape>& present, const Shape& shape, std::int64_t total) {
  if (total > kMaxEnumeratedShards) return "";
  std::string out;
  std::size_t listed = 0;
  for (std::int64_t i = 0; i < total && listed < kMaxListedMissing; ++i) {
    Shape offset = unravel(i, shape);
    if (present.count(offset)) continue;
    out += (listed++ ? ", " : "") + std::string("(") + join_ints(offset, ", ") + ")";
  }
  return out.empty() ? "" : " e.g. offsets " + out;
}

}  // namespace

void check_object_key(const std::string& key, const std::vector<const RankedObject*>& entries,
                      std::vector<IntegrityProblem>& out) {
  const Shape& shape = entries.front()->object.global_shape;
  std::map<std::string, std::vector<std::int64_t>> writers;  // unique key -> main-replica ranks
  std::set<Shape> present;
  for (const RankedObject* e : entries) {
    const ShardedObject& o = e->object;
    const std::string where = "object " + o.unique_key() + " on rank " + std::to_string(e->rank);
    if (o.global_shape != shape) {
      out.push_back({ProblemKind::shape_mismatch,
                     key,
                     std::nullopt,
                     {e->rank},
                     "key " + key + ": " + where + " has grid (" + join_ints(o.global_shape, ", ") +
                         "), first entry (" + join_ints(shape, ", ") + ")"});
      continue;
    }
    if (!o.is_main_replica()) continue;
    if (!offset_inside(o)) {
      out.push_back({ProblemKind::out_of_bounds,
                     key,
                     std::nullopt,
                     {e->rank},
                     "key " + key + ": " + where + " lies outside its grid"});
      continue;
    }
    writers[o.unique_key()].push_back(e->rank);
    present.insert(o.global_offset);
  }
  for (const auto& [unique, ranks] : writers)
    if (ranks.size() > 1)
      out.push_back({ProblemKind::duplicate_object, key, std::nullopt, ranks,
                     "key " + key + ": " + unique + " saved by ranks [" + join_ints(ranks, ", ") + "]"});
  const std::int64_t total = grid_size(shape);
  if (total < 0) {
    out.push_back({ProblemKind::out_of_bounds,
                   key,
                   std::nullopt,
                   {},
                   "key " + key + ": object grid (" + join_ints(shape, ", ") + ") is not a valid size"});
    return;
  }
  const std::int64_t missing = total - static_cast<std::int64_t>(present.size());
  if (missing > 0)
    out.push_back({ProblemKind::missing_object,
                   key,
                   std::nullopt,
                   {},
                   "key " + key + ": " + std::to_string(missing) + " of " + std::to_string(total) +
                       " object shards are saved by nobody" + missing_list(present, shape, total)});
}

}  // namespace ih
