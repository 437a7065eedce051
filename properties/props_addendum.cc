// Properties of the spec addendum (docs/spec-addendum.md), each through the seam: the GTP
// parameter's writer election (A), allow_shape_mismatch at load (B), DCP's save-plan validation
// (D) and Mamba's in_proj staying on the gather design (E).
#include <map>
#include <set>

#include "models/checkpoint_model.h"
#include "models/flat_state.h"
#include "models/gtp_election.h"
#include "models/retarget.h"
#include "models/split_factory.h"
#include "models/strict_load.h"
#include "models/synthetic_model.h"
#include "properties/gtp_world.h"
#include "properties/load_world.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

std::string at(std::int64_t t, std::int64_t g) {
  return "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ")";
}

// --- A: writer election -------------------------------------------------------------------------

/// The parameter entry request of global rank `r` of an election case.
Result<GtpFactoryParams> election_params(const ElectionCase& c, const WorldGrids& world,
                                         const std::optional<WorldGrids>& foreign, std::int64_t r) {
  GtpElection e;
  e.expert = c.expert, e.global_rank = r;
  if (c.source == "caller" || c.source == "caller_over_foreign_globals") e.caller = world;
  if (c.source == "globals") e.globals = world;
  if (c.source == "caller_over_foreign_globals") e.globals = foreign;
  const ParallelGrid& grid = c.expert ? world.expert : world.dense;  // the grid the module was built on
  GtpFactoryParams p;
  p.key = c.expert ? "decoder.layers.0.mlp.experts.linear_fc1.weight" : "decoder.layers.0.mlp.linear_fc1.weight";
  p.layout = SplitLayout{{c.rows}, {"w"}};
  p.tp_size = grid.size("tp"), p.tp_rank = grid.coordinate(r, "tp");
  p.gtp_size = grid.size("gtp_remat"), p.gtp_rank = grid.coordinate(r, "gtp_remat");
  p.pad_alignment = c.pad_alignment, p.cols = c.cols, p.dtype = "bfloat16";
  IH_TRY_ASSIGN(padding, gtp_weight_padding(c.rows, p.gtp_size, c.pad_alignment));
  p.shard = TensorValue::of_storage(1 + static_cast<std::uint64_t>(r), {padding.shard_rows, c.cols}, "bfloat16");
  p.replica_id = ReplicaId::tuple({0, 0, 999});  // must be ignored: the election decides
  p.election = e;
  return p;
}

Verdict writer_election(Implementation& impl, const ElectionCase& c) {
  IH_VERDICT_ASSIGN(world, default_world_grids(c.tp, c.gtp, c.cp, c.dp, c.etp, c.ep, c.egtp));
  std::optional<WorldGrids> foreign;  // parallel_state built for the same world without GTP
  if (c.source == "caller_over_foreign_globals") {
    IH_VERDICT_ASSIGN(f, default_world_grids(c.tp, 1, c.cp, c.dp * c.gtp, c.etp, c.ep, 1));
    foreign = f;
  }
  GlobalMetadata metadata;
  const std::int64_t ranks = world.dense.world_size();
  for (std::int64_t r = 0; r < ranks; ++r) {
    IH_VERDICT_ASSIGN(params, election_params(c, world, foreign, r));
    auto entry = impl.gtp_param_entry(params);
    if (c.source == "none") {
      if (entry.ok())
        return "rank " + std::to_string(r) + ": elected replica " + entry->replica_id.to_string() +
               " with no stamped group and no parallel_state (Megatron raises)";
      if (entry.error().kind != ErrorKind::gtp_replica_group_unknown)
        return "rank " + std::to_string(r) + ": " + std::string(to_string(entry.error().kind)) + ": " +
               entry.error().message + " (expected gtp_replica_group_unknown)";
      continue;
    }
    if (!entry.ok())
      return "rank " + std::to_string(r) + ": " + std::string(to_string(entry.error().kind)) + ": " +
             entry.error().message;
    metadata.tensors.push_back({r, entry->without_data()});
  }
  if (c.source == "none") return "";
  const IntegrityReport report = check_integrity(metadata);
  if (report.ok()) return "";
  return "not exactly one writer per shard: " + report.problems.front().message;
}

// --- D: DCP's save-plan validation --------------------------------------------------------------

