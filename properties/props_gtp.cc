// The GTP shard split (spec 4.7): its invariants and the properties of bug classes 6.1-6.10.
#include <map>
#include <set>

#include "models/checkpoint_model.h"
#include "models/split_factory.h"
#include "properties/gtp_world.h"
#include "properties/invariants.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

std::string rank_name(const RankBuild& r) {
  return "rank (t=" + std::to_string(r.t) + ", g=" + std::to_string(r.g) + ")";
}

/// Runs `each` over every rank's build; the first non-empty verdict wins.
template <class Fn>
Verdict for_each_rank(Implementation& impl, const GtpCase& c, Fn each) {
  auto ranks = build_all(impl, c);
  if (!ranks.ok()) return ranks.error().message;
  IH_VERDICT_ASSIGN(padding, padding_of(c));
  for (const RankBuild& r : *ranks)
    if (Verdict v = each(r, padding); !v.empty()) return rank_name(r) + ": " + v;
  return "";
}

Verdict keys_and_shapes_match_nongtp(Implementation& impl, const GtpCase& c) {
  auto ranks = build_all(impl, c);
  if (!ranks.ok()) return ranks.error().message;
  for (std::int64_t t = 0; t < c.tp; ++t) {
    std::set<std::pair<std::string, Shape>> gtp, plain;
    for (const RankBuild& r : *ranks)
      for (const ShardedTensor& p : r.pieces)
        if (r.t == t) gtp.insert({p.key, p.global_shape});
    const GtpFactoryParams& params = (*ranks)[t * c.gtp].params;
    IH_VERDICT_ASSIGN(orig, tp_row_sharded(params.key, params.layout.total_rows().value(), c.cols, c.tp, t));
    auto chunks = impl.split_chunks(orig, params.layout);
    if (!chunks.ok()) return "split_chunks: " + chunks.error().message;
    for (const ShardedTensor& chunk : *chunks) plain.insert({chunk.key, chunk.global_shape});
    if (gtp != plain)
      return "tp rank " + std::to_string(t) + ": (key, global shape) set differs from the non-GTP factory's";
  }
  return "";
}

Verdict main_pieces_tile_chunks(Implementation& impl, const GtpCase& c) {
  // The plan the pieces follow, under the implementation's padding (shared with the fuzz target).
  IH_VERDICT_ASSIGN(layout, layout_of(c));
  IH_VERDICT_ASSIGN(rows, layout.total_rows());
  IH_VERDICT_ASSIGN(padding, impl.gtp_padding(rows, c.gtp, c.pad_alignment));
  if (Verdict v = invariants::gtp_piece_plans_tile(layout, padding, c.tp, c.gtp); !v.empty()) return "piece plan: " + v;
  auto ranks = build_all(impl, c);
  if (!ranks.ok()) return ranks.error().message;
  GlobalMetadata metadata;
  std::map<std::pair<std::int64_t, std::string>, std::int64_t> next_offset;  // (t, key) -> contiguous end
  for (const RankBuild& r : *ranks)
    for (const ShardedTensor& p : r.pieces) {
      metadata.tensors.push_back({r.t * c.gtp + r.g, p.without_data()});
      const std::int64_t s = p.global_shape[0] / c.tp;
      auto it = next_offset.try_emplace({r.t, p.key}, r.t * s).first;
      if (p.global_offset[0] != it->second)
        return rank_name(r) + ": piece " + p.key + " at row " + std::to_string(p.global_offset[0]) + ", expected " +
               std::to_string(it->second) + " (contiguous after the previous GTP rank)";
      it->second += p.local_shape[0];
    }
  const IntegrityReport report = check_integrity(metadata);
  return report.ok() ? "" : "main-replica pieces do not tile their chunks: " + report.problems.front().message;
}

Verdict pieces_are_real_rows(Implementation& impl, const GtpCase& c) {
  return for_each_rank(impl, c, [&](const RankBuild& r, const GtpPadding& pad) -> Verdict {
    const std::int64_t real = pad.real_rows(r.g);
    std::vector<TensorValue> parts;
    for (const ShardedTensor& p : r.pieces) {
      if (p.local_shape[0] <= 0 || p.global_offset[0] + p.local_shape[0] > p.global_shape[0])
        return "piece " + p.key + " lies outside its global shape or is empty";
      if (!p.data) return "piece " + p.key + " has no data";
      parts.push_back(*p.data);
    }
    if (real == 0) return parts.empty() ? "" : "an all-padding rank saved pieces";
    auto joined = TensorValue::concat_rows(parts);
    const TensorValue want = r.params.shard->row_view(0, real);
    if (joined.ok() && canonical(*joined) == canonical(want)) return "";
    return "pieces concatenate to " + (joined.ok() ? show_tensor(*joined) : joined.error().message) +
           ", expected shard rows [0, " + std::to_string(real) + ") = " + show_tensor(want);
  });
}

Verdict all_padding_ranks_build_one_lnp(Implementation& impl, const GtpCase& c) {
  std::int64_t lnp_ranks = 0;
  const Verdict v = for_each_rank(impl, c, [&](const RankBuild& r, const GtpPadding& pad) -> Verdict {
    const auto* lnp = r.built.leaf_if<LocalNonpersistent>();
    if (!pad.all_padding(r.g)) return lnp ? "a rank with real rows built an LNP" : "";
    ++lnp_ranks;
    const auto* empty = lnp ? std::get_if<TensorValue>(&lnp->payload) : nullptr;
    if (!empty) return "an all-padding rank must build one LNP holding a zero-element tensor";
    if (empty->rows() != 0 || empty->dtype != c.dtype) return "the LNP tensor is " + show_tensor(*empty);
    return "";
  });
  if (!v.empty()) return v;
  IH_VERDICT_ASSIGN(padding, padding_of(c));
  if (lnp_ranks != c.tp * padding.all_padding_ranks())
    return std::to_string(lnp_ranks) +
           " all-padding ranks, expected T * floor(pad / R) = " + std::to_string(c.tp * padding.all_padding_ranks());
  return "";
}

