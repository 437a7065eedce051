#include "harness/roundtrip/real_gtp_rows.h"

#include <algorithm>
#include <string_view>

#include "harness/roundtrip/world_scenario.h"
#include "models/flat_state.h"
#include "models/gdp_layout.h"

namespace ih {
namespace {

using Rows = std::optional<std::vector<Segment>>;

/// The gather-design factory parameters of a real model's GTP in_proj on `rank`: both mixers save a GTP in_proj
/// by the gather design here, the GDP mixer's [z|V*|K*|Q|b*|a] sections, the Mamba mixer's own.
Result<GtpFactoryParams> real_in_proj_params(const ModelDumpSpec& m, std::int64_t rank, const std::string& key) {
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  const ModelConfig& c = m.config;
  GtpFactoryParams p;
  p.key = key;
  p.tp_size = l.tp, p.tp_rank = l.tp_rank, p.gtp_size = l.gtp, p.gtp_rank = l.gtp_rank;
  p.pad_alignment = c.pad_alignment, p.cols = c.hidden;
  const std::int64_t d_inner = c.mamba_heads * c.mamba_head_dim / l.tp, heads = c.mamba_heads / l.tp,
                     group_state = c.mamba_groups * c.mamba_state / l.tp;
  if (c.ssm_mixer == mixer_word(GtpMixer::gdp)) {
    IH_TRY_ASSIGN(layout, gdp_in_proj_layout({d_inner, group_state, heads, c.gdp_householder}));
    p.layout = layout, p.mixer = GtpMixer::gdp;
  } else {
    IH_TRY_ASSIGN(layout, mamba_in_proj_layout({d_inner, group_state, heads}));
    p.layout = layout, p.mixer = GtpMixer::mamba;
  }
  return p;
}

/// The reference model of a real GTP rank's layer with GTP unwrapped (GTP 1, the same TP, DP and PP
/// coordinates): the TP-local tensors and factories (D rows) whose rows [g R, g R + r_g) the GTP shard holds.
Result<std::vector<FlatEntry>> unwrapped_reference(const ModelDumpSpec& m, const RankLayout& l) {
  ModelDumpSpec unwrapped = m;
  unwrapped.sizes.gtp = 1;
  const std::int64_t dp = data_parallel_size(m.sizes);
  IH_TRY_ASSIGN(dict, model_state_dict(unwrapped, l.tp_rank + m.sizes.tp * (l.dp_rank + dp * l.pp_rank)));
  return flatten(StateNode(dict));
}

/// The part of the unwrapped segments that GTP rank g's shard holds, rows [g R, g R + r_g) of the TP-local
/// rows (spec 4.4), renumbered from the shard's row 0; its pad rows are covered by no segment (zero).
std::vector<Segment> gtp_window(const std::vector<Segment>& unwrapped, const GtpPadding& padding,
                                std::int64_t gtp_rank) {
  return window(unwrapped, gtp_rank * padding.shard_rows, padding.real_rows(gtp_rank));
}

/// Whether two entries' global offsets agree on their first `prepended` axes (the layer and expert axes that
/// tell apart a GPT's layers, which share one key).
/// "rows [b, b+r) hold <key> from [offset]": one segment, as a difference names it.
std::string segment_text(const Segment& s) {
  return "rows [" + std::to_string(s.begin) + ", " + std::to_string(s.begin + s.rows) + ") hold " + s.key + " from [" +
         offset_text(s.global_offset) + "]";
}

/// The first segment where Megatron's description and the reference's layout part (both lists in row order).
std::string first_difference(const std::vector<Segment>& described, const std::vector<Segment>& reference) {
  const auto [d, r] = std::mismatch(described.begin(), described.end(), reference.begin(), reference.end());
  const std::string megatron = d == described.end() ? "nothing more" : segment_text(*d);
  const std::string ref = r == reference.end() ? "nothing more" : segment_text(*r);
  return "Megatron describes " + megatron + ", the reference lays out " + ref;
}

bool same_prepended(const Shape& a, const Shape& b, std::int64_t prepended) {
  const auto n = static_cast<std::size_t>(prepended);
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
}

Status require_shard_rows(const std::string& key, std::int64_t rank, std::int64_t shard, const GtpPadding& padding) {
  if (padding.shard_rows == shard) return Ok{};
  return make_error(seam_kind::description_disagrees,
                    "GTP-wrapped " + key + " on rank " + std::to_string(rank) + ": Megatron describes " +
                        std::to_string(shard) + " shard rows, the reference's padding of " +
                        std::to_string(padding.rows) + " rows gives " + std::to_string(padding.shard_rows));
}

/// The reference's tensor of `t`'s key and layer among the unwrapped entries; nullptr for none.
const ShardedTensor* reference_tensor(const std::vector<FlatEntry>& reference, const ShardedTensor& t) {
  const ShardedTensor* ref = nullptr;
  for (const FlatEntry& e : reference)
    if (const auto* rt = std::get_if<ShardedTensor>(&e.entry);
        rt && rt->key == t.key && same_prepended(rt->global_offset, t.global_offset, t.prepend_axis_num))
      ref = rt;
  return ref;
}

/// The reference's factory of `f`'s key and layer among the unwrapped entries (`pieces`: f's own segments),
/// with its segments; nullptr for none.
Result<std::pair<const ShardedTensorFactory*, std::vector<Segment>>> reference_factory(
    const std::vector<FlatEntry>& reference, const ShardedTensorFactory& f, const std::vector<Segment>& pieces) {
  std::pair<const ShardedTensorFactory*, std::vector<Segment>> out{nullptr, {}};
  for (const FlatEntry& e : reference) {
    const auto* rf = std::get_if<ShardedTensorFactory>(&e.entry);
    if (!rf || rf->key != f.key || !rf->data) continue;
    IH_TRY_ASSIGN(segs, factory_segments(*rf));
    if (!segs.empty() &&
        same_prepended(segs.front().global_offset, pieces.front().global_offset, pieces.front().prepend))
      out = {rf, std::move(segs)};
  }
  return out;
}

}  // namespace

Result<std::optional<GatheredShard>> real_gtp_in_proj(const ModelDumpSpec& m, std::int64_t rank,
                                                      const ShardedTensorFactory& f) {
  static constexpr std::string_view kInProj = ".mixer.in_proj.weight";
  if (m.sizes.gtp == 1 || !f.key.ends_with(kInProj)) return std::optional<GatheredShard>();
  IH_TRY_ASSIGN(params, real_in_proj_params(m, rank, f.key));
  IH_TRY_ASSIGN(g, gathered_shard(params));
  IH_TRY_ASSIGN(described, factory_segments(f));
  if (described != g.gathered)
    return make_error(seam_kind::description_disagrees,
                      "real GTP in_proj " + f.key + " on rank " + std::to_string(rank) +
                          ": Megatron's gathered pieces are not the reference's (" +
                          first_difference(described, g.gathered) + "; " + std::to_string(described.size()) + " vs " +
                          std::to_string(g.gathered.size()) + " segments)");
  return std::optional<GatheredShard>(std::move(g));
}

Result<std::optional<std::vector<Segment>>> real_gtp_padded_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                 const ShardedTensor& t) {
  if (m.sizes.gtp == 1 || !t.allow_shape_mismatch || t.local_shape.empty()) return Rows();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  IH_TRY_ASSIGN(reference, unwrapped_reference(m, l));
  const ShardedTensor* ref = reference_tensor(reference, t);
  if (!ref)
    return make_error(seam_kind::description_disagrees,
                      "GTP-padded " + t.key + ": Megatron describes it, the reference model has no such tensor");
  const auto axis = static_cast<std::size_t>(ref->prepend_axis_num);
  const std::int64_t rows = ref->local_shape.empty() ? 1 : ref->local_shape[0], shard = t.local_shape[0];
  const auto fragments = [axis](const ShardedTensor& x) {
    return x.axis_fragmentations && axis < x.axis_fragmentations->size() ? (*x.axis_fragmentations)[axis] : 0;
  };
  const bool wrapped = fragments(t) == fragments(*ref) * l.gtp;  // GTP splits the rows G more ways
  if (!wrapped || rows == l.gtp * shard) return Rows();          // Megatron's entry is the layout
  IH_TRY_ASSIGN(padding, gtp_weight_padding(rows, l.gtp, m.config.pad_alignment));
  IH_TRY_STATUS(require_shard_rows(t.key, rank, shard, padding));
  return Rows(gtp_window({whole_tensor(*ref)}, padding, l.gtp_rank));
}

