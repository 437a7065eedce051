// Fuzzes GTP padding and the shard-split plan over GDP layouts: for any sizes the pieces of all
// (t, g) tile every chunk [0, T*s_j) exactly once, each rank's pieces are its real rows in order,
// and the number of all-padding ranks is floor(pad / R) (spec 4.4, 4.7, bug classes 1-4).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "models/gdp_layout.h"
#include "models/gtp_layout.h"

namespace {

std::int64_t take(const std::uint8_t*& data, std::size_t& size, std::int64_t modulus) {
  std::int64_t value = 0;
  for (int i = 0; i < 2 && size > 0; ++i, ++data, --size) value = value * 256 + *data;
  return value % modulus;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64) return 0;
  const ih::GdpDims dims{1 + take(data, size, 300), take(data, size, 200), 1 + take(data, size, 16), 1 + take(data, size, 4)};
  const std::int64_t tp = 1 + take(data, size, 4), gtp = 1 + take(data, size, 64);
  const std::int64_t pad_alignment = std::vector<std::int64_t>{0, 16, 32}[take(data, size, 3)];
  const auto layout = ih::gdp_in_proj_layout(dims);
  if (!layout.ok()) return 0;
  const auto rows = layout->total_rows();
  const auto padding = ih::gtp_padding(*rows, gtp, pad_alignment);
  if (!padding.ok()) return 0;
  IH_FUZZ_CHECK(padding->shard_rows * gtp == *rows + padding->pad, "G shards of R rows cover D'");
  std::int64_t all_padding = 0;
  std::vector<std::vector<std::pair<std::int64_t, std::int64_t>>> covered(layout->sections.size());
  for (std::int64_t t = 0; t < tp; ++t)
    for (std::int64_t g = 0; g < gtp; ++g) {
      const auto plan = ih::gtp_piece_plan(*layout, *padding, tp, t, g);
      IH_FUZZ_CHECK(plan.ok(), "a valid layout always has a plan");
      std::int64_t shard_row = 0;
      for (const ih::GtpPiece& piece : *plan) {
        IH_FUZZ_CHECK(piece.shard_row == shard_row && piece.rows > 0, "pieces are the shard's rows in order, none empty");
        IH_FUZZ_CHECK(piece.global_rows == tp * layout->sections[piece.section], "global rows equal the non-GTP chunk's");
        covered[piece.section].emplace_back(piece.global_row_offset, piece.rows);
        shard_row += piece.rows;
      }
      IH_FUZZ_CHECK(shard_row == padding->real_rows(g), "a rank saves exactly its real rows");
      if (t == 0 && padding->all_padding(g)) ++all_padding;
    }
  IH_FUZZ_CHECK(all_padding == padding->all_padding_ranks(), "all-padding ranks = floor(pad / R)");
  for (std::size_t j = 0; j < covered.size(); ++j) {
    std::sort(covered[j].begin(), covered[j].end());
    std::int64_t next = 0;
    for (const auto& [offset, rows_here] : covered[j]) {
      IH_FUZZ_CHECK(offset == next, "pieces tile the chunk with no hole and no overlap");
      next += rows_here;
    }
    IH_FUZZ_CHECK(next == tp * layout->sections[j], "pieces cover the whole chunk");
  }
  return 0;
}