Verdict merge_restores_shard(Implementation& impl, const GtpCase& c) {
  return for_each_rank(impl, c, [&](const RankBuild& r, const GtpPadding& pad) -> Verdict {
    StateNode loaded;
    if (const auto* lnp = r.built.leaf_if<LocalNonpersistent>()) {
      const auto* t = std::get_if<TensorValue>(&lnp->payload);
      if (!t) return "all-padding build has no tensor to merge";
      loaded = StateNode(*t);
    } else {
      StateList list;
      for (const ShardedTensor& p : r.pieces) list.emplace_back(*p.data);
      loaded = StateNode(std::move(list));
    }
    GtpFactoryParams stripped = r.params;
    stripped.shard.reset();  // load preprocessing strips the factory's data
    auto merged = impl.gtp_merge(c.design, stripped, loaded);
    const std::int64_t real = pad.real_rows(r.g);
    auto want = TensorValue::concat_rows(
        {r.params.shard->row_view(0, real), TensorValue::zeros({pad.shard_rows - real, c.cols}, c.dtype)});
    if (merged.ok() && merged->shape == want->shape && merged->dtype == c.dtype &&
        canonical(*merged) == canonical(*want))
      return "";
    return "merge gives " + (merged.ok() ? show_tensor(*merged) : merged.error().message) + ", expected " +
           show_tensor(*want);
  });
}

Verdict pieces_are_views(Implementation& impl, const GtpCase& c) {
  return for_each_rank(impl, c, [&](const RankBuild& r, const GtpPadding&) -> Verdict {
    const std::uint64_t storage = r.params.shard->blocks.front().storage;
    for (const ShardedTensor& p : r.pieces)
      for (const RowBlock& b : p.data->blocks)
        if (b.storage != storage || b.first_row + b.rows > r.params.shard->rows())
          return "piece " + p.key + " does not view the shard's storage: " + show_tensor(*p.data);
    return "";
  });
}

Verdict pieces_are_irregular(Implementation& impl, const GtpCase& c) {
  return for_each_rank(impl, c, [&](const RankBuild& r, const GtpPadding&) -> Verdict {
    for (const ShardedTensor& p : r.pieces) {
      // At G = 1 there is no GTP shard: the mixer's non-GTP split runs (spec 4.3), a regular grid.
      if (p.axis_fragmentations && c.gtp > 1) return "piece " + p.key + " carries axis_fragmentations (must be None)";
      if (p.allow_shape_mismatch) return "piece " + p.key + " inherits allow_shape_mismatch";
      if (auto valid = p.validate_metadata_integrity(); !valid.ok()) return valid.error().message;
    }
    return "";
  });
}

}  // namespace

std::vector<Property> gtp_layout_properties_more();  // props_gtp_more.cc

std::vector<Property> gtp_properties() {
  const WorldGen<GtpCase> gen = [](const WorldCapacity& capacity) {
    return genGtpConfig(GtpSaveDesign::shard_split, capacity);
  };
  GtpCase review{"gdp", {10, 3, 2, 3}, 2, 2, 16, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase pr{"gdp", {10'240, 5'120, 80, 3}, 1, 64, 32, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase tiny{"gdp", {1, 1, 1, 1}, 2, 8, 16, 2, "float32", GtpSaveDesign::shard_split, 0};
  const std::map<std::string, GtpCase> spec = {
      {"review_tp2", review}, {"pr_61760_g64_p32", pr}, {"tiny_all_padding", tiny}};
  std::vector<Property> out = {
      make_world_property<GtpCase>("gtp_keys_shapes_match_nongtp", "gtp",
                                   "piece keys and global shapes equal the non-GTP factory's (4.7.1, 6.2)", gen,
                                   keys_and_shapes_match_nongtp, spec),
      make_world_property<GtpCase>("gtp_pieces_tile_chunks", "gtp",
                                   "main-replica pieces tile [0, T*s_j) once, in contiguous order (4.7.2, 6.1, 6.10)",
                                   gen, main_pieces_tile_chunks, spec),
      make_world_property<GtpCase>("gtp_pieces_are_real_rows", "gtp",
                                   "a rank's pieces concatenate to shard rows [0, r): no pad row saved (4.7.3, 6.3)",
                                   gen, pieces_are_real_rows, spec),
      make_world_property<GtpCase>("gtp_all_padding_ranks", "gtp",
                                   "exactly the floor(pad/R) all-padding ranks build one zero-element LNP (6.4, 6.5)",
                                   gen, all_padding_ranks_build_one_lnp, spec),
      make_world_property<GtpCase>(
          "gtp_merge_restores_shard", "gtp",
          "merge(build) without factory data equals the shard, pad rows zero, same dtype (4.7.4, 6.6, 6.7)", gen,
          merge_restores_shard, spec),
      make_world_property<GtpCase>("gtp_pieces_are_views", "gtp",
                                   "every piece views the shard's storage, nothing copied (4.7.5, 6.8)", gen,
                                   pieces_are_views, spec),
      make_world_property<GtpCase>(
          "gtp_pieces_irregular", "gtp",
          "pieces have axis_fragmentations None, no allow_shape_mismatch, valid metadata (6.9)", gen,
          pieces_are_irregular, spec),
  };
  for (Property& p : gtp_layout_properties_more()) out.push_back(std::move(p));
  return out;
}

}  // namespace ih::props