Result<std::optional<std::vector<Segment>>> real_gtp_factory_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                  const ShardedTensorFactory& f) {
  // The MLP's SwiGLU factories (fc1's weight and bias); the mixers' split factories are not over GTP shards.
  if (m.sizes.gtp == 1 || f.data || !(f.key.ends_with(".linear_fc1.weight") || f.key.ends_with(".linear_fc1.bias")))
    return Rows();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  IH_TRY_ASSIGN(reference, unwrapped_reference(m, l));
  IH_TRY_ASSIGN(pieces, factory_segments(f));
  if (pieces.empty()) return make_error(seam_kind::harness_error, "GTP-wrapped factory " + f.key + " builds nothing");
  IH_TRY_ASSIGN(found, reference_factory(reference, f, pieces));
  const auto& [ref, unwrapped] = found;
  if (!ref)
    return make_error(seam_kind::description_disagrees,
                      "GTP-wrapped factory " + f.key + ": Megatron describes it, the reference model has none");
  IH_TRY_ASSIGN(described, factory_local_shape(f));
  const std::int64_t rows = ref->data->rows(), shard = described.empty() ? 1 : described[0];
  if (shard == rows) return Rows();
  IH_TRY_ASSIGN(padding, gtp_weight_padding(rows, l.gtp, m.config.pad_alignment));
  IH_TRY_STATUS(require_shard_rows(f.key, rank, shard, padding));
  return Rows(gtp_window(unwrapped, padding, l.gtp_rank));
}

Result<std::optional<std::vector<Segment>>> real_reference_split_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                      const ShardedTensorFactory& f) {
  if (f.data) return Rows();
  IH_TRY_ASSIGN(pieces, factory_segments(f));
  if (pieces.empty()) return Rows();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  IH_TRY_ASSIGN(reference, unwrapped_reference(m, l));
  IH_TRY_ASSIGN(found, reference_factory(reference, f, pieces));
  const auto& [ref, rows] = found;
  if (!ref || !ref->builder || ref->builder->name() != "split") return Rows();
  return Rows(rows);
}

}  // namespace ih