bool has_error(const std::vector<std::string>& errors, const std::string& key, const std::string& what) {
  for (const std::string& e : errors)
    if (e.rfind("key:" + key + " " + what, 0) == 0) return true;
  return false;
}

bool mentions_key(const std::vector<std::string>& errors, const std::string& key) {
  for (const std::string& e : errors)
    if (e.rfind("key:" + key + " ", 0) == 0) return true;
  return false;
}

Result<std::vector<std::string>> dcp_errors(Implementation& impl, const GlobalMetadata& metadata) {
  IH_TRY_ASSIGN(v, impl.megatron_validation(metadata));
  if (!v.dcp_plan_errors) return unsupported(impl.name(), "DCP's save-plan validation (dcp_plan_errors)");
  return *v.dcp_plan_errors;
}

Verdict dcp_plan_checks(Implementation& impl, const GtpCase& c) {
  auto ranks = build_all(impl, c);
  if (!ranks.ok()) return ranks.error().message;
  GlobalMetadata all;
  for (const RankBuild& r : *ranks)
    for (const ShardedTensor& p : r.pieces) all.tensors.push_back({r.t * c.gtp + r.g, p.without_data()});
  const std::int64_t world = c.tp * c.gtp;
  all.world_size = world;  // every rank plans, even one left without entries
  IH_VERDICT_ASSIGN(clean, dcp_errors(impl, all));
  if (!clean.empty()) return "DCP rejects a valid shard-split save: " + clean.front();
  if (all.tensors.empty()) return "";

  // A dropped piece: a fill error for its key whenever more than one rank plans and the key survives.
  const std::size_t victim = c.drop % all.tensors.size();
  const RankedTensor dropped_piece = all.tensors[victim];
  const std::string key = dropped_piece.tensor.key;
  GlobalMetadata dropped = all;
  dropped.tensors.erase(dropped.tensors.begin() + static_cast<std::ptrdiff_t>(victim));
  std::int64_t survivors = 0;
  for (const RankedTensor& t : dropped.tensors) survivors += t.tensor.key == key;
  IH_VERDICT_ASSIGN(hole, dcp_errors(impl, dropped));
  const bool expect_fill = world > 1 && survivors > 0;
  if (expect_fill && !has_error(hole, key, "invalid fill"))
    return "DCP misses the hole of dropped piece " + std::to_string(victim) + " (" + key + ")";
  if (!expect_fill && mentions_key(hole, key))
    return "DCP reports " + hole.front() + " although " +
           (world == 1 ? "one rank plans (no fill check)" : "the key is gone");

  // A planted overlapping chunk (one row down) is an overlap; an exact duplicate is de-duplicated.
  const RankedTensor& base = dropped_piece;
  GlobalMetadata overlapping = all, duplicated = all;
  if (world > 1) {  // another rank plans the same (key, offset): de-duplicated, not an error
    duplicated.tensors.push_back({(base.rank + 1) % world, base.tensor});
    IH_VERDICT_ASSIGN(dup, dcp_errors(impl, duplicated));
    if (!dup.empty()) return "DCP rejects an exact duplicate chunk, which its de-duplication drops: " + dup.front();
  }
  if (base.tensor.local_shape[0] >= 2) {
    ShardedTensor shifted = base.tensor;
    shifted.global_offset[0] += 1, shifted.local_shape[0] -= 1;
    shifted.axis_fragmentations.reset();  // off any grid (a G = 1 chunk has one): DCP plans boxes, not grids
    overlapping.tensors.push_back({(base.rank + 1) % world, shifted});
    IH_VERDICT_ASSIGN(over, dcp_errors(impl, overlapping));
    if (!has_error(over, key, "has overlapping chunks"))
      return "DCP misses a chunk overlapping piece " + std::to_string(victim) + " (" + key + ")";
  }
  return "";
}

// --- E: Mamba's in_proj keeps the gather design -------------------------------------------------

