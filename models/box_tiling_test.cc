// Exact coverage of a box by sub-boxes: holes (coalesced), overlapping pairs, exact tilings, and
// the edges: zero-size boxes, rank 0, extents near 2^63. Expected boxes are worked out by hand.
#include "models/box_tiling.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>

namespace ih {
namespace {

using Pairs = std::vector<std::pair<std::size_t, std::size_t>>;
constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

Box box1(std::int64_t lo, std::int64_t hi) { return Box{{lo}, {hi}}; }
Box box2(std::int64_t lo0, std::int64_t lo1, std::int64_t hi0, std::int64_t hi1) { return Box{{lo0, lo1}, {hi0, hi1}}; }

TEST(Box, EmptyToStringIntersect) {
  EXPECT_FALSE(box2(0, 0, 2, 3).empty());
  EXPECT_TRUE(box2(0, 3, 2, 3).empty());  // zero extent on one axis
  EXPECT_TRUE(box2(5, 0, 2, 3).empty());  // inverted
  EXPECT_FALSE((Box{{}, {}}).empty());    // rank 0: one point
  EXPECT_EQ(box2(4, 0, 6, 2).to_string(), "offset (4, 0) shape (2, 2)");
  EXPECT_EQ(intersect(box2(0, 0, 4, 4), box2(2, 3, 8, 8)), box2(2, 3, 4, 4));
  // Disjoint boxes intersect in an empty box (hi clamped to lo, never below it).
  const Box none = intersect(box1(0, 3), box1(5, 9));
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none, box1(5, 5));
}

TEST(BoxTiling, ExactTilingHasNoFindings) {
  // A 3 x 2 grid of 4 x 5 blocks tiles [0, 12) x [0, 10).
  std::vector<Box> pieces;
  for (std::int64_t i = 0; i < 3; ++i)
    for (std::int64_t j = 0; j < 2; ++j) pieces.push_back(box2(4 * i, 5 * j, 4 * i + 4, 5 * j + 5));
  const TilingFindings found = find_holes_and_overlaps(box2(0, 0, 12, 10), pieces);
  EXPECT_TRUE(found.holes.empty());
  EXPECT_TRUE(found.overlaps.empty());
}

TEST(BoxTiling, UnequalPiecesTileToo) {
  // [0, 6) x [0, 6) as: a 6 x 2 bar on top, a 2 x 4 column, a 4 x 4 square.
  const TilingFindings found =
      find_holes_and_overlaps(box2(0, 0, 6, 6), {box2(0, 0, 6, 2), box2(0, 2, 2, 6), box2(2, 2, 6, 6)});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_TRUE(found.overlaps.empty());
}

TEST(BoxTiling, OneMissingPieceIsOneHole) {
  // Rows [4, 6) missing across all columns: one coalesced hole, not one per column cut.
  const TilingFindings found = find_holes_and_overlaps(
      box2(0, 0, 10, 4), {box2(0, 0, 4, 2), box2(0, 2, 4, 4), box2(6, 0, 10, 1), box2(6, 1, 10, 4)});
  EXPECT_EQ(found.holes, (std::vector<Box>{box2(4, 0, 6, 4)}));
  EXPECT_TRUE(found.overlaps.empty());
}

TEST(BoxTiling, LShapedHoleCoalescesIntoTwoBoxes) {
  // Only [0, 2) x [0, 2) of [0, 4) x [0, 4) is covered. Cells of the 2 x 2 cut grid that are
  // uncovered: (0-2, 2-4), (2-4, 0-2), (2-4, 2-4); the last two join along axis 1.
  const TilingFindings found = find_holes_and_overlaps(box2(0, 0, 4, 4), {box2(0, 0, 2, 2)});
  EXPECT_EQ(found.holes, (std::vector<Box>{box2(0, 2, 2, 4), box2(2, 0, 4, 4)}));
}

TEST(BoxTiling, NoPiecesIsOneHoleTheRegion) {
  EXPECT_EQ(find_holes_and_overlaps(box2(1, 2, 3, 4), {}).holes, (std::vector<Box>{box2(1, 2, 3, 4)}));
}

TEST(BoxTiling, OverlapsArePairsOfIndices) {
  // Pieces 0, 1, 2 share [4, 5); piece 3 only touches piece 2 (half-open boxes do not overlap).
  const TilingFindings found = find_holes_and_overlaps(box1(0, 10), {box1(0, 5), box1(4, 6), box1(3, 8), box1(8, 10)});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_EQ(found.overlaps, (Pairs{{0, 1}, {0, 2}, {1, 2}}));
}

TEST(BoxTiling, DuplicatePiecesOverlapOnce) {
  // Three copies of one block: every pair once, i < j, sorted.
  const Box b = box2(0, 0, 2, 2);
  const TilingFindings found = find_holes_and_overlaps(b, {b, b, b});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_EQ(found.overlaps, (Pairs{{0, 1}, {0, 2}, {1, 2}}));
}

TEST(BoxTiling, OverlapIn2dNeedsBothAxes) {
  // Pieces 0 and 1 share rows [0, 2) but not columns; 1 and 2 share columns but not rows.
  // Pieces 3 and 4 overlap on [3, 4) x [3, 4) only. The rest of the region is a hole.
  const TilingFindings found = find_holes_and_overlaps(
      box2(0, 0, 6, 6), {box2(0, 0, 2, 3), box2(0, 3, 2, 6), box2(2, 3, 3, 6), box2(3, 0, 4, 4), box2(3, 3, 6, 6)});
  EXPECT_EQ(found.overlaps, (Pairs{{3, 4}}));
  // Uncovered: [2, 3) x [0, 3), and [4, 6) x [0, 3).
  EXPECT_EQ(found.holes, (std::vector<Box>{box2(2, 0, 3, 3), box2(4, 0, 6, 3)}));
}

TEST(BoxTiling, ZeroSizeRegionAndPieces) {
  // An empty region has nothing to cover.
  EXPECT_TRUE(find_holes_and_overlaps(box1(3, 3), {}).holes.empty());
  EXPECT_TRUE(find_holes_and_overlaps(box2(0, 0, 5, 0), {}).holes.empty());
  // Zero-size pieces cover nothing and overlap nothing, even inside another piece.
  TilingFindings found = find_holes_and_overlaps(box1(0, 10), {box1(0, 10), box1(5, 5), box1(0, 0), box1(10, 10)});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_TRUE(found.overlaps.empty());
  found = find_holes_and_overlaps(box2(0, 0, 4, 4), {box2(0, 0, 4, 4), box2(1, 2, 3, 2)});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_TRUE(found.overlaps.empty());
  found = find_holes_and_overlaps(box1(0, 10), {box1(5, 5)});
  EXPECT_EQ(found.holes, (std::vector<Box>{box1(0, 10)}));
}

TEST(BoxTiling, RankZeroIsOnePoint) {
  const Box point{{}, {}};
  EXPECT_EQ(find_holes_and_overlaps(point, {}).holes, (std::vector<Box>{point}));
  EXPECT_TRUE(find_holes_and_overlaps(point, {point}).holes.empty());
  EXPECT_EQ(find_holes_and_overlaps(point, {point, point}).overlaps, (Pairs{{0, 1}}));
}

TEST(BoxTiling, SixtyFourBitExtents) {
  // Extents near 2^63 are handled on coordinates, never on elements.
  const std::int64_t half = std::int64_t{1} << 62;
  TilingFindings found =
      find_holes_and_overlaps(box2(0, 0, kMax, kMax), {box2(0, 0, half, kMax), box2(half, 0, kMax, kMax)});
  EXPECT_TRUE(found.holes.empty());
  EXPECT_TRUE(found.overlaps.empty());
  // One missing element at the very end, and an overlap of one element at the very start.
  found = find_holes_and_overlaps(box1(0, kMax), {box1(0, 1), box1(0, kMax - 1)});
  EXPECT_EQ(found.holes, (std::vector<Box>{box1(kMax - 1, kMax)}));
  EXPECT_EQ(found.overlaps, (Pairs{{0, 1}}));
  // Negative coordinates down to INT64_MIN.
  found = find_holes_and_overlaps(box1(kMin, 0), {box1(kMin, -5), box1(-4, 0)});
  EXPECT_EQ(found.holes, (std::vector<Box>{box1(-5, -4)}));
  EXPECT_EQ(box1(kMax - 3, kMax).to_string(), "offset (9223372036854775804) shape (3)");
}

TEST(BoxTiling, ManyPiecesStayFast) {
  // 100 000 one-row pieces of [0, 100 000) in shuffled order, with row 50 000 missing and row
  // 70 000 written twice: exactly one hole and one overlap, found without touching elements.
  std::vector<Box> pieces;
  for (std::int64_t r = 0; r < 100000; ++r)
    if (r != 50000) pieces.push_back(box2(r, 0, r + 1, kMax));
  pieces.push_back(box2(70000, 0, 70001, kMax));
  std::shuffle(pieces.begin(), pieces.end(), std::mt19937(7));
  const TilingFindings found = find_holes_and_overlaps(box2(0, 0, 100000, kMax), pieces);
  EXPECT_EQ(found.holes, (std::vector<Box>{box2(50000, 0, 50001, kMax)}));
  ASSERT_EQ(found.overlaps.size(), 1u);
  EXPECT_EQ(pieces[found.overlaps[0].first], box2(70000, 0, 70001, kMax));
  EXPECT_EQ(pieces[found.overlaps[0].second], box2(70000, 0, 70001, kMax));
}

TEST(BoxTiling, RandomGridsAgreeWithACellCount) {
  // Random pieces on a small 3-d grid, against a brute-force count per unit cell: every cell
  // covered by no piece is in exactly one hole; two pieces overlap iff some cell has both.
  std::mt19937 rng(2024);
  for (int round = 0; round < 200; ++round) {
    const Box region{{0, 0, 0}, {5, 4, 3}};
    std::vector<Box> pieces(rng() % 6);
    for (Box& p : pieces) {
      p.lo.resize(3), p.hi.resize(3);
      for (std::size_t a = 0; a < 3; ++a) {
        const std::int64_t lo = rng() % region.hi[a], hi = lo + 1 + rng() % (region.hi[a] - lo);
        p.lo[a] = lo, p.hi[a] = hi;
      }
    }
    const TilingFindings found = find_holes_and_overlaps(region, pieces);
    Pairs expected_pairs;
    for (std::size_t i = 0; i < pieces.size(); ++i)
      for (std::size_t j = i + 1; j < pieces.size(); ++j)
        if (!intersect(pieces[i], pieces[j]).empty()) expected_pairs.emplace_back(i, j);
    EXPECT_EQ(found.overlaps, expected_pairs) << "round " << round;
    for (std::int64_t x = 0; x < 5; ++x)
      for (std::int64_t y = 0; y < 4; ++y)
        for (std::int64_t z = 0; z < 3; ++z) {
          const Box cell{{x, y, z}, {x + 1, y + 1, z + 1}};
          bool covered = false;
          for (const Box& p : pieces) covered = covered || !intersect(p, cell).empty();
          int in_holes = 0;
          for (const Box& h : found.holes) in_holes += !intersect(h, cell).empty();
          EXPECT_EQ(in_holes, covered ? 0 : 1) << "round " << round << " cell " << cell.to_string();
        }
  }
}

}  // namespace
}  // namespace ih
