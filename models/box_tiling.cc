#include "models/box_tiling.h"

#include <algorithm>
#include <set>

#include "models/text.h"

namespace ih {

bool Box::empty() const {
  for (std::size_t a = 0; a < lo.size(); ++a)
    if (lo[a] >= hi[a]) return true;
  return false;
}

std::string Box::to_string() const {
  std::vector<std::int64_t> shape(lo.size());
  for (std::size_t a = 0; a < lo.size(); ++a) shape[a] = hi[a] - lo[a];
  return "offset (" + join_ints(lo, ", ") + ") shape (" + join_ints(shape, ", ") + ")";
}

Box intersect(const Box& a, const Box& b) {
  Box out{a.lo, a.hi};
  for (std::size_t i = 0; i < a.rank(); ++i) {
    out.lo[i] = std::max(a.lo[i], b.lo[i]);
    out.hi[i] = std::max(out.lo[i], std::min(a.hi[i], b.hi[i]));
  }
  return out;
}

namespace {

class Sweep {
 public:
  explicit Sweep(const std::vector<Box>& pieces) : pieces_(pieces) {}

  // Covers `region` on axes >= axis with the `active` pieces (all span region on axes < axis).
  void run(Box& region, std::size_t axis, std::vector<std::size_t> active) {
    if (axis == region.rank()) return leaf(region, active);
    std::sort(active.begin(), active.end(),
              [&](std::size_t x, std::size_t y) { return pieces_[x].lo[axis] < pieces_[y].lo[axis]; });
    std::vector<std::int64_t> cuts{region.lo[axis], region.hi[axis]};
    for (std::size_t i : active) cuts.insert(cuts.end(), {pieces_[i].lo[axis], pieces_[i].hi[axis]});
    std::sort(cuts.begin(), cuts.end());
    cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
    const std::int64_t lo = region.lo[axis], hi = region.hi[axis];
    std::vector<std::size_t> current;
    std::size_t next = 0;
    for (std::size_t k = 0; k + 1 < cuts.size(); ++k) {
      const std::int64_t a = cuts[k], b = cuts[k + 1];
      while (next < active.size() && pieces_[active[next]].lo[axis] <= a) current.push_back(active[next++]);
      std::erase_if(current, [&](std::size_t i) { return pieces_[i].hi[axis] <= a; });
      region.lo[axis] = a;
      region.hi[axis] = b;
      run(region, axis + 1, current);
    }
    region.lo[axis] = lo;
    region.hi[axis] = hi;
  }

  TilingFindings finish();

 private:
  void leaf(const Box& cell, const std::vector<std::size_t>& active) {
    if (active.empty()) holes_.push_back(cell);
    for (std::size_t x = 0; x < active.size(); ++x)
      for (std::size_t y = x + 1; y < active.size(); ++y) pairs_.insert(std::minmax(active[x], active[y]));
  }

  const std::vector<Box>& pieces_;
  std::vector<Box> holes_;
  std::set<std::pair<std::size_t, std::size_t>> pairs_;
};

// Joins holes that differ only on `axis` and touch there, so one missing piece is one box.
void coalesce(std::vector<Box>& holes, std::size_t axis) {
  const auto others_less = [axis](const Box& x, const Box& y) {
    for (std::size_t a = 0; a < x.rank(); ++a) {
      if (a == axis) continue;
      if (x.lo[a] != y.lo[a]) return x.lo[a] < y.lo[a];
      if (x.hi[a] != y.hi[a]) return x.hi[a] < y.hi[a];
    }
    return x.lo[axis] < y.lo[axis];
  };
  std::sort(holes.begin(), holes.end(), others_less);
  std::vector<Box> out;
  for (Box& hole : holes) {
    if (!out.empty()) {
      Box& last = out.back();
      Box probe = hole;
      probe.lo[axis] = last.lo[axis];
      probe.hi[axis] = last.hi[axis];
      if (probe == last && last.hi[axis] == hole.lo[axis]) {
        last.hi[axis] = hole.hi[axis];
        continue;
      }
    }
    out.push_back(std::move(hole));
  }
  holes = std::move(out);
}

TilingFindings Sweep::finish() {
  TilingFindings out;
  out.holes = std::move(holes_);
  for (std::size_t axis = out.holes.empty() ? 0 : out.holes.front().rank(); axis-- > 0;) coalesce(out.holes, axis);
  std::sort(out.holes.begin(), out.holes.end(), [](const Box& x, const Box& y) { return x.lo < y.lo; });
  out.overlaps.assign(pairs_.begin(), pairs_.end());
  return out;
}

}  // namespace

TilingFindings find_holes_and_overlaps(const Box& region, const std::vector<Box>& pieces) {
  Sweep sweep(pieces);
  std::vector<std::size_t> all(pieces.size());
  for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
  Box scratch = region;
  if (!region.empty()) sweep.run(scratch, 0, std::move(all));
  return sweep.finish();
}

}  // namespace ih