Verdict mamba_gathers(Implementation& impl, const GtpCase& c) {
  GtpCase m = c;
  m.mixer = "mamba", m.design = GtpSaveDesign::shard_split;
  if (!padding_of(m).ok()) m.pad_alignment = 16;  // G was drawn for GDP's rows; with padding any G fits
  std::map<std::string, std::int64_t> main_pieces;
  for (std::int64_t t = 0; t < m.tp; ++t)
    for (std::int64_t g = 0; g < m.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(m, t, g));
      params.mixer = GtpMixer::mamba;
      params.replica_id = ReplicaId::tuple({0, 0, 0});  // the shard's id: GTP-excluded DP rank 0
      IH_VERDICT_ASSIGN(built, impl.gtp_pieces(GtpSaveDesign::shard_split, params));
      IH_VERDICT_ASSIGN(rows, params.layout.total_rows());
      IH_VERDICT_ASSIGN(orig, tp_row_sharded(params.key, rows, m.cols, m.tp, t));
      IH_VERDICT_ASSIGN(chunks, split_chunks(orig, params.layout));
      if (!built.is_list() || built.list().size() != chunks.size())
        return at(t, g) + ": Mamba's in_proj did not build the non-GTP split of the gathered tensor";
      const std::uint64_t shard = params.shard->blocks.front().storage;
      for (std::size_t i = 0; i < chunks.size(); ++i) {
        const auto* p = built.list()[i].leaf_if<ShardedTensor>();
        if (!p) return at(t, g) + ": entry " + std::to_string(i) + " is not a ShardedTensor";
        const ShardedTensor& want = chunks[i];
        if (p->key != want.key || p->global_shape != want.global_shape || p->global_offset != want.global_offset ||
            p->local_shape != want.local_shape || p->axis_fragmentations != want.axis_fragmentations)
          return at(t, g) + ": piece " + p->key + " is not the gathered tensor's chunk (shard split applied to Mamba?)";
        if (p->data && m.gtp > 1)  // at G = 1 nothing is gathered: the split views the parameter itself
          for (const RowBlock& b : p->data->blocks)
            if (b.storage == shard) return at(t, g) + ": piece " + p->key + " views the GTP shard; Mamba gathers first";
        if (p->is_main_replica() != (g == 0))
          return at(t, g) + ": replica " + p->replica_id.to_string() + " of the gathered chunk " + p->key +
                 " (only GTP peer 0 of DP replica 0 writes it)";
        main_pieces[p->key] += p->is_main_replica();
      }
    }
  for (const auto& [key, count] : main_pieces)
    if (count != m.tp) return key + ": " + std::to_string(count) + " main replicas, expected one per TP rank";
  return "";
}

// --- B: allow_shape_mismatch at load ------------------------------------------------------------

/// Saved row x: the shard row of the saved entry whose rows hold x (zero-row view when none does).
std::optional<TensorValue> saved_row(const std::vector<ShardedTensor>& saved, std::int64_t x) {
  for (const ShardedTensor& e : saved) {
    const std::int64_t axis = e.prepend_axis_num, first = e.global_offset[axis], rows = e.local_shape[0];
    if (e.data && x >= first && x < first + rows) return e.data->row_view(x - first, x - first + 1);
  }
  return std::nullopt;
}

