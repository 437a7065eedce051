#include "models/gtp_layout.h"

#include <algorithm>

#include "models/checked_math.h"

namespace ih {

std::int64_t GtpPadding::real_rows(std::int64_t gtp_rank) const {
  // g*R <= D' fits in int64 because D' does; the subtraction cannot overflow either.
  return std::max<std::int64_t>(0, std::min(shard_rows, rows - gtp_rank * shard_rows));
}

std::int64_t GtpPadding::all_padding_ranks() const { return shard_rows == 0 ? 0 : pad / shard_rows; }

Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) {
  IH_TRY_STATUS(require_positive(rows, "rows (D)"));
  IH_TRY_STATUS(require_positive(gtp_size, "gtp_size (G)"));
  if (pad_alignment < 0)
    return make_error(ErrorKind::invalid_layout_parameter,
                      "pad_alignment (p) must be >= 0, got " + std::to_string(pad_alignment));
  GtpPadding out{rows, gtp_size, pad_alignment};
  if (pad_alignment == 0) {
    if (gtp_size > rows)
      return make_error(ErrorKind::gtp_group_too_large,
                        "gtp_size (G) = " + std::to_string(gtp_size) + " exceeds the " + std::to_string(rows) +
                            " rows with pad_alignment 0: a GTP shard would have no rows");
    if (rows % gtp_size != 0)
      return make_error(ErrorKind::gtp_indivisible, "rows (D) = " + std::to_string(rows) +
                                                        " not divisible by gtp_size (G) = " + std::to_string(gtp_size) +
                                                        " with pad_alignment 0");
    out.padded_rows = rows;
    out.shard_rows = rows / gtp_size;
    return out;
  }
  IH_TRY_ASSIGN(block, checked_mul(pad_alignment, gtp_size, "align block p*G"));
  out.align_block = block;
  out.pad = (block - rows % block) % block;
  IH_TRY_ASSIGN(padded, checked_add(rows, out.pad, "padded rows D + pad"));
  out.padded_rows = padded;
  out.shard_rows = padded / gtp_size;
  return out;
}

Result<std::vector<GtpPiece>> gtp_piece_plan(const SplitLayout& layout, const GtpPadding& padding, std::int64_t tp_size,
                                             std::int64_t tp_rank, std::int64_t gtp_rank) {
  const std::int64_t R = padding.shard_rows, shard_begin = gtp_rank * R;
  const std::int64_t real_end = shard_begin + padding.real_rows(gtp_rank);  // pad rows are never emitted
  const std::vector<std::int64_t> starts = layout.starts();
  std::vector<GtpPiece> out;
  for (std::size_t j = 0; j < layout.sections.size(); ++j) {
    const std::int64_t c = starts[j], s = layout.sections[j];
    const std::int64_t a = std::max(c, shard_begin), b = std::min(c + s, real_end);
    if (a >= b) continue;  // documented choice: no zero-row pieces
    IH_TRY_ASSIGN(global_rows, checked_mul(tp_size, s, "global rows T*s_j of section " + layout.names[j]));
    IH_TRY_ASSIGN(tp_offset, checked_mul(tp_rank, s, "offset t*s_j of section " + layout.names[j]));
    out.push_back(GtpPiece{j, a - shard_begin, b - a, global_rows, tp_offset + (a - c)});
  }
  return out;
}

Result<GtpSaveDesign> parse_gtp_design(const std::string& text) {
  if (text == "gather") return GtpSaveDesign::gather;
  if (text == "shard-split" || text == "shard_split") return GtpSaveDesign::shard_split;
  return make_error(ErrorKind::invalid_layout_parameter, "design must be gather or shard-split, got '" + text + "'");
}

std::string to_string(GtpSaveDesign design) { return design == GtpSaveDesign::gather ? "gather" : "shard-split"; }

Result<GtpPadding> gtp_weight_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) {
  // A one-rank GTP group is never wrapped (wrap_module_params_gtp returns at once): the weight stays
  // a plain TP parameter, so nothing is padded whatever pad_for_alignment says.
  return gtp_padding(rows, gtp_size, gtp_size == 1 ? 0 : pad_alignment);
}

