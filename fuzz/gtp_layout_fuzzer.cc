// Fuzzes GTP padding and the shard-split plan over GDP layouts: for any sizes the pieces of all
// (t, g) tile every chunk [0, T*s_j) exactly once, each rank's pieces are its real rows in order,
// and the number of all-padding ranks is floor(pad / R) (spec 4.4, 4.7, bug classes 1-4). The
// invariant is the one gtp_pieces_tile_chunks runs (properties/invariants.h).
#include <cstddef>
#include <cstdint>

#include "fuzz/fuzz_check.h"
#include "models/gdp_layout.h"
#include "models/gtp_layout.h"
#include "properties/invariants.h"

namespace {

std::int64_t take(const std::uint8_t*& data, std::size_t& size, std::int64_t modulus) {
  std::int64_t value = 0;
  for (int i = 0; i < 2 && size > 0; ++i, ++data, --size) value = value * 256 + *data;
  return value % modulus;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64) return 0;
  const ih::GdpDims dims{1 + take(data, size, 300), take(data, size, 200), 1 + take(data, size, 16),
                         1 + take(data, size, 4)};
  const std::int64_t tp = 1 + take(data, size, 4), gtp = 1 + take(data, size, 64);
  constexpr std::int64_t kAlignments[] = {0, 16, 32};
  const std::int64_t pad_alignment = kAlignments[take(data, size, 3)];
  const auto layout = ih::gdp_in_proj_layout(dims);
  if (!layout.ok()) return 0;
  const auto padding = ih::gtp_padding(*layout->total_rows(), gtp, pad_alignment);
  if (!padding.ok()) return 0;
  IH_FUZZ_INVARIANT(ih::invariants::gtp_piece_plans_tile(*layout, *padding, tp, gtp));
  return 0;
}