/// The entries come from the implementation (its padding, its shapes), so the expectation follows
/// what it saved and what it asks for: row x of a request is the saved row x when x is stored and
/// zero otherwise under allow_shape_mismatch; a shape change without the flag must be refused.
Verdict shape_mismatch_load(Implementation& impl, const GtpCrossCase& c) {
  GtpCase save = c.save;
  save.design = GtpSaveDesign::shard_split;
  GtpCase load = save;
  load.gtp = c.load_gtp, load.pad_alignment = c.load_pad_alignment;
  std::vector<StateNode> trees;
  std::vector<ShardedTensor> saved;
  for (std::int64_t t = 0; t < save.tp; ++t)
    for (std::int64_t g = 0; g < save.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(save, t, g));
      params.replica_id = ReplicaId::tuple({0, 0, 0});
      IH_VERDICT_ASSIGN(entry, impl.gtp_param_entry(params));
      if (!entry.data) entry.data = params.shard;
      saved.push_back(entry);
      trees.push_back(StateNode(StateDict{{std::string("w"), StateNode(entry)}}));
    }
  IH_VERDICT_ASSIGN(checkpoint, save_checkpoint(trees));
  const std::int64_t stored = saved.front().global_shape[0];
  for (std::int64_t t = 0; t < load.tp; ++t)
    for (std::int64_t g = 0; g < load.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(load, t, g));
      params.replica_id = ReplicaId::tuple({0, 0, 0});
      params.shard = TensorValue::of_storage((std::uint64_t{1} << 48) + static_cast<std::uint64_t>(t * load.gtp + g),
                                             params.shard->shape, load.dtype);
      IH_VERDICT_ASSIGN(request, impl.gtp_param_entry(params));
      const std::int64_t requested = request.global_shape[0];
      const StateNode tree(StateDict{{std::string("w"), StateNode(request)}});
      auto result = impl.load_state(checkpoint, tree, LoadOrder::serialization_load);
      if (stored != requested && !request.allow_shape_mismatch) {
        if (result.ok() || result.error().kind != ErrorKind::global_shape_mismatch)
          return at(t, g) + ": a global shape change (" + std::to_string(stored) + " -> " + std::to_string(requested) +
                 " rows) without allow_shape_mismatch must be refused with global_shape_mismatch, got " +
                 (result.ok() ? std::string("a value") : std::string(to_string(result.error().kind)));
        continue;
      }
      if (!result.ok())
        return at(t, g) + ": " + std::string(to_string(result.error().kind)) + ": " + result.error().message +
               (stored != requested ? " (allow_shape_mismatch: Megatron zero-fills, never refuses)" : "");
      const auto* got =
          result->find(std::string("w")) ? result->find(std::string("w"))->leaf_if<TensorValue>() : nullptr;
      std::vector<TensorValue> rows{TensorValue::zeros({0, load.cols}, load.dtype)};
      const std::int64_t begin = request.global_offset[request.prepend_axis_num];
      for (std::int64_t x = begin; x < begin + request.local_shape[0]; ++x) {
        auto row = x < stored ? saved_row(saved, x) : std::nullopt;
        rows.push_back(row ? *row : TensorValue::zeros({1, load.cols}, load.dtype));
      }
      IH_VERDICT_ASSIGN(want, TensorValue::concat_rows(rows));
      if (!got || got->shape != want.shape || canonical(*got) != canonical(want))
        return at(t, g) + ": loaded " + (got ? show_tensor(*got) : std::string("no tensor")) + ", expected " +
               show_tensor(want) + " (stored rows " + std::to_string(stored) + ", requested " +
               std::to_string(requested) + ")";
    }
  return "";
}

// --- F: cross-loads whose save side gathered ----------------------------------------------------

/// A gather-design save (only GTP peer 0 writes the gathered TP-local tensor) loaded at another G
/// and padding by either design: the loader's real rows exact (the gathered buffer of its TP rank),
/// its pad rows zero. The shard split merges pieces of that buffer; the gather merge re-pads it.
Verdict gather_saved_cross_load(Implementation& impl, const GtpCrossCase& c) {
  GtpCase save = c.save;
  save.design = GtpSaveDesign::gather;
  std::vector<StateNode> trees;
  for (std::int64_t t = 0; t < save.tp; ++t)
    for (std::int64_t g = 0; g < save.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(save, t, g));
      trees.push_back(StateNode(StateDict{{std::string("w"), StateNode(seam_factory(impl, save.design, params))}}));
    }
  IH_VERDICT_ASSIGN(checkpoint, save_checkpoint(trees));
  IH_VERDICT_ASSIGN(saved_pad, padding_of(save));
  // The buffer TP rank t's save split: the gathered tensor, or at G = 1 (nothing to gather, spec 4.5)
  // whatever the target's split viewed; its first piece starts at TP-local row 0.
  std::vector<std::uint64_t> saved_buffer;
  for (std::int64_t t = 0; t < save.tp; ++t) {
    IH_VERDICT_ASSIGN(params, rank_params(save, t, 0));
    IH_VERDICT_ASSIGN(built, impl.gtp_pieces(save.design, params));
    const std::vector<FlatEntry> pieces = flatten(built);
    const auto* first = pieces.empty() ? nullptr : std::get_if<ShardedTensor>(&pieces.front().entry);
    if (!first || !first->data || first->data->blocks.empty())
      return at(t, 0) + ": the gather save built no piece with data";
    saved_buffer.push_back(save.gtp == 1 ? first->data->blocks.front().storage
                                         : (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(t));
  }
  for (GtpSaveDesign design : {GtpSaveDesign::shard_split, GtpSaveDesign::gather}) {
    GtpCase load = save;
    load.gtp = c.load_gtp, load.pad_alignment = c.load_pad_alignment, load.design = design;
    IH_VERDICT_ASSIGN(pad, padding_of(load));
    for (std::int64_t t = 0; t < load.tp; ++t)
      for (std::int64_t g = 0; g < load.gtp; ++g) {
        IH_VERDICT_ASSIGN(params, rank_params(load, t, g));
        params.shard = TensorValue::of_storage((std::uint64_t{1} << 48) + static_cast<std::uint64_t>(t * load.gtp + g),
                                               params.shard->shape, load.dtype);
        const StateNode request(StateDict{{std::string("w"), StateNode(seam_factory(impl, design, params))}});
        IH_VERDICT_ASSIGN(result, impl.load_state(checkpoint, request, LoadOrder::serialization_load));
        const auto* got =
            result.find(std::string("w")) ? result.find(std::string("w"))->leaf_if<TensorValue>() : nullptr;
        const std::int64_t begin = g * pad.shard_rows, real = pad.real_rows(g);
        const auto gathered =
            TensorValue::of_storage(saved_buffer[static_cast<std::size_t>(t)], {saved_pad.rows, save.cols}, save.dtype);
        IH_VERDICT_ASSIGN(
            want, TensorValue::concat_rows({gathered.row_view(begin, begin + real),
                                            TensorValue::zeros({pad.shard_rows - real, save.cols}, save.dtype)}));
        if (!got || got->shape != want.shape || got->dtype != want.dtype || canonical(*got) != canonical(want))
          return to_string(design) + " load " + at(t, g) + " got " +
                 (got ? show_tensor(*got) : std::string("no tensor")) + ", expected " + show_tensor(want);
      }
  }
  return "";
}

