// GTP piece-plan invariants (invariants.h). One translation unit per surface, so a fuzz target links only its own.
#include "properties/invariants.h"

#include <algorithm>
#include <utility>

namespace ih::invariants {

Broken gtp_piece_plans_tile(const SplitLayout& layout, const GtpPadding& padding, std::int64_t tp, std::int64_t gtp) {
  const auto rows = layout.total_rows();
  if (!rows.ok()) return "layout rows: " + rows.error().message;
  if (padding.shard_rows * gtp != *rows + padding.pad)
    return std::to_string(gtp) + " shards of " + std::to_string(padding.shard_rows) + " rows do not cover " +
           std::to_string(*rows) + " + " + std::to_string(padding.pad) + " pad rows";
  std::int64_t all_padding = 0;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> covered(layout.sections.size());
  for (std::int64_t t = 0; t < tp; ++t)
    for (std::int64_t g = 0; g < gtp; ++g) {
      const auto rank = [&] {
        return "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + "): ";
      };  // on failure only
      const auto plan = gtp_piece_plan(layout, padding, tp, t, g);
      if (!plan.ok()) return rank() + "no plan for a valid layout: " + plan.error().message;
      std::int64_t shard_row = 0;
      for (const GtpPiece& piece : *plan) {
        if (piece.shard_row != shard_row || piece.rows <= 0)
          return rank() + "pieces are not the shard's rows in order (piece at shard row " +
                 std::to_string(piece.shard_row) + ", " + std::to_string(piece.rows) + " rows; expected row " +
                 std::to_string(shard_row) + ")";
        if (piece.section >= layout.sections.size() || piece.global_rows != tp * layout.sections[piece.section])
          return rank() + "a piece's global rows differ from the non-GTP chunk's";
        covered[piece.section].emplace_back(piece.global_row_offset, piece.rows);
        shard_row += piece.rows;
      }
      if (shard_row != padding.real_rows(g))
        return rank() + "saves " + std::to_string(shard_row) + " rows, its real rows are " +
               std::to_string(padding.real_rows(g));
      if (t == 0 && padding.all_padding(g)) ++all_padding;
    }
  if (all_padding != padding.all_padding_ranks())
    return std::to_string(all_padding) +
           " all-padding ranks, floor(pad / R) = " + std::to_string(padding.all_padding_ranks());
  for (std::size_t j = 0; j < covered.size(); ++j) {
    std::sort(covered[j].begin(), covered[j].end());
    std::int64_t next = 0;
    for (const auto& [offset, rows_here] : covered[j]) {
      if (offset != next)
        return "chunk " + std::to_string(j) + ": " + (offset < next ? "overlap" : "hole") + " at row " +
               std::to_string(std::min(offset, next));
      next += rows_here;
    }
    if (next != tp * layout.sections[j])
      return "chunk " + std::to_string(j) + ": pieces cover " + std::to_string(next) + " of " +
             std::to_string(tp * layout.sections[j]) + " rows";
  }
  return "";
}

}  // namespace ih::invariants
