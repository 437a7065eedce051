// Differential checks on layouts and validation: the non-GTP split factory's chunks for every TP
// rank of several GDP/Mamba layouts, Megatron's own validate_sharding_integrity verdicts on valid
// and planted-broken metadata, and FSDP state-dict trees.
#include <functional>

#include "codec/json_codec.h"
#include "harness/gate/gate.h"
#include "models/gtp_layout.h"
#include "models/split_factory.h"
#include "models/synthetic_model.h"
#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

std::string chunks_text(const Result<std::vector<ShardedTensor>>& chunks) {
  if (!chunks.ok()) return "error " + std::string(to_string(chunks.error().kind));
  json::Json out = json::Json::array();
  for (const ShardedTensor& c : *chunks) out.push_back(json::leaf_to_json(c));
  return json::dump(out);
}

/// The in_proj layout a failing case draws in the reports (the target's tiling beside the reference's).
props::GtpCase drawn_case(const GdpDims& dims, std::int64_t tp, std::int64_t gtp, std::int64_t pad) {
  props::GtpCase drawn;
  drawn.dims = dims, drawn.tp = tp, drawn.gtp = gtp, drawn.pad_alignment = pad, drawn.cols = 2;
  return drawn;
}

/// TP rank t's GDP in_proj as the split factory gets it: a hybrid model's, one key per layer, or `stacked` with its
/// layers on a prepended axis (layer 3 of 4, as a GPT-format key is): ShardedTensor.narrow must skip that axis.
Result<ShardedTensor> in_proj_shard(std::int64_t rows, std::int64_t tp, std::int64_t t, bool stacked) {
  if (!stacked) return tp_row_sharded("decoder.layers.3.mixer.in_proj.weight", rows, 2, tp, t);
  return ShardedTensor::from_rank_offsets("decoder.layers.mixer.in_proj.weight", {rows, 2}, {{0, 3, 4}, {1, t, tp}}, {},
                                          1, std::nullopt, "bfloat16");
}

Result<std::string> check_split_chunks(Implementation& target) {
  ReferenceImplementation reference;
  struct Case {
    std::int64_t d_inner, group_state, heads, householder;
  };
  for (const Case& c : {Case{2, 1, 1, 3}, Case{10, 3, 2, 3}, Case{256, 256, 4, 3}, Case{8, 4, 2, 1}}) {
    IH_TRY_ASSIGN(layout, gdp_in_proj_layout(GdpDims{c.d_inner, c.group_state, c.heads, c.householder}));
    IH_TRY_ASSIGN(rows, layout.total_rows());
    for (const bool stacked : {false, true})
      for (std::int64_t tp = 1; tp <= 4; tp *= 2)
        for (std::int64_t t = 0; t < tp; ++t) {
          IH_TRY_ASSIGN(orig, in_proj_shard(rows, tp, t, stacked));
          auto got = target.split_chunks(orig, layout);
          if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
          const std::string want_text = chunks_text(reference.split_chunks(orig, layout)), got_text = chunks_text(got);
          if (got_text != want_text)
            return std::string(stacked ? "layer-stacked " : "") + "GDP in_proj d_inner " + std::to_string(c.d_inner) +
                   " group_state " + std::to_string(c.group_state) + " heads " + std::to_string(c.heads) + " M " +
                   std::to_string(c.householder) + ", TP " + std::to_string(tp) + " rank " + std::to_string(t) +
                   "\n      reference: " + want_text + "\n      target:    " + got_text;
        }
  }
  return std::string();
}

/// A small valid GPT save (TP 2, every rank) as Megatron's validation sees it.
Result<GlobalMetadata> gpt_save_metadata() {
  GlobalMetadata out;
  for (std::int64_t t = 0; t < 2; ++t) {
    IH_TRY_ASSIGN(tree, gpt_sharded_state_dict(ModelConfig{}, 2, {.tp = 2, .tp_rank = t}));
    IH_TRY_STATUS(apply_factories(tree));
    out.add_tree(t, tree);
  }
  return out;
}

std::string verdict_text(const Result<MegatronValidation>& v) {
  if (!v.ok()) return "error " + std::string(to_string(v.error().kind));
  const std::string entry = v->entry_disagreement().empty() ? "" : ", but " + v->entry_disagreement();
  if (v->assertion) return (v->crashed ? "crash: " + *v->assertion : "assertion") + entry;
  return (v->errors.empty() ? "ok" : std::to_string(v->errors.size()) + " error(s)") + entry;
}