// --- C: strictness at load ----------------------------------------------------------------------

/// Default strictness (assume_ok_unexpected): a requested key the checkpoint lacks fails the load;
/// once the other modes' adjust_non_strict_load removed it, the rest loads exactly.
Verdict strict_unexpected_key(Implementation& impl, const GtpCase& c) {
  GtpCase save = c;
  save.design = GtpSaveDesign::shard_split;
  std::vector<StateNode> trees;
  std::vector<ShardedTensor> entries;
  for (std::int64_t t = 0; t < save.tp; ++t)
    for (std::int64_t g = 0; g < save.gtp; ++g) {
      IH_VERDICT_ASSIGN(params, rank_params(save, t, g));
      params.replica_id = ReplicaId::tuple({0, 0, 0});
      IH_VERDICT_ASSIGN(entry, impl.gtp_param_entry(params));
      entries.push_back(entry);
      trees.push_back(StateNode(StateDict{{std::string("w"), StateNode(entry)}}));
    }
  IH_VERDICT_ASSIGN(checkpoint, save_checkpoint(trees));
  for (std::size_t r = 0; r < entries.size(); ++r) {
    ShardedTensor want = entries[r], extra = entries[r];
    want.data = TensorValue::of_storage((std::uint64_t{1} << 48) + r, want.local_shape, want.dtype);
    extra.key = "decoder.layers.0.mixer.never_saved.weight";
    extra.data = TensorValue::of_storage((std::uint64_t{1} << 49) + r, extra.local_shape, extra.dtype);
    const StateNode request(StateDict{{std::string("w"), StateNode(want)}, {std::string("extra"), StateNode(extra)}});
    auto strict = impl.load_state(checkpoint, request, LoadOrder::serialization_load);
    if (strict.ok())
      return "rank " + std::to_string(r) + ": a request for " + extra.key +
             ", which the checkpoint lacks, loaded without error";
    if (strict.error().kind == seam_kind::unsupported) return std::string("unsupported: ") + strict.error().message;
    IH_VERDICT_ASSIGN(adjusted, apply_strict_handling(checkpoint, request, StrictHandling::log_unexpected));
    if (adjusted.unexpected != std::set<std::string>{extra.key} || adjusted.request.find(std::string("extra")))
      return "rank " + std::to_string(r) + ": strictness did not single out " + extra.key;
    IH_VERDICT_ASSIGN(loaded, impl.load_state(checkpoint, adjusted.request, LoadOrder::serialization_load));
    const StateNode* w = loaded.find(std::string("w"));
    const auto* value = w ? w->leaf_if<TensorValue>() : nullptr;
    if (!value || canonical(*value) != canonical(*entries[r].data))
      return "rank " + std::to_string(r) + ": after removing the unexpected key, w loaded " +
             (value ? show_tensor(*value) : std::string("nothing")) + ", expected " + show_tensor(*entries[r].data);
  }
  return "";
}

