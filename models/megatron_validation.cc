// Megatron's validate_sharding_integrity as it is (spec 3.7), weaknesses included: irregular grids
// are not checked at all and the counter lives on axis_fragmentations, not on elements.
#include <map>
#include <set>

#include "models/dcp_plan.h"
#include "models/integrity.h"
#include "models/text.h"

namespace ih {
namespace {

constexpr std::int64_t kMaxCounterCells = std::int64_t{1} << 26;  // Megatron's counters are tiny; refuse absurd ones

std::string describe(const ShardedTensor& t) {
  return "ShardedTensor(key='" + t.key + "', global_shape=(" + join_ints(t.global_shape, ", ") + "))";
}

// The asserts of _validate_sharding_for_key; the message of the first that fires.
std::optional<std::string> grid_asserts(const std::vector<const RankedTensor*>& entries) {
  const ShardedTensor& first = entries.front()->tensor;
  for (const RankedTensor* e : entries) {
    const ShardedTensor& t = e->tensor;
    const std::string where = " (rank " + std::to_string(e->rank) + ", " + describe(first) + ")";
    if (t.dtype != first.dtype) return "AssertionError: dtype " + t.dtype + " != " + first.dtype + where;
    if (t.global_shape != first.global_shape)
      return "AssertionError: global_shape (" + join_ints(t.global_shape, ", ") + ") differs" + where;
    if (t.has_regular_grid() != first.has_regular_grid()) return "AssertionError: has_regular_grid differs" + where;
    if (first.has_regular_grid() && t.local_shape != first.local_shape)
      return "AssertionError: local_shape (" + join_ints(t.local_shape, ", ") + ") differs" + where;
  }
  return std::nullopt;
}

// _compute_shards_access: counts main replicas per chunk; returns (holes, duplicates) or an abort.
Result<std::pair<std::int64_t, std::int64_t>> count_access(const std::vector<const RankedTensor*>& entries) {
  const Shape& frag = *entries.front()->tensor.axis_fragmentations;
  std::int64_t cells = 1;
  for (std::int64_t f : frag)
    if (f <= 0 || __builtin_mul_overflow(cells, f, &cells) || cells > kMaxCounterCells)
      return make_error(ErrorKind::sharding_assertion,
                        "counter shape (" + join_ints(frag, ", ") + ") is not allocatable");
  std::vector<std::int32_t> counter(static_cast<std::size_t>(cells), 0);
  for (const RankedTensor* e : entries) {
    if (!e->tensor.is_main_replica()) continue;
    IH_TRY_ASSIGN(chunk, e->tensor.local_chunk_offset_in_global());
    if (chunk.size() != frag.size())
      return make_error(ErrorKind::sharding_assertion, "IndexError: chunk index rank differs from the counter's");
    std::int64_t flat = 0;
    for (std::size_t a = 0; a < frag.size(); ++a) {
      if (chunk[a] < 0 || chunk[a] >= frag[a])
        return make_error(ErrorKind::sharding_assertion, "IndexError: chunk (" + join_ints(chunk, ", ") +
                                                             ") outside counter (" + join_ints(frag, ", ") + ")");
      flat = flat * frag[a] + chunk[a];
    }
    ++counter[static_cast<std::size_t>(flat)];
  }
  std::int64_t holes = 0, duplicates = 0;
  for (std::int32_t c : counter) (c == 0 ? holes : duplicates) += (c != 1);
  return std::make_pair(holes, duplicates);
}

void validate_objects(const std::vector<const RankedObject*>& entries, std::vector<std::string>& errors) {
  std::map<std::string, int> seen;
  std::int64_t count = 0;
  for (const RankedObject* e : entries)
    if (e->object.is_main_replica()) ++seen[e->object.unique_key()], ++count;
  std::vector<std::string> duplicates;
  for (const auto& [unique, n] : seen)
    if (n > 1) duplicates.push_back(unique);
  if (!duplicates.empty()) {
    std::string list;
    for (const std::string& d : duplicates) list += (list.empty() ? "" : ", ") + py_repr(d);
    errors.push_back("Duplicate ShardedObject keys: [" + list + "]");
  }
  std::int64_t expected = 1;
  for (std::int64_t s : entries.front()->object.global_shape)
    if (__builtin_mul_overflow(expected, s, &expected)) expected = -1;
  if (count != expected)
    errors.push_back("Invalid access pattern: " + std::to_string(expected - count) + " ShardedObject are missing.");
}

}  // namespace

Status MegatronValidation::status() const {
  if (assertion) return make_error(ErrorKind::sharding_assertion, *assertion);
  if (errors.empty()) return Ok{};
  std::string joined;
  for (const std::string& e : errors) joined += (joined.empty() ? "" : "; ") + e;
  return make_error(ErrorKind::invalid_sharding_pattern, "Invalid sharding pattern validation. Errors: " + joined);
}

std::string MegatronValidation::entry_disagreement() const {
  if (!entry_accepted || *entry_accepted == status().ok()) return std::string();
  return *entry_accepted ? "validate_sharding_integrity accepted it" : "validate_sharding_integrity refused it";
}

namespace {

MegatronValidation megatron_checks(const GlobalMetadata& metadata) {
  std::vector<std::string> order;  // keys in first-appearance order, like Python's defaultdict
  std::map<std::string, std::vector<const RankedTensor*>> tensors;
  std::map<std::string, std::vector<const RankedObject*>> objects;
  for (const RankedTensor& e : metadata.tensors) {
    auto& list = tensors[e.tensor.key];
    if (list.empty()) order.push_back(e.tensor.key);
    list.push_back(&e);
  }
  for (const RankedObject& e : metadata.objects) {
    if (tensors.count(e.object.key)) continue;  // a key's first entry decides the check; mixed keys stay tensor keys
    auto& list = objects[e.object.key];
    if (list.empty()) order.push_back(e.object.key);
    list.push_back(&e);
  }
  MegatronValidation out;
  for (const std::string& key : order) {
    if (!tensors.count(key)) {
      validate_objects(objects[key], out.errors);
      continue;
    }
    const auto& entries = tensors[key];
    if ((out.assertion = grid_asserts(entries))) return out;
    if (!entries.front()->tensor.has_regular_grid()) continue;  // irregular: nothing is checked
    auto counts = count_access(entries);
    if (!counts.ok()) {
      out.assertion = counts.error().message;
      return out;
    }
    if (counts->first || counts->second)
      out.errors.push_back("Invalid access pattern for " + describe(entries.front()->tensor) + ": " +
                           std::to_string(counts->first) + " chunks never written, " + std::to_string(counts->second) +
                           " written more than once");
  }
  return out;
}

}  // namespace

MegatronValidation megatron_validate_sharding(const GlobalMetadata& metadata) {
  MegatronValidation out = megatron_checks(metadata);
  out.dcp_plan_errors = dcp_validate_save_plan(metadata).errors;
  return out;
}

}  // namespace ih
