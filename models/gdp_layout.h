// GatedDeltaProduct and Mamba in_proj / conv1d checkpoint split layouts (spec 4.1, 4.2, 4.10).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/result.h"

namespace ih {

/// Row sections of a packed TP-local weight, in row order, with the name each chunk key gets.
struct SplitLayout {
  std::vector<std::int64_t> sections;
  std::vector<std::string> names;

  /// Sum of the sections (the TP-local rows D), overflow-checked.
  Result<std::int64_t> total_rows() const;
  /// Local start row of each section (cumulative sums); call only on a validated layout.
  std::vector<std::int64_t> starts() const;
  /// Index of the section called `name`, or -1.
  std::int64_t index_of(const std::string& name) const;
  bool operator==(const SplitLayout&) const = default;
};

/// TP-local dimensions of a GDP mixer (spec 4.2 argument list).
struct GdpDims {
  std::int64_t d_inner_local = 0;      // d_inner / T
  std::int64_t group_state_local = 0;  // ngroups / T * d_state
  std::int64_t nheads_local = 0;       // nheads / T
  std::int64_t householder = 3;        // M, gdp_num_householder (>= 1)
};

/// TP-local dimensions of a Mamba mixer (spec 4.10).
struct MambaDims {
  std::int64_t d_inner_local = 0;
  std::int64_t group_state_local = 0;  // ngroups_l * d_state
  std::int64_t nheads_local = 0;
};

/// _get_in_proj_checkpoint_split_layout: z, V0..V(M-1), K0..K(M-1), Q, b0..b(M-1), a.
Result<SplitLayout> gdp_in_proj_layout(const GdpDims& dims);
/// _get_conv_checkpoint_split_layout: V0..V(M-1), K0..K(M-1), Q.
Result<SplitLayout> gdp_conv_layout(const GdpDims& dims);
/// Mamba in_proj: [z, x, B, C, dt] = [d_inner_l, d_inner_l, g_l*S, g_l*S, nheads_l].
Result<SplitLayout> mamba_in_proj_layout(const MambaDims& dims);
/// Mamba conv1d: [x, B, C].
Result<SplitLayout> mamba_conv_layout(const MambaDims& dims);

/// A row of a weight split over TP ranks: the rank holding it and its row there.
struct TpRow {
  std::int64_t tp_rank = 0;
  std::int64_t row = 0;  // TP-local
  bool operator==(const TpRow&) const = default;
};

/// The same row of a packed weight at another TP size. `sections` are the weight's sections at TP 1; at
/// TP size T each rank holds the T-th part of every section, in section order (spec 4.2), so a row keeps
/// its section and its place in that section. nullopt for a row past the rank's real rows (padding). Every
/// section must divide by both sizes and the rank must exist (invalid_layout_parameter otherwise).
Result<std::optional<TpRow>> row_at_tp_size(const std::vector<std::int64_t>& sections, std::int64_t from_tp, TpRow row,
                                            std::int64_t to_tp);

/// Checks sections > 0, names match in count, and the sum fits in int64; `what` prefixes errors.
Status validate_layout(const SplitLayout& layout, const std::string& what);
/// Rejects value <= 0 with invalid_layout_parameter naming `parameter`.
Status require_positive(std::int64_t value, const std::string& parameter);

}  // namespace ih