/// One more shard's rows on the row axis of `t`'s global shape, its fragment count with it (the local shape has no
/// prepended layer axes, the global shape and the fragments have).
void grow_rows(ShardedTensor& t) {
  const auto row_axis = static_cast<std::size_t>(t.prepend_axis_num);
  t.global_shape[row_axis] += t.local_shape[0];
  if (t.axis_fragmentations) (*t.axis_fragmentations)[row_axis] += 1;
}

/// `t` on a grid twice as fine along its rows (half the local rows, twice the fragments), its offset unchanged:
/// consistent by itself, at odds with another rank's grid for the same key.
void split_rows_finer(ShardedTensor& t) {
  t.local_shape[0] /= 2;
  if (t.axis_fragmentations) (*t.axis_fragmentations)[static_cast<std::size_t>(t.prepend_axis_num)] *= 2;
}

/// Named edits of a valid save, each a mistake Megatron's validation does (or does not) see.
std::vector<std::pair<std::string, std::function<void(GlobalMetadata&)>>> planted_mistakes() {
  const auto tensor_named = [](GlobalMetadata& m, std::int64_t rank, const std::string& suffix) -> ShardedTensor* {
    for (RankedTensor& t : m.tensors)
      if (t.rank == rank && t.tensor.key.ends_with(suffix)) return &t.tensor;
    return nullptr;
  };
  return {
      {"valid TP2 save", [](GlobalMetadata&) {}},
      {"replicated norm written by both TP ranks",
       [=](GlobalMetadata& m) {
         tensor_named(m, 1, "linear_qkv.layer_norm_weight")->replica_id = ReplicaId::tuple({0, 0, 0});
       }},
      {"one TP rank's qkv shard missing",
       [](GlobalMetadata& m) {
         std::erase_if(m.tensors, [](const RankedTensor& t) {
           return t.rank == 1 && t.tensor.key.ends_with("linear_qkv.weight");
         });
       }},
      {"uneven (irregular) pieces with a hole, which Megatron skips",
       [=](GlobalMetadata& m) {
         for (RankedTensor& t : m.tensors)
           if (t.tensor.key.ends_with("linear_fc1.weight")) t.tensor.axis_fragmentations.reset();
         std::erase_if(m.tensors, [](const RankedTensor& t) {
           return t.rank == 1 && t.tensor.key.ends_with("linear_fc1.weight");
         });
       }},
      {"regular and irregular entries under one key",
       [=](GlobalMetadata& m) { tensor_named(m, 1, "linear_fc2.weight")->axis_fragmentations.reset(); }},
      {"extra-state object saved twice",
       [](GlobalMetadata& m) {
         for (RankedObject& o : m.objects)
           if (o.rank == 1 && o.object.key.ends_with("linear_proj._extra_state"))
             o.object.replica_id = ReplicaId::tuple({0, 0, 0});
       }},
      // Travels without a replica_id (megatron_model_ops.cc): ShardedTensor's own default must make them main.
      {"every main replica as the int 0, ShardedTensor's default",
       [](GlobalMetadata& m) {
         for (RankedTensor& t : m.tensors)
           if (t.tensor.replica_id.is_main()) t.tensor.replica_id = ReplicaId{};
       }},
      // Malformed tensors Megatron must refuse at construction (spec 3.1 checks 2 and 4): the mutation campaign's
      // survivors at mapping.py's validate_metadata_integrity (docs/megatron-findings.md).
      {"qkv shard whose offset has one dimension more than its global shape",
       [=](GlobalMetadata& m) { tensor_named(m, 1, "linear_qkv.weight")->global_offset.push_back(0); }},
      {"qkv shard on a regular grid whose row offset is no multiple of its rows",
       [=](GlobalMetadata& m) {
         ShardedTensor* qkv = tensor_named(m, 1, "linear_qkv.weight");
         qkv->global_offset[qkv->prepend_axis_num] += 1;  // the row axis: prepended (layer) axes are not checked
       }},
      // Two ranks disagreeing on a key's global shape, each way round: Megatron compares every rank's shape with
      // the first rank's, so only a larger first shape tells an equality from an ordering (the campaign's
      // survivor at validation.py's `_validate_sharding_for_key`).
      {"qkv's global shape one shard larger on rank 0 than on rank 1",
       [=](GlobalMetadata& m) { grow_rows(*tensor_named(m, 0, "linear_qkv.weight")); }},
      {"qkv's global shape one shard larger on rank 1 than on rank 0",
       [=](GlobalMetadata& m) { grow_rows(*tensor_named(m, 1, "linear_qkv.weight")); }},
      // Two ranks disagreeing on a key's local shape, each on a regular grid of its own: Megatron asserts they agree
      // (the second campaign's survivor at validation.py's `if has_regular_sharding_grid`, negated, skips that).
      {"qkv cut in twice as many pieces on rank 1 as on rank 0, each rank's own grid regular",
       [=](GlobalMetadata& m) { split_rows_finer(*tensor_named(m, 1, "linear_qkv.weight")); }},
      {"extra-state object missing",
       [](GlobalMetadata& m) {
         std::erase_if(m.objects,
                       [](const RankedObject& o) { return o.object.key.ends_with("linear_qkv._extra_state"); });
       }},
  };
}

