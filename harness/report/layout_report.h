// What `interop-harness layout gdp|mamba ...` prints: every piece each (t, g) rank saves for an
// in_proj weight, as JSON, as a text table (spec 4.9 style) and as an SVG picture of the tiling.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/gtp_layout.h"
#include "models/integrity.h"
#include "seam/implementation.h"

namespace ih::report {

/// Which mixer's in_proj layout to use.
enum class MixerFamily { gdp, mamba };

/// The CLI's flags, one field each.
struct LayoutParams {
  MixerFamily family = MixerFamily::gdp;
  std::int64_t d_inner_local = 0;                             // --d-inner-local D
  std::int64_t group_state_local = 0;                         // --group-state-local S (ngroups_l * d_state)
  std::int64_t nheads_local = 0;                              // --nheads-local H
  std::int64_t householder = 3;                               // --householder M (GDP only)
  std::int64_t tp = 1;                                        // --tp T
  std::int64_t gtp = 1;                                       // --gtp G (1: the non-GTP split factory)
  std::int64_t pad_align = 0;                                 // --pad-align P
  std::int64_t cols = 1;                                      // --cols C
  std::string key = "decoder.layers.0.mixer.in_proj.weight";  // --key K
  GtpSaveDesign design = GtpSaveDesign::shard_split;          // --design gather|shard-split
};

/// One saved piece, with where it sits in the TP-local (padded) row axis for drawing.
struct ReportPiece {
  std::int64_t tp_rank = 0, gtp_rank = 0;
  std::string key;
  Shape global_shape, global_offset, local_shape;
  std::int64_t shard_row_offset = 0;  // first row in the data it views (GTP shard, or TP-local tensor)
  std::int64_t tp_local_row = 0;      // first row in the TP-local padded axis
  bool main_replica = true;
};

/// Everything the three renderers need.
struct LayoutReport {
  LayoutParams params;
  SplitLayout layout;
  GtpPadding padding;                                                     // with G = 1: R = D, no padding
  std::vector<std::pair<std::int64_t, std::int64_t>> padding_only_ranks;  // (t, g)
  std::vector<ReportPiece> pieces;                                        // in (t, g, build) order
  IntegrityReport integrity;
};

/// Builds the pieces of every (t, g) through the model's factories and checks their integrity.
Result<LayoutReport> build_layout_report(const LayoutParams& params);
/// The same with the pieces `source`'s GTP factory answers at every G (gtp_pieces, as the GTP checks
/// build them): an implementation's own tiling.
Result<LayoutReport> build_layout_report(const LayoutParams& params, Implementation& source);

/// Rows of one saved tensor that no main piece covers (a hole, covered_by 0) or that two or more
/// main pieces cover (an overlap).
struct CoverageGap {
  std::string key;
  std::int64_t begin = 0, end = 0;  // [begin, end) in the key's global rows
  int covered_by = 0;
};

/// Each key's global rows (axis 0 of its global shape), as a report's main pieces name them.
std::map<std::string, std::int64_t> key_rows(const LayoutReport& report);
/// The holes and overlaps of `report`'s main pieces within `rows` (each key's rows: the reference's).
std::vector<CoverageGap> coverage_gaps(const LayoutReport& report, const std::map<std::string, std::int64_t>& rows);

/// {"shard_rows", "pad_rows", "padding_only_ranks", "pieces": [...], "integrity": {"ok", "problems"}}.
nlohmann::json layout_report_json(const LayoutReport& report);

/// A readable table, one line per (t, g), in the style of spec 4.9.
std::string layout_report_text(const LayoutReport& report);

/// A standalone SVG: one column per TP rank, pieces coloured by rank, chunk and GTP boundaries, pad rows.
std::string layout_report_svg(const LayoutReport& report);

/// A standalone SVG of a failing check's case: the reference's tiling beside the target's own, each
/// piece placed where it says it sits (its global offset), the target's holes and overlaps marked.
std::string layout_comparison_svg(const LayoutReport& reference, const Result<LayoutReport>& target,
                                  const std::string& target_name);

}  // namespace ih::report
