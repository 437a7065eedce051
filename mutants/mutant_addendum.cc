// Mutants of the spec addendum (docs/spec-addendum.md): GTP writer election (A), allow_shape_mismatch
// at load (B), DCP's save-plan validation (D) and Mamba's in_proj design (E). Each answers like
// the reference except where its one planted mistake applies.
#include <algorithm>

#include "models/gtp_election.h"
#include "models/split_factory.h"
#include "models/strict_load.h"
#include "mutants/mutant_implementation.h"

namespace ih {
namespace {

/// The mutant's election: the replica group a buggy GTP checkpoint path would use.
std::optional<std::int64_t> mutant_replica_rank(Mutant m, const GtpElection& e) {
  const std::optional<WorldGrids>& model = e.caller ? e.caller : e.globals;
  if (m == Mutant::gtp_elect_gtp_inclusive && model) {
    const ParallelGrid& grid = e.expert ? model->expert : model->dense;
    return e.expert ? grid.group_rank(e.global_rank, {"gtp_remat", "dp"})
                    : grid.group_rank(e.global_rank, {"gtp_remat", "dp", "cp"});
  }
  if (m == Mutant::gtp_expert_elect_dense_dp && model && e.expert)
    return model->dense.group_rank(e.global_rank, {"dp", "cp"});
  if (m == Mutant::gtp_elect_globals_over_caller && e.globals) {
    const ParallelGrid& grid = e.expert ? e.globals->expert : e.globals->dense;
    return e.expert ? grid.group_rank(e.global_rank, {"dp"}) : grid.group_rank(e.global_rank, {"dp", "cp"});
  }
  return std::nullopt;
}

bool stored_under_other_shape(const Checkpoint& checkpoint, const ShardedTensor& t) {
  return !checkpoint.index.find(t.key, t.global_shape) && !checkpoint.index.shapes_of(t.key).empty();
}

/// Zero rows of `loaded` replaced by the same rows of the request's own (stale) data.
TensorValue stale_instead_of_zero(const TensorValue& loaded, const TensorValue& stale) {
  std::vector<TensorValue> parts;
  std::int64_t row = 0;
  for (const RowBlock& b : loaded.blocks) {
    TensorValue part{loaded.shape, loaded.dtype, {b}};
    part.shape[0] = b.rows;
    parts.push_back(b.is_zero() ? stale.row_view(row, row + b.rows) : part);
    row += b.rows;
  }
  auto joined = TensorValue::concat_rows(parts);
  return joined.ok() ? *joined : loaded;
}

}  // namespace

std::optional<Result<ShardedTensor>> MutantImplementation::addendum_param_entry(const GtpFactoryParams& params) {
  if (!params.election || params.election->explicit_replica_id) return std::nullopt;
  const auto rank = mutant_replica_rank(info_.id, *params.election);
  if (!rank) return std::nullopt;
  auto entry = ReferenceImplementation::gtp_param_entry(params);
  if (entry.ok()) entry->replica_id = ReplicaId::tuple({0, 0, *rank});
  return entry;
}

std::optional<Result<StateNode>> MutantImplementation::addendum_pieces(GtpSaveDesign design,
                                                                       const GtpFactoryParams& params) {
  if (!is(Mutant::mamba_in_proj_shard_split) || params.mixer != GtpMixer::mamba || design != GtpSaveDesign::shard_split)
    return std::nullopt;
  GtpFactoryParams as_gdp = params;  // the PR's shard split applied to Mamba's [z|x|B|C|dt] too
  as_gdp.mixer = GtpMixer::gdp;
  return ReferenceImplementation::gtp_pieces(design, as_gdp);
}

std::optional<Result<StateNode>> MutantImplementation::addendum_load(const Checkpoint& checkpoint,
                                                                     const StateNode& request, LoadOrder order) {
  if (is(Mutant::load_unexpected_key_ignored)) {  // as if every load ran with a non-default strict mode
    const auto adjusted =
        apply_strict_handling(checkpoint, request, StrictHandling::ignore_all, checkpoint_keys(checkpoint));
    if (!adjusted.ok()) return Result<StateNode>(adjusted.error());
    return ReferenceImplementation::load_state(checkpoint, adjusted->request, order);
  }
  if (!is(Mutant::load_shape_mismatch_refused) && !is(Mutant::load_shape_mismatch_stale_rows)) return std::nullopt;
  if (is(Mutant::load_shape_mismatch_refused)) {
    std::optional<std::string> refused;
    visit_leaves(request, [&](const std::string&, const Leaf& leaf) {
      if (const auto* t = std::get_if<ShardedTensor>(&leaf))
        if (t->allow_shape_mismatch && stored_under_other_shape(checkpoint, *t)) refused = t->key;
    });
    if (refused)
      return Result<StateNode>(
          make_error(ErrorKind::global_shape_mismatch, "global shape mismatch for key " + *refused));
    return std::nullopt;
  }
  auto loaded = ReferenceImplementation::load_state(checkpoint, request, order);
  if (!loaded.ok() || !request.is_dict()) return loaded;
  for (const DictItem& item : request.dict()) {  // top-level entries: enough for the addendum property
    const auto* t = item.value.leaf_if<ShardedTensor>();
    StateNode* out = loaded->find(item.key);
    if (!t || !t->data || !t->allow_shape_mismatch || !out || !stored_under_other_shape(checkpoint, *t)) continue;
    if (auto* value = out->leaf_if<TensorValue>()) *value = stale_instead_of_zero(*value, *t->data);
  }
  return loaded;
}

void MutantImplementation::addendum_retarget(const std::vector<FlatEntry>& in, std::vector<FlatEntry>& out) {
  if (is(Mutant::retarget_so_single_expert_prepended)) {
    for (std::size_t i = 0; i < in.size() && i < out.size(); ++i) {
      const auto* before = std::get_if<ShardedObject>(&in[i].entry);
      auto* after = std::get_if<ShardedObject>(&out[i].entry);
      if (!before || !after || before->key.find(".mlp.experts.") == std::string::npos) continue;
      if (before->global_shape == Shape{1} && before->global_offset == Shape{0} && after->global_shape.size() == 1)
        after->global_shape.push_back(1), after->global_offset.push_back(0);
    }
    return;
  }
  if (!is(Mutant::gtp_fresh_in_proj_lnp_copy)) return;
  for (std::size_t i = 0; i < in.size() && i < out.size(); ++i) {
    const auto* factory = std::get_if<ShardedTensorFactory>(&in[i].entry);
    auto* lnp = std::get_if<LocalNonpersistent>(&out[i].entry);
    if (!factory || !lnp || !factory->key.ends_with("mixer.in_proj.weight")) continue;
    if (auto* payload = std::get_if<TensorValue>(&lnp->payload))
      *payload = TensorValue::of_storage((std::uint64_t{1} << 61) + i, payload->shape, payload->dtype);
  }
}

std::optional<Result<TensorValue>> MutantImplementation::addendum_merge(GtpSaveDesign design,
                                                                        const GtpFactoryParams& params,
                                                                        const StateNode& loaded) {
  if (!is(Mutant::gtp_gather_merge_unpadded_slice) || design != GtpSaveDesign::gather ||
      params.mixer == GtpMixer::mamba)
    return std::nullopt;
  auto padding = gtp_padding_of(params);
  if (!padding.ok()) return Result<TensorValue>(padding.error());
  if (padding->pad == 0) return std::nullopt;
  // The bug: rank g's rows taken from g * ceil(D / G) of the re-padded tensor instead of g * R.
  const std::int64_t R = padding->shard_rows, G = params.gtp_size, D = padding->rows;
  const std::int64_t begin = std::min(params.gtp_rank * ((D + G - 1) / G), R * G - R);
  auto parts = loaded_tensors(loaded, "mutant gather merge");
  if (!parts.ok()) return Result<TensorValue>(parts.error());
  auto full = TensorValue::concat_rows(*parts);
  if (!full.ok()) return Result<TensorValue>(full.error());
  auto padded = TensorValue::concat_rows({*full, TensorValue::zeros({R * G - full->rows(), params.cols}, full->dtype)});
  if (!padded.ok()) return Result<TensorValue>(padded.error());
  return Result<TensorValue>(padded->row_view(begin, begin + R));
}

Result<MegatronValidation> MutantImplementation::megatron_validation(const GlobalMetadata& metadata) {
  IH_TRY_ASSIGN(v, ReferenceImplementation::megatron_validation(metadata));
  if (!v.dcp_plan_errors) return v;
  const auto drop = [&](const std::string& what) {
    std::erase_if(*v.dcp_plan_errors, [&](const std::string& e) { return e.find(what) != std::string::npos; });
  };
  if (is(Mutant::dcp_plan_no_fill_check)) drop(" invalid fill ");
  if (is(Mutant::dcp_plan_no_overlap_check)) drop(" has overlapping chunks");
  return v;
}

}  // namespace ih