Result<std::string> check_megatron_validation(Implementation& target) {
  ReferenceImplementation reference;
  IH_TRY_ASSIGN(valid, gpt_save_metadata());
  for (const auto& [name, plant] : planted_mistakes()) {
    GlobalMetadata metadata = valid;
    plant(metadata);
    auto got = target.megatron_validation(metadata);
    if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
    const std::string want_text = verdict_text(reference.megatron_validation(metadata)), got_text = verdict_text(got);
    if (got_text != want_text) return name + "\n      reference: " + want_text + "\n      target:    " + got_text;
  }
  return std::string();
}

/// FSDP model and optimizer trees as training hands them over (flat names; nested optimizer state).
Result<std::string> check_fsdp_trees(Implementation& target) {
  ReferenceImplementation reference;
  const std::string pattern = "M*-M*-";
  const json::Json model = json::Json::parse(R"({
    "module.decoder.layers.0.mixer.in_proj.weight": 1, "module.decoder.layers.1.self_attention.linear_qkv.weight": 2,
    "module.decoder.layers.2.mlp.linear_fc1.weight": 3, "module.decoder.layers.4.self_attention.linear_qkv.weight": 4,
    "module.decoder.final_norm.weight": 5, "module.output_layer._extra_state": 6, "module.embedding.word_embeddings.weight": 7})");
  const json::Json optimizer = json::Json::parse(R"({"state": {
    "module.decoder.layers.1.self_attention.linear_qkv.weight": {"exp_avg": 1, "exp_avg_sq": 2},
    "module.decoder.layers.3.mixer.D": {"exp_avg": 3}, "module.decoder.layers.5.mlp.linear_fc2.weight": {"step": 4}},
    "param_to_group_meta": {"module.decoder.layers.2.mlp.linear_fc1.weight": [0, {"lr": 1}]}, "0": {"nested": [1, 2]}})");
  const std::vector<std::string> checkpoint_keys = {
      "model.module.decoder.layers.0.self_attention.linear_qkv.weight",
      "model.module.decoder.layers.0.mlp.linear_fc1.weight",
      "model.module.decoder.final_layernorm.weight",
      "model.module.embedding.word_embeddings.weight",
      "optimizer.state.module.decoder.layers.0.self_attention.linear_qkv.weight.exp_avg",
      "optimizer.state.module.decoder.layers.0.self_attention.linear_qkv.weight.exp_avg_sq",
      "optimizer.state.module.decoder.layers.1.mlp.linear_fc2.weight.step"};
  for (const auto& [tree, prefix] :
       {std::pair{model, std::string("model")}, std::pair{optimizer, std::string("optimizer")}})
    for (const auto& keys : {std::optional<std::vector<std::string>>(), std::optional(checkpoint_keys)}) {
      const StateNode input = json::tree_from_json(tree);
      auto got = target.fsdp_retarget(pattern, input, keys, prefix);
      if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
      const auto want = reference.fsdp_retarget(pattern, input, keys, prefix);
      const auto show = [](const Result<StateNode>& r) {
        return r.ok() ? json::dump(json::tree_to_json(*r)) : "error " + std::string(to_string(r.error().kind));
      };
      if (show(got) != show(want))
        return prefix + " tree" + (keys ? " with checkpoint keys" : "") + "\n      reference: " + show(want) +
               "\n      target:    " + show(got);
    }
  return std::string();
}

std::string padding_text(const Result<GtpPadding>& padding) {
  if (!padding.ok()) return "error";  // kinds differ by name (assert vs typed error); the fact of failing must agree
  return "R=" + std::to_string(padding->shard_rows) + " pad=" + std::to_string(padding->pad);
}