Result<GtpPadding> gtp_padding_of(const GtpFactoryParams& params) {
  IH_TRY_STATUS(validate_layout(params.layout, "in_proj layout of '" + params.key + "'"));
  IH_TRY_STATUS(require_positive(params.tp_size, "tp_size (T)"));
  IH_TRY_STATUS(require_positive(params.cols, "cols (C)"));
  if (params.tp_rank < 0 || params.tp_rank >= params.tp_size)
    return make_error(
        ErrorKind::invalid_layout_parameter,
        "tp_rank " + std::to_string(params.tp_rank) + " is outside [0, " + std::to_string(params.tp_size) + ")");
  IH_TRY_ASSIGN(rows, params.layout.total_rows());
  IH_TRY_ASSIGN(padding, gtp_weight_padding(rows, params.gtp_size, params.pad_alignment));
  if (params.gtp_rank < 0 || params.gtp_rank >= params.gtp_size)
    return make_error(
        ErrorKind::invalid_layout_parameter,
        "gtp_rank " + std::to_string(params.gtp_rank) + " is outside [0, " + std::to_string(params.gtp_size) + ")");
  if (params.shard && params.shard->shape != Shape{padding.shard_rows, params.cols})
    return make_error(ErrorKind::invalid_layout_parameter,
                      "shard of '" + params.key + "' has " + std::to_string(params.shard->rows()) +
                          " rows, expected (R, C) = (" + std::to_string(padding.shard_rows) + ", " +
                          std::to_string(params.cols) + ")");
  return padding;
}

namespace {

/// With an election world: t, g from the grid the parameter lives on (they must agree with the
/// params), the expert axis for routed experts, and the elected replica_id (spec addendum A).
Result<ShardedTensor> elected_composite_tensor(const GtpFactoryParams& params, const GtpPadding& padding) {
  const GtpElection& e = *params.election;
  IH_TRY_ASSIGN(grid, election_model_grid(e));
  const std::int64_t t = grid.coordinate(e.global_rank, "tp"), g = grid.coordinate(e.global_rank, "gtp_remat");
  if (grid.size("tp") != params.tp_size || grid.size("gtp_remat") != params.gtp_size || t != params.tp_rank ||
      g != params.gtp_rank)
    return make_error(ErrorKind::invalid_layout_parameter,
                      "rank " + std::to_string(e.global_rank) + " of grid " + grid.to_string() +
                          " is (t=" + std::to_string(t) + ", g=" + std::to_string(g) + "), the params say (t=" +
                          std::to_string(params.tp_rank) + " of " + std::to_string(params.tp_size) +
                          ", g=" + std::to_string(params.gtp_rank) + " of " + std::to_string(params.gtp_size) + ")");
  IH_TRY_ASSIGN(replica, gtp_entry_replica_id(e));
  IH_TRY_ASSIGN(fragments, checked_mul(params.tp_size, params.gtp_size, "T*G"));
  std::vector<AxisOffset> offsets;
  std::int64_t prepend = 0;
  if (e.expert) {
    IH_TRY_STATUS(require_positive(e.local_experts, "local_experts"));
    if (e.expert_local_index < 0 || e.expert_local_index >= e.local_experts)
      return make_error(ErrorKind::invalid_layout_parameter, "expert_local_index outside [0, local_experts)");
    IH_TRY_ASSIGN(experts, checked_mul(grid.size("ep"), e.local_experts, "E = ep * local_experts"));
    offsets.push_back({0, grid.coordinate(e.global_rank, "ep") * e.local_experts + e.expert_local_index, experts});
    prepend = 1;
  }
  offsets.push_back({prepend, t * params.gtp_size + g, fragments});
  IH_TRY_ASSIGN(tensor, ShardedTensor::from_rank_offsets(params.key, {padding.shard_rows, params.cols}, offsets,
                                                         replica, prepend, params.shard, params.dtype));
  tensor.allow_shape_mismatch = padding.pad > 0;
  return tensor;
}

}  // namespace

Result<ShardedTensor> gtp_composite_tensor(const GtpFactoryParams& params) {
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  if (params.election) return elected_composite_tensor(params, padding);
  IH_TRY_ASSIGN(fragments, checked_mul(params.tp_size, params.gtp_size, "T*G"));
  const std::int64_t slot = params.tp_rank * params.gtp_size + params.gtp_rank;
  IH_TRY_ASSIGN(tensor,
                ShardedTensor::from_rank_offsets(params.key, {padding.shard_rows, params.cols}, {{0, slot, fragments}},
                                                 params.replica_id, 0, params.shard, params.dtype));
  tensor.allow_shape_mismatch = padding.pad > 0;
  return tensor;
}

}  // namespace ih