// --- H: GPT->Hybrid loads under GTP -------------------------------------------------------------

/// D of the synthetic mixer's in_proj at TP size `tp` (spec 4.1 / 4.10).
Result<std::int64_t> synthetic_in_proj_rows(const ModelConfig& m, std::int64_t tp) {
  const std::int64_t d_inner = m.mamba_heads * m.mamba_head_dim / tp;
  const std::int64_t group_state = m.mamba_groups * m.mamba_state / tp, heads = m.mamba_heads / tp;
  IH_TRY_ASSIGN(layout, m.ssm_mixer == "gdp" ? gdp_in_proj_layout({d_inner, group_state, heads, m.gdp_householder})
                                             : mamba_in_proj_layout({d_inner, group_state, heads}));
  return layout.total_rows();
}

Verdict gpt_to_hybrid_under_gtp(Implementation& impl, const LoadCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.hybrid.pattern)));
  IH_VERDICT_ASSIGN(checkpoint, save_gpt(c, maps.num_gpt_layers));
  const ModelConfig& m = c.hybrid.config;
  IH_VERDICT_ASSIGN(rows, synthetic_in_proj_rows(m, c.hybrid.layout.tp));
  IH_VERDICT_ASSIGN(padding, gtp_weight_padding(rows, c.hybrid.layout.gtp, m.pad_alignment));
  const bool shard_split =
      c.hybrid.layout.gtp > 1 && m.ssm_mixer == "gdp" && m.gdp_design == GtpSaveDesign::shard_split;
  for (const RankLayout& rank : all_ranks(c.hybrid.layout)) {
    const std::string where = "hybrid rank tp" + std::to_string(rank.tp_rank) + " pp" + std::to_string(rank.pp_rank) +
                              " g" + std::to_string(rank.gtp_rank) + ": ";
    IH_VERDICT_ASSIGN(tree, hybrid_sharded_state_dict(m, c.hybrid.pattern, rank, OptimizerStates::adam()));
    const std::vector<FlatEntry> before = flatten(tree);
    IH_VERDICT_ASSIGN(after, impl.retarget(c.hybrid.pattern, before));
    if (after.size() != before.size()) return where + "retarget changed the number of entries";
    std::map<std::string, TensorValue> fresh;  // in_proj paths -> the value the load must put back
    for (std::size_t i = 0; i < before.size(); ++i) {
      const auto* factory = std::get_if<ShardedTensorFactory>(&before[i].entry);
      if (!factory || !factory->key.ends_with("mixer.in_proj.weight")) continue;
      // Every M layer is fresh in a GPT->Hybrid load: LNP(factory.data) (spec 2.4, 4.11).
      const auto* lnp = std::get_if<LocalNonpersistent>(&after[i].entry);
      if (lnp && std::holds_alternative<std::monostate>(lnp->payload) && impl.name().rfind("megatron", 0) == 0)
        return "unsupported: " + impl.name() + " returned the fresh in_proj LNP of " + before[i].path +
               " without a payload (a prebuilt factory's data does not cross the adapter)";
      if (!lnp || !factory->data || lnp->payload != Payload(*factory->data))
        return where + before[i].path + ": a fresh in_proj factory must become LNP(factory.data)";
      if (shard_split && factory->data->shape != Shape{padding.shard_rows, m.hidden})
        return where + before[i].path + ": shard split keeps the (R, C) = (" + std::to_string(padding.shard_rows) +
               ", " + std::to_string(m.hidden) + ") parameter shard as the fresh value, got " +
               show_tensor(*factory->data);
      fresh[before[i].path] = *factory->data;
    }
    IH_VERDICT_ASSIGN(request, unflatten(after));
    auto loaded = impl.load_state(checkpoint, request, LoadOrder::serialization_load);
    if (!loaded.ok()) {
      if (loaded.error().kind == ErrorKind::not_modelled) continue;  // column-slice reads: beyond the model
      return where + "load: " + std::string(to_string(loaded.error().kind)) + ": " + loaded.error().message;
    }
    for (const FlatEntry& e : flatten(*loaded)) {
      const auto it = fresh.find(e.path);
      if (it == fresh.end()) continue;
      const auto* value = std::get_if<TensorValue>(&e.entry);
      if (!value || *value != it->second) return where + e.path + ": the load did not put the fresh in_proj value back";
      fresh.erase(it);
    }
    if (!fresh.empty()) return where + fresh.begin()->first + ": missing from the loaded state";
  }
  return "";
}

