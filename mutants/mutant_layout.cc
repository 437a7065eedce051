// GTP shard-split mutants (spec 6.1-6.10): the reference's pieces and merges, perturbed.
#include "models/split_factory.h"
#include "mutants/mutant_implementation.h"

namespace ih {
namespace {

/// The section size s_j of a piece, from its key suffix "<factory key>.<name>".
std::int64_t section_rows(const GtpFactoryParams& params, const ShardedTensor& piece) {
  const std::int64_t j = params.layout.index_of(piece.key.substr(params.key.size() + 1));
  return j < 0 ? 0 : params.layout.sections[j];
}

/// One piece of the mutant's answer; `last` is the rank's final piece.
void perturb_piece(Mutant mutant, const GtpFactoryParams& params, const GtpPadding& padding, ShardedTensor& piece,
                   bool last) {
  const std::int64_t r = padding.real_rows(params.gtp_rank);
  if (mutant == Mutant::gtp_offset_no_tp_term) piece.global_offset[0] -= params.tp_rank * section_rows(params, piece);
  if (mutant == Mutant::gtp_global_shape_padded) piece.global_shape[0] = params.tp_size * padding.padded_rows;
  if (mutant == Mutant::gtp_replica_from_gtp_rank) piece.replica_id = ReplicaId::tuple({0, 0, params.gtp_rank});
  if (mutant == Mutant::gtp_fragmentations_on_aligned && piece.global_offset[0] % piece.local_shape[0] == 0 &&
      piece.global_shape[0] % piece.local_shape[0] == 0)
    piece.axis_fragmentations = Shape{piece.global_shape[0] / piece.local_shape[0], 1};
  if (mutant == Mutant::gtp_pieces_copied && piece.data)
    piece.data = TensorValue::of_storage(piece.data->blocks.front().storage + (std::uint64_t{1} << 40),
                                         piece.data->shape, piece.data->dtype);
  if (mutant == Mutant::gtp_real_rows_plus_one && last && r > 0 && r < padding.shard_rows) {
    piece.local_shape[0] += 1;  // the first pad row is saved too
    if (piece.data) {
      const std::int64_t first = piece.data->blocks.front().first_row;
      piece.data = params.shard->row_view(first, first + piece.local_shape[0]);
    }
  }
}

}  // namespace

Result<StateNode> MutantImplementation::gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) {
  if (auto addendum = addendum_pieces(design, params)) return *addendum;
  IH_TRY_ASSIGN(built, ReferenceImplementation::gtp_pieces(design, params));
  if (design != GtpSaveDesign::shard_split) return built;
  return perturb_pieces(params, std::move(built));
}

Result<StateNode> MutantImplementation::perturb_pieces(const GtpFactoryParams& params, StateNode built) {
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  if (built.leaf_if<LocalNonpersistent>()) {
    if (is(Mutant::gtp_all_padding_empty_list)) return StateNode(StateList{});
    if (is(Mutant::gtp_all_padding_plain_tensor))
      return StateNode(TensorValue::zeros({padding.shard_rows, params.cols}, params.dtype));
    return built;
  }
  if (!built.is_list()) return built;
  StateList& pieces = built.list();
  for (std::size_t i = 0; i < pieces.size(); ++i)
    if (auto* piece = pieces[i].leaf_if<ShardedTensor>())
      perturb_piece(info_.id, params, padding, *piece, i + 1 == pieces.size());
  return built;
}

Result<TensorValue> MutantImplementation::gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params,
                                                    const StateNode& loaded) {
  if (auto addendum = addendum_merge(design, params, loaded)) return *addendum;
  const bool split = design == GtpSaveDesign::shard_split;
  if (split && is(Mutant::gtp_merge_reads_data)) {
    if (!params.shard) return make_error(ErrorKind::invalid_argument, "merge: factory data is None");
    return *params.shard;  // stale: the live parameter, not what was loaded
  }
  if (split && is(Mutant::gtp_all_padding_merge_empty))
    if (const auto* bare = loaded.leaf_if<TensorValue>()) return *bare;
  if (split && is(Mutant::gtp_only_last_rank_pads) && params.gtp_rank + 1 < params.gtp_size) {
    if (const auto* bare = loaded.leaf_if<TensorValue>()) return *bare;
    IH_TRY_ASSIGN(parts, loaded_tensors(loaded, "mutant merge"));
    return TensorValue::concat_rows(parts);  // no zero rows appended on a non-last rank
  }
  IH_TRY_ASSIGN(merged, ReferenceImplementation::gtp_merge(design, params, loaded));
  if (split && is(Mutant::gtp_merge_zeros_float32)) {
    for (const RowBlock& b : merged.blocks)
      if (b.is_zero() && b.rows > 0) merged.dtype = "float32";
  }
  return merged;
}

}  // namespace ih
