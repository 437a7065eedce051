#include "models/integrity.h"

#include <algorithm>
#include <map>
#include <set>

#include "models/text.h"

namespace ih {

void GlobalMetadata::add_tree(std::int64_t rank, const StateNode& sharded) {
  visit_leaves(sharded, [&](const std::string&, const Leaf& leaf) {
    if (const auto* t = std::get_if<ShardedTensor>(&leaf)) tensors.push_back({rank, t->without_data()});
    if (const auto* o = std::get_if<ShardedObject>(&leaf)) {
      ShardedObject copy = *o;
      copy.data.reset();
      objects.push_back({rank, std::move(copy)});
    }
  });
}

std::string to_string(ProblemKind kind) {
  switch (kind) {
    case ProblemKind::hole: return "hole";
    case ProblemKind::overlap: return "overlap";
    case ProblemKind::out_of_bounds: return "out_of_bounds";
    case ProblemKind::shape_mismatch: return "shape_mismatch";
    case ProblemKind::dtype_mismatch: return "dtype_mismatch";
    case ProblemKind::missing_key: return "missing_key";
    case ProblemKind::unexpected_key: return "unexpected_key";
    case ProblemKind::duplicate_object: return "duplicate_object";
    case ProblemKind::missing_object: return "missing_object";
  }
  return "unknown";
}

std::vector<std::string> IntegrityReport::messages() const {
  std::vector<std::string> out;
  for (const IntegrityProblem& p : problems) out.push_back(p.message);
  return out;
}

namespace {

constexpr std::size_t kMaxFindingsPerKey = 64;  // a broken key can have many holes; keep reports readable

std::string ranks_text(const std::vector<std::int64_t>& ranks) { return "[" + join_ints(ranks, ", ") + "]"; }

std::string shape_text(const Shape& shape) { return "(" + join_ints(shape, ", ") + ")"; }

// The entry's box, or a message saying why it has none. Prepended axes have local size 1.
std::optional<Box> box_of(const ShardedTensor& t, std::string& why) {
  const std::size_t n = t.global_shape.size();
  if (t.global_offset.size() != n || t.prepend_axis_num < 0 || t.local_shape.size() + t.prepend_axis_num != n) {
    why = "offset/local/global ranks disagree";
    return std::nullopt;
  }
  Box box{Shape(n), Shape(n)};
  for (std::size_t a = 0; a < n; ++a) {
    const std::int64_t local =
        a < static_cast<std::size_t>(t.prepend_axis_num) ? 1 : t.local_shape[a - t.prepend_axis_num];
    box.lo[a] = t.global_offset[a];
    if (local < 0 || box.lo[a] < 0 || __builtin_add_overflow(box.lo[a], local, &box.hi[a])) {
      why = "negative or overflowing offset/local size on axis " + std::to_string(a);
      return std::nullopt;
    }
  }
  return box;
}

bool touches(const Box& piece, const Box& hole) {
  bool face = false;
  for (std::size_t a = 0; a < hole.rank(); ++a) {
    if (piece.hi[a] == hole.lo[a] || piece.lo[a] == hole.hi[a])
      face = true;
    else if (piece.hi[a] <= hole.lo[a] || piece.lo[a] >= hole.hi[a])
      return false;
  }
  return face;
}

template <class Entry, class Field>
void report_disagreement(const std::string& key, const std::vector<const Entry*>& entries, Field field,
                         ProblemKind kind, const std::string& what, std::vector<IntegrityProblem>& out) {
  std::map<std::string, std::vector<std::int64_t>> differing;
  const std::string expected = field(*entries.front());
  for (const Entry* e : entries)
    if (field(*e) != expected) differing[field(*e)].push_back(e->rank);
  for (const auto& [value, ranks] : differing)
    out.push_back({kind, key, std::nullopt, ranks,
                   "key " + key + ": " + what + " " + value + " on ranks " + ranks_text(ranks) + " differs from " +
                       expected + " on rank " + std::to_string(entries.front()->rank)});
}

struct KeyBoxes {
  Box region;
  std::vector<Box> boxes;
  std::vector<std::int64_t> ranks;
};

KeyBoxes collect_boxes(const std::string& key, const std::vector<const RankedTensor*>& entries,
                       std::vector<IntegrityProblem>& out) {
  const Shape& global = entries.front()->tensor.global_shape;
  KeyBoxes kb{Box{Shape(global.size(), 0), global}, {}, {}};
  for (const RankedTensor* e : entries) {
    if (!e->tensor.is_main_replica() || e->tensor.global_shape != global) continue;
    std::string why;
    std::optional<Box> box = box_of(e->tensor, why);
    if (box && intersect(*box, kb.region) != *box)
      why = "box " + box->to_string() + " exceeds global shape " + shape_text(global);
    if (!why.empty())
      out.push_back({ProblemKind::out_of_bounds,
                     key,
                     box,
                     {e->rank},
                     "key " + key + ": rank " + std::to_string(e->rank) + " entry out of bounds: " + why});
    if (!box) continue;
    Box clipped = intersect(*box, kb.region);  // still tile-check what lies inside
    if (clipped.empty()) continue;
    kb.boxes.push_back(std::move(clipped));
    kb.ranks.push_back(e->rank);
  }
  return kb;
}

void check_tensor_key(const std::string& key, const std::vector<const RankedTensor*>& entries,
                      std::vector<IntegrityProblem>& out) {
  report_disagreement(
      key, entries, [](const RankedTensor& e) { return shape_text(e.tensor.global_shape); },
      ProblemKind::shape_mismatch, "global shape", out);
  report_disagreement(
      key, entries, [](const RankedTensor& e) { return e.tensor.dtype; }, ProblemKind::dtype_mismatch, "dtype", out);
  const KeyBoxes kb = collect_boxes(key, entries, out);
  const TilingFindings found = find_holes_and_overlaps(kb.region, kb.boxes);
  for (std::size_t h = 0; h < found.holes.size() && h < kMaxFindingsPerKey; ++h) {
    const Box& hole = found.holes[h];
    std::set<std::int64_t> near;
    for (std::size_t i = 0; i < kb.boxes.size() && near.size() < 16; ++i)
      if (touches(kb.boxes[i], hole)) near.insert(kb.ranks[i]);
    std::vector<std::int64_t> ranks(near.begin(), near.end());
    out.push_back({ProblemKind::hole, key, hole, ranks,
                   "key " + key + ": hole at " + hole.to_string() + " (no main replica writes it; neighbouring ranks " +
                       ranks_text(ranks) + ")"});
  }
  for (std::size_t p = 0; p < found.overlaps.size() && p < kMaxFindingsPerKey; ++p) {
    const auto [i, j] = found.overlaps[p];
    const Box both = intersect(kb.boxes[i], kb.boxes[j]);
    out.push_back({ProblemKind::overlap,
                   key,
                   both,
                   {kb.ranks[i], kb.ranks[j]},
                   "key " + key + ": overlap at " + both.to_string() + " written by ranks " +
                       std::to_string(kb.ranks[i]) + " and " + std::to_string(kb.ranks[j])});
  }
  const std::size_t extra = found.holes.size() + found.overlaps.size();
  if (found.holes.size() > kMaxFindingsPerKey || found.overlaps.size() > kMaxFindingsPerKey)
    out.push_back({ProblemKind::hole,
                   key,
                   std::nullopt,
                   {},
                   "key " + key + ": " + std::to_string(extra) + " holes/overlaps in total, report truncated"});
}

}  // namespace

IntegrityReport check_integrity(const GlobalMetadata& metadata,
                                const std::optional<std::vector<std::string>>& reference_keys) {
  std::map<std::string, std::vector<const RankedTensor*>> tensors;
  std::map<std::string, std::vector<const RankedObject*>> objects;
  for (const RankedTensor& e : metadata.tensors) tensors[e.tensor.key].push_back(&e);
  for (const RankedObject& e : metadata.objects) objects[e.object.key].push_back(&e);
  IntegrityReport report;
  for (const auto& [key, entries] : tensors) check_tensor_key(key, entries, report.problems);
  for (const auto& [key, entries] : objects) check_object_key(key, entries, report.problems);
  if (!reference_keys) return report;
  const std::set<std::string> expected(reference_keys->begin(), reference_keys->end());
  std::set<std::string> actual;
  for (const auto& [key, entries] : tensors) actual.insert(key);
  for (const auto& [key, entries] : objects) actual.insert(key);
  for (const std::string& key : expected)
    if (!actual.count(key))
      report.problems.push_back(
          {ProblemKind::missing_key, key, std::nullopt, {}, "key " + key + " is missing from the save"});
  for (const std::string& key : actual)
    if (!expected.count(key))
      report.problems.push_back(
          {ProblemKind::unexpected_key, key, std::nullopt, {}, "key " + key + " is not in the reference key set"});
  return report;
}

}  // namespace ih