// --- G: one expert ------------------------------------------------------------------------------

/// GPT->Hybrid with E = 1. Every tensor request is covered. An expert _extra_state object of the
/// hybrid has the shape (1,) and offset (0,) of the placeholder, so retargeting replaces it by the
/// layer axis: the request asks shard_<l>_<L> where GPT wrote shard_<l>.0_<L>.1 (Megatron's
/// ambiguity, modelled as Megatron has it). Any other uncovered request is a failure.
Verdict single_expert_keys(Implementation& impl, const LoadCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.hybrid.pattern)));
  IH_VERDICT_ASSIGN(checkpoint, save_gpt(c, maps.num_gpt_layers));
  std::int64_t ambiguous = 0;
  for (const RankLayout& rank : all_ranks(c.hybrid.layout)) {
    IH_VERDICT_ASSIGN(tree,
                      hybrid_sharded_state_dict(c.hybrid.config, c.hybrid.pattern, rank, OptimizerStates::adam()));
    IH_VERDICT_ASSIGN(after, impl.retarget(c.hybrid.pattern, flatten(tree)));
    IH_VERDICT_ASSIGN(request, unflatten(after));
    IH_VERDICT_ASSIGN(pre, load_preprocess(request));
    Verdict out;
    visit_leaves(pre.sharded, [&](const std::string& path, const Leaf& leaf) {
      if (!out.empty()) return;
      if (const auto* t = std::get_if<ShardedTensor>(&leaf)) {
        if (auto plan = resolve_load_plan(checkpoint.index, *t); !plan.ok()) out = path + ": " + plan.error().message;
        return;
      }
      const auto* o = std::get_if<ShardedObject>(&leaf);
      if (!o) return;
      const bool expert = o->key.find(".mlp.experts.") != std::string::npos;
      const bool stored = checkpoint.objects.count(o->unique_key()) > 0;
      if (!expert) {
        if (!stored) out = path + ": object " + o->unique_key() + " was not saved";
        return;
      }
      // The GPT-side key of the same shard: the layer axis, then the expert axis of size 1.
      const std::string gpt_key =
          o->key + "/shard_" + std::to_string(o->global_offset[0]) + ".0_" + std::to_string(o->global_shape[0]) + ".1";
      if (stored || o->global_shape.size() != 1 || !checkpoint.objects.count(gpt_key))
        out = path + ": expert object " + o->unique_key() +
              (stored ? " was found" : " has no GPT-side twin " + gpt_key) +
              "; with E = 1 Megatron replaces the (1,)/(0,) expert shape like a placeholder and asks for shard_<l>_<L>";
      else
        ++ambiguous;
    });
    if (!out.empty())
      return "hybrid rank tp" + std::to_string(rank.tp_rank) + " pp" + std::to_string(rank.pp_rank) + ": " + out;
  }
  return ambiguous > 0 ? "" : "no expert object met the E = 1 key-shape ambiguity";
}

}  // namespace

