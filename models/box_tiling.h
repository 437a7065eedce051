// Exact coverage of a box by sub-boxes, computed on box coordinates only (never on elements):
// a recursive sweep over the distinct boundaries, one axis at a time.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace ih {

/// A half-open box [lo, hi) in N dimensions.
struct Box {
  std::vector<std::int64_t> lo, hi;

  std::size_t rank() const { return lo.size(); }
  bool empty() const;
  /// "offset (a, b) shape (c, d)".
  std::string to_string() const;
  bool operator==(const Box&) const = default;
};

/// The intersection of two boxes of equal rank (possibly empty).
Box intersect(const Box& a, const Box& b);

/// What the sweep found: uncovered boxes (coalesced) and index pairs of pieces that overlap.
struct TilingFindings {
  std::vector<Box> holes;
  std::vector<std::pair<std::size_t, std::size_t>> overlaps;  // i < j, sorted, unique
};

/// Covers `region` with `pieces` (already clipped to it, non-empty). Work is O(n log n + cells)
/// where cells are the distinct boundary slabs actually visited; memory is O(n + findings).
TilingFindings find_holes_and_overlaps(const Box& region, const std::vector<Box>& pieces);

}  // namespace ih