/// GTP padding arithmetic (spec 4.4) against Megatron's own shard-row function.
Result<std::string> check_gtp_padding(Implementation& target) {
  ReferenceImplementation reference;
  for (std::int64_t rows = 1; rows <= 130; ++rows)
    for (const std::int64_t gtp : {1, 2, 3, 4, 8, 64})
      for (const std::int64_t pad : {0, 16, 32}) {
        auto got = target.gtp_padding(rows, gtp, pad);
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = padding_text(reference.gtp_padding(rows, gtp, pad)), got_text = padding_text(got);
        if (got_text != want_text)
          return "D " + std::to_string(rows) + ", G " + std::to_string(gtp) + ", p " + std::to_string(pad) +
                 "\n      reference: " + want_text + "\n      target:    " + got_text;
      }
  for (const auto& [rows, gtp, pad] : std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>{
           {61760, 64, 32}, {2064, 2, 32}, {1160, 4, 16}}) {
    auto got = target.gtp_padding(rows, gtp, pad);
    if (padding_text(got) != padding_text(reference.gtp_padding(rows, gtp, pad)))
      return "D " + std::to_string(rows) +
             " (spec 4.8-4.10)\n      reference: " + padding_text(reference.gtp_padding(rows, gtp, pad)) +
             "\n      target:    " + padding_text(got);
  }
  return std::string();
}

std::string pieces_text(const Result<StateNode>& built) {
  if (!built.ok()) return "error " + std::string(to_string(built.error().kind));
  if (built->is_leaf())
    return std::holds_alternative<LocalNonpersistent>(built->leaf()) ? "local (all padding)" : "a non-local leaf";
  return json::dump(json::entries_to_json(flatten(*built)));
}

/// The PR's shard-split factory (spec 4.7) on examples B and C and a rows < p*G case.
Result<std::string> check_gtp_pieces(Implementation& target, std::optional<props::GtpCase>& failing) {
  ReferenceImplementation reference;
  struct Case {
    GdpDims dims;
    std::int64_t tp, gtp, pad;
  };
  for (const Case& c :
       {Case{{10, 3, 2, 3}, 2, 2, 16}, Case{{256, 256, 4, 3}, 1, 2, 32}, Case{{1, 1, 1, 1}, 1, 8, 16}}) {
    IH_TRY_ASSIGN(layout, gdp_in_proj_layout(c.dims));
    for (std::int64_t t = 0; t < c.tp; ++t)
      for (std::int64_t g = 0; g < c.gtp; ++g) {
        GtpFactoryParams params{"decoder.layers.0.mixer.in_proj.weight", layout, c.tp, t, c.gtp, g, c.pad, 2};
        // The shard's data (one storage per rank): pieces are judged with the rows they view.
        IH_TRY_ASSIGN(padding, gtp_padding_of(params));
        params.shard = TensorValue::of_storage(static_cast<std::uint64_t>(1 + t * c.gtp + g), {padding.shard_rows, 2},
                                               params.dtype);
        auto got = target.gtp_pieces(GtpSaveDesign::shard_split, params);
        if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
        const std::string want_text = pieces_text(reference.gtp_pieces(GtpSaveDesign::shard_split, params));
        if (pieces_text(got) != want_text) {
          failing = drawn_case(c.dims, c.tp, c.gtp, c.pad);
          return "D " + std::to_string(*layout.total_rows()) + ", T " + std::to_string(c.tp) + " t " +
                 std::to_string(t) + ", G " + std::to_string(c.gtp) + " g " + std::to_string(g) +
                 "\n      reference: " + want_text + "\n      target:    " + pieces_text(got);
        }
      }
  }
  return std::string();
}

/// A differential check whose failing case has an in_proj layout, which the reports draw.
Check layout_check(std::string name, Result<std::string> (*body)(Implementation&, std::optional<props::GtpCase>&)) {
  return Check{"differential", std::move(name), [body](Implementation& target) {
                 std::optional<props::GtpCase> failing;
                 CheckAnswer answer = answer_of(body(target, failing));
                 if (answer.outcome == Outcome::failed) answer.layout = failing;
                 return answer;
               }};
}

}  // namespace

std::vector<Check> layout_differential_checks() {
  return {Check::simple("differential", "split factory chunks, GDP layouts, TP 1/2/4, every rank", check_split_chunks),
          Check::simple("differential", "Megatron validation verdicts on valid and planted-broken saves",
                        check_megatron_validation),
          Check::simple("differential", "FSDP model and optimizer trees, with and without checkpoint keys",
                        check_fsdp_trees),
          Check::simple("differential", "GTP padding, D 1-130 x G 1-64 x p 0/16/32 and the spec's production sizes",
                        check_gtp_padding),
          layout_check("GTP shard-split pieces (the PR's factory), examples B and C, rows < p*G", check_gtp_pieces)};
}

}  // namespace ih::gate