std::vector<Property> addendum_properties() {
  const ElectionCase expert_ep2{1, 2, 1, 2, true, 1, 2, 2, "caller", 30, 16, 2};
  const ElectionCase foreign{2, 2, 1, 2, false, 1, 1, 1, "caller_over_foreign_globals", 60, 16, 2};
  const ElectionCase inclusive{1, 4, 2, 1, false, 1, 1, 1, "globals", 61, 32, 2};
  const ElectionCase none{1, 2, 1, 1, false, 1, 1, 1, "none", 30, 16, 2};
  GtpCase review{"gdp", {10, 3, 2, 3}, 2, 2, 16, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase mamba_c{"mamba", {256, 256, 4, 1}, 1, 2, 32, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  GtpCase t1{"gdp", {10, 3, 2, 3}, 1, 2, 16, 2, "bfloat16", GtpSaveDesign::shard_split, 0};
  const WorldGen<GtpCase> split_config = [](const WorldCapacity& capacity) {
    return genGtpConfig(GtpSaveDesign::shard_split, capacity);
  };
  LoadCase gdp_gtp;
  gdp_gtp.hybrid.pattern = "M*-M*-";
  gdp_gtp.hybrid.config.ssm_mixer = "gdp", gdp_gtp.hybrid.config.pad_alignment = 32;
  gdp_gtp.hybrid.layout.tp = 2, gdp_gtp.hybrid.layout.gtp = 4;
  gdp_gtp.gpt_layout.tp = 1;
  LoadCase mamba_gtp = gdp_gtp;
  mamba_gtp.hybrid.config.ssm_mixer = "mamba";
  return {
      make_property<LoadCase>(
          "gpt_to_hybrid_under_gtp", "load",
          "GPT->Hybrid with GDP/Mamba mixers under GTP: fresh in_proj factories become LNP(factory.data), the (R, C) "
          "shard in the shard split, and load back (4.11, addendum H)",
          genHybridGtpLoadCase(), gpt_to_hybrid_under_gtp,
          {{"gdp_tp2_gtp4_p32", gdp_gtp}, {"mamba_tp2_gtp4_p32", mamba_gtp}}),
      make_world_property<GtpCrossCase>(
          "gather_saved_cross_load", "load",
          "a gather-saved in_proj loaded at another G and padding by the shard split and by the gather merge: real "
          "rows exact, pad rows zero (4.7.6, addendum F)",
          genGtpCross, gather_saved_cross_load,
          {{"review_g2_to_g4_p32", GtpCrossCase{review, 4, 32}}, {"tp2_g2_to_g1", GtpCrossCase{review, 1, 0}}}),
      make_world_property<GtpCase>(
          "strict_unexpected_key", "load",
          "default strictness: a requested key the checkpoint lacks fails the load; removed as the "
          "other modes do, the rest loads exactly (addendum C)",
          split_config, strict_unexpected_key, {{"review_tp2", review}}),
      make_property<LoadCase>("moe_single_expert_keys", "load",
                              "GPT->Hybrid with one expert: tensors covered; expert extra-state objects ask "
                              "shard_<l>_<L> where GPT wrote shard_<l>.0_<L>.1, as Megatron does (addendum G)",
                              genSingleExpertLoadCase(), single_expert_keys),
      make_world_property<ElectionCase>(
          "gtp_writer_election", "gtp",
          "GTP parameter entries: one writer per shard, elected over the GTP-excluded (expert) "
          "DP group, caller's groups first (addendum A)",
          genElectionCase, writer_election,
          {{"expert_ep2_egtp2", expert_ep2},
           {"caller_over_foreign_globals", foreign},
           {"globals_gtp4_cp2", inclusive},
           {"no_groups_raises", none}}),
      make_world_property<GtpCase>(
          "dcp_plan_rejects_holes_overlaps", "gtp",
          "DCP's save-plan validation accepts shard-split pieces, rejects a dropped or overlapping "
          "piece, de-duplicates an exact copy (addendum D)",
          split_config, dcp_plan_checks, {{"review_tp2", review}}),
      make_world_property<GtpCase>("mamba_in_proj_gathers", "gtp",
                                   "Mamba's in_proj asked for the shard split still saves the gathered non-GTP chunks, "
                                   "written by GTP peer 0 (addendum E)",
                                   split_config, mamba_gathers, {{"mamba_g2_p32", mamba_c}}),
      make_world_property<GtpCrossCase>(
          "load_shape_mismatch_zero_fill", "load",
          "a GTP entry loaded at another padding: allow_shape_mismatch zero-fills what was not stored, never refuses "
          "(addendum B)",
          genGtpCross, shape_mismatch_load,
          {{"g2_to_g4_p32", GtpCrossCase{t1, 4, 32}}, {"tp2_g2_to_g1_p0", GtpCrossCase{review, 1, 0}}}),
  };
}

}  // namespace ih::props
