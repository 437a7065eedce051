// The reference's scenario operations (seam/scenarios.h), built from its own operations through
// `this`, so a mutant's planted bug in gtp_param_entry, load_state or retarget shows in them.
#include <algorithm>
#include <map>
#include <tuple>
#include <utility>

#include "models/checkpoint_model.h"
#include "models/flat_state.h"
#include "models/gpt_layer_maps.h"
#include "models/synthetic_model.h"
#include "seam/reference_implementation.h"

namespace ih {
namespace {

constexpr const char* kInProjKey = "decoder.layers.0.mixer.in_proj.weight";

std::uint64_t saved_storage(std::int64_t t, std::int64_t g) {
  return 0x5000 + static_cast<std::uint64_t>(t * 4096 + g);
}
/// The exp_avg of TP rank t gathered over its GTP group (the gather factory's data).
std::uint64_t gathered_storage(std::int64_t t) { return 0x100000 + static_cast<std::uint64_t>(t); }

GtpFactoryParams side_params(const OptimizerResumeCase& c, const GtpSide& s, std::int64_t t, std::int64_t g,
                             std::uint64_t storage) {
  GtpFactoryParams params;
  params.key = kInProjKey;
  for (std::int64_t section : c.in_proj.sections) params.layout.sections.push_back(section / s.tp);
  params.layout.names = c.in_proj.names;
  params.tp_size = s.tp, params.tp_rank = t, params.gtp_size = s.gtp, params.gtp_rank = g;
  params.pad_alignment = s.pad, params.cols = c.cols, params.dtype = "float32";
  params.replica_id = ReplicaId::tuple({0, 0, 0});  // DP = 1: every shard's only replica writes it
  const auto padding = gtp_padding_of(params);
  params.shard = TensorValue::of_storage(storage, {padding.ok() ? padding->shard_rows : 0, c.cols}, "float32");
  return params;
}

/// Row j of `value`: (storage, row), or nullopt for a zero row.
std::optional<std::pair<std::uint64_t, std::int64_t>> row_of(const TensorValue& value, std::int64_t j) {
  for (const RowBlock& b : value.blocks) {
    if (j < b.rows) return b.is_zero() ? std::nullopt : std::optional(std::make_pair(b.storage, b.first_row + j));
    j -= b.rows;
  }
  return std::nullopt;
}

/// A factory's built pieces (a list) keyed by their position: the load starts from the saved common tree, where
/// a list of pieces leaves an empty list that no loaded list merges with; dicts merge.
StateNode keyed_by_position(StateNode pieces) {
  if (!pieces.is_list()) return pieces;
  StateDict out;
  for (std::size_t i = 0; i < pieces.list().size(); ++i)
    out.push_back({static_cast<std::int64_t>(i), std::move(pieces.list()[i])});
  return StateNode(std::move(out));
}

/// The loaded pieces back in build order, as the factory's merge takes them.
StateNode in_build_order(const StateNode& loaded) {
  if (!loaded.is_dict()) return loaded;
  StateList out;
  for (std::int64_t i = 0; const StateNode* piece = loaded.find(i); ++i) out.push_back(*piece);
  return StateNode(std::move(out));
}

/// A refusal for an error that is a verdict; an error without one (unsupported, timeout, harness) stays an error.
Result<Refusal> refusal(const Error& error, std::string step) {
  if (is_no_answer(error.kind)) return error;
  return Refusal{std::move(step), error.kind, error.message};
}

}  // namespace

namespace {

/// The weight a resume case saves and loads, and how the reference keys its exp_avg (spec 2.6: each
/// optimizer entry is a copy of its model entry, "optimizer.state.exp_avg." prepended).
struct ResumeWeight {
  OptimizerResumeCase c;  // a plain linear's sections summed into its one
  bool pieces = true;     // the GDP in_proj: its entry is the mixer's factory; a linear's its parameter's
  std::string key;        // optimizer.state.exp_avg.<model key>
  std::int64_t rows = 0;  // at TP 1
};

ResumeWeight resume_weight(const OptimizerResumeCase& c) {
  ResumeWeight w{c, c.module == ResumeModule::gdp_in_proj, "", 0};
  w.key = std::string("optimizer.state.exp_avg.") + (w.pieces ? kInProjKey : "decoder.layers.0.mlp.linear_fc1.weight");
  for (std::int64_t s : c.in_proj.sections) w.rows += s;
  if (!w.pieces) w.c.in_proj = SplitLayout{{w.rows}, {"weight"}};
  return w;
}

std::uint64_t requested_storage(std::int64_t g) { return 0x9000 + static_cast<std::uint64_t>(g); }

/// Rank (t, g)'s exp_avg entries on `side`. The GDP in_proj's model entry is its mixer's factory (the
/// gather design's split pieces, keyed like a non-GTP run's: spec 4.7 invariant 1) over the exp_avg
/// gathered into `gathered`; a plain GTP linear's is the parameter's own entry (gtp_param_entry) holding
/// `storage`'s real rows, then zero pad rows.
Result<StateNode> exp_avg_entries(Implementation& self, const ResumeWeight& w, const GtpSide& side, std::int64_t t,
                                  std::int64_t g, std::uint64_t storage, std::uint64_t gathered) {
  GtpFactoryParams params = side_params(w.c, side, t, g, storage);
  params.key = w.key;
  if (w.pieces) {
    params.gather_storage = gathered;
    params.replica_id = ReplicaId::tuple({0, 0, g});  // gather: the rank in the GTP-inclusive dp_cp group
    IH_TRY_ASSIGN(built, self.gtp_pieces(GtpSaveDesign::gather, params));
    return keyed_by_position(std::move(built));
  }
  IH_TRY_ASSIGN(entry, self.gtp_param_entry(params));
  const std::int64_t r = entry.local_shape.at(0), real = std::clamp<std::int64_t>(w.rows / side.tp - g * r, 0, r);
  IH_TRY_ASSIGN(exp_avg, TensorValue::concat_rows({TensorValue::of_storage(storage, {r, w.c.cols}).row_view(0, real),
                                                   TensorValue::zeros({r - real, w.c.cols})}));
  entry.data = exp_avg, entry.dtype = exp_avg.dtype;
  return StateNode(StateDict{{std::string("exp_avg"), StateNode(std::move(entry))}});
}

/// The keys of the tensor entries of `trees`, sorted, each once.
std::vector<std::string> tensor_keys(const std::vector<StateNode>& trees) {
  std::vector<std::string> keys;
  for (const StateNode& tree : trees)
    visit_leaves(tree, [&](const std::string&, const Leaf& leaf) {
      if (const auto* st = std::get_if<ShardedTensor>(&leaf)) keys.push_back(st->key);
    });
  std::sort(keys.begin(), keys.end());
  keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
  return keys;
}

/// One world's exp_avg entries, rank by rank ((t, g) in row-major order), and where each storage they
/// hold was saved from: storage -> (TP rank, TP-local row of its row 0).
struct ResumeWorld {
  std::vector<std::pair<std::array<std::int64_t, 2>, StateNode>> ranks;
  std::map<std::uint64_t, TpRow> origins;
  std::vector<StateNode> trees() const {
    std::vector<StateNode> out;
    for (const auto& rank : ranks) out.push_back(rank.second);
    return out;
  }
};

/// Every rank of the save world holding its exp_avg (`saving`), or of the load world asking for it.
Result<ResumeWorld> resume_world(Implementation& self, const ResumeWeight& w, bool saving) {
  const GtpSide& side = saving ? w.c.save : w.c.load;
  ResumeWorld world;
  for (std::int64_t t = 0; t < side.tp; ++t)
    for (std::int64_t g = 0; g < side.gtp; ++g) {
      const std::uint64_t storage = saving ? saved_storage(t, g) : requested_storage(g);
      IH_TRY_ASSIGN(tree, exp_avg_entries(self, w, side, t, g, storage, saving ? gathered_storage(t) : 0));
      if (saving && w.pieces) world.origins[gathered_storage(t)] = TpRow{t, 0};
      if (saving && !w.pieces)
        world.origins[storage] =
            TpRow{t, g * tree.find(std::string("exp_avg"))->leaf_if<ShardedTensor>()->local_shape.at(0)};
      world.ranks.push_back({{t, g}, std::move(tree)});
    }
  return world;
}

/// Records `error` as the step's refusal; an error that is no verdict (unsupported, timeout, harness) stays one.
Status refuse(OptimizerResumeAnswer& answer, const Error& error, const char* step) {
  IH_TRY_ASSIGN(refused, refusal(error, step));
  answer.refused = std::move(refused);
  return Ok{};
}

/// Load rank (t, g)'s exp_avg as `request` asks for it: its pieces merged back, or the parameter entry's.
/// nullopt when the load gave back no tensor; a refusal is recorded in `answer` (then nullopt too).
Result<std::optional<TensorValue>> load_exp_avg(Implementation& self, const ResumeWeight& w,
                                                const Checkpoint& checkpoint, std::array<std::int64_t, 2> rank,
                                                const StateNode& request, OptimizerResumeAnswer& answer) {
  auto loaded = self.load_state(checkpoint, request, LoadOrder::serialization_load);
  if (!loaded.ok()) {
    IH_TRY_STATUS(refuse(answer, loaded.error(), "the load"));
    return std::optional<TensorValue>();
  }
  if (w.pieces) {
    GtpFactoryParams params = side_params(w.c, w.c.load, rank[0], rank[1], requested_storage(rank[1]));
    params.key = w.key;
    auto merged = self.gtp_merge(GtpSaveDesign::gather, params, in_build_order(*loaded));
    if (!merged.ok()) {
      IH_TRY_STATUS(refuse(answer, merged.error(), "the load's merge"));
      return std::optional<TensorValue>();
    }
    return std::optional(std::move(*merged));
  }
  const StateNode* node = loaded->find(std::string("exp_avg"));
  const auto* value = node ? node->leaf_if<TensorValue>() : nullptr;
  return value ? std::optional(*value) : std::nullopt;
}

/// What each row of `value` holds: a saved row of `origins`, zeros, or a storage no save wrote.
std::vector<LoadedRow> loaded_rows(const TensorValue& value, const std::map<std::uint64_t, TpRow>& origins) {
  std::vector<LoadedRow> out;
  for (std::int64_t j = 0; j < value.rows(); ++j) {
    const auto row = row_of(value, j);
    const auto origin = row ? origins.find(row->first) : origins.end();
    if (!row)
      out.push_back({});
    else if (origin == origins.end())
      out.push_back({std::nullopt, "storage " + std::to_string(row->first) + " row " + std::to_string(row->second)});
    else
      out.push_back({TpRow{origin->second.tp_rank, origin->second.row + row->second}, ""});
  }
  return out;
}

/// Saves the weight's exp_avg in the save world, then loads it rank by rank in the load world into
/// `answer`, up to the first refusal (spec: every rank of the save world saves, every rank of the load
/// world loads its own entries with serialization.load).
Status resume(Implementation& self, const ResumeWeight& w, OptimizerResumeAnswer& answer) {
  auto saved = resume_world(self, w, true);
  if (!saved.ok()) return refuse(answer, saved.error(), "the save-side entry");
  answer.saved_keys = tensor_keys(saved->trees());
  IH_TRY_ASSIGN(checkpoint, save_checkpoint(saved->trees()));
  auto requests = resume_world(self, w, false);
  if (!requests.ok()) return refuse(answer, requests.error(), "the load-side entry");
  answer.requested_keys = tensor_keys(requests->trees());
  for (const auto& [rank, request] : requests->ranks) {
    IH_TRY_ASSIGN(value, load_exp_avg(self, w, checkpoint, rank, request, answer));
    IH_TRY_ASSIGN(padding, gtp_padding_of(side_params(w.c, w.c.load, rank[0], rank[1], 0)));
    if (!answer.refused && (!value || value->rows() != padding.shard_rows))
      answer.unexplained = "rank (t=" + std::to_string(rank[0]) + ", g=" + std::to_string(rank[1]) + ") loaded no (" +
                           std::to_string(padding.shard_rows) + ", C) exp_avg";
    if (answer.refused || !answer.unexplained.empty()) {
      answer.ranks.clear();
      return Ok{};
    }
    answer.ranks.push_back(
        {rank[0], rank[1], rank[1] * padding.shard_rows, {{"exp_avg", loaded_rows(*value, saved->origins)}}});
  }
  return Ok{};
}

}  // namespace

// The GDP in_proj's exp_avg is its mixer's gather factory, a plain GTP linear's the parameter's entry
// (exp_avg_entries): the answer says which rows each load rank got back; the gate judges them.
Result<OptimizerResumeAnswer> ReferenceImplementation::optimizer_resume(const OptimizerResumeCase& c) {
  OptimizerResumeAnswer answer;
  IH_TRY_STATUS(resume(*this, resume_weight(c), answer));
  answer.key = compact_keys(answer.requested_keys);
  return answer;
}

// The synthetic hybrid model's GDP (gather design) or Mamba in_proj under GTP, retargeted through the
// seam; a load hands back the fresh layer's local value for the parameter, whose shape is that of the
// exp_avg keyed by the parameter's own entry.
Result<FreshRetargetAnswer> ReferenceImplementation::fresh_retarget(const FreshRetargetCase& c) {
  FreshRetargetAnswer answer;
  ModelConfig config;
  config.ssm_mixer = c.mixer, config.gdp_design = GtpSaveDesign::gather, config.pad_alignment = c.pad;
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      RankLayout rank;
      rank.tp = c.tp, rank.tp_rank = t, rank.gtp = c.gtp, rank.gtp_rank = g;
      IH_TRY_ASSIGN(tree, hybrid_sharded_state_dict(config, c.pattern, rank, OptimizerStates{{"exp_avg"}}));
      const std::vector<FlatEntry> before = flatten(tree);
      IH_TRY_ASSIGN(after, retarget(c.pattern, before));
      if (after.size() != before.size())
        return make_error(seam_kind::harness_error, "retarget changed the entry count");
      std::map<std::string, Shape> param_shape;
      for (const FlatEntry& e : before)
        if (const auto* st = std::get_if<ShardedTensor>(&e.entry); st && e.path.starts_with("optimizer.state."))
          param_shape[e.path] = st->local_shape;
      for (std::size_t i = 0; i < before.size(); ++i) {
        if (!std::holds_alternative<ShardedTensorFactory>(before[i].entry) ||
            !before[i].path.ends_with("mixer.in_proj.weight"))
          continue;
        FreshRetargetRank out;
        out.rank = "g=" + std::to_string(g) + " " + before[i].path;
        const auto shape = param_shape.find("optimizer.state." + before[i].path + ".exp_avg");
        if (shape == param_shape.end())
          return make_error(seam_kind::harness_error, out.rank + ": no exp_avg entry beside it");
        out.param_shape = shape->second;
        const auto* lnp = std::get_if<LocalNonpersistent>(&after[i].entry);
        const auto* value = lnp ? std::get_if<TensorValue>(&lnp->payload) : nullptr;
        out.entry_type = value ? kLocalObjectType : "entry that is not a local object holding a tensor";
        if (value) out.loaded_shape = value->shape;
        answer.ranks.push_back(std::move(out));
      }
    }
  return answer;
}

// One tree per GTP rank ({"mixer": {"in_proj.weight": factory}, "local": LNP, "iteration": 7}), the
// in_proj factory being the target's shard split (make_gtp_factory); to_state_dict is the target's
// model of Megatron's order (LoadOrder::to_state_dict_baseline).
Result<LoadOrderingsAnswer> ReferenceImplementation::load_orderings(const AllPaddingCase& c) {
  const auto tree = [&c](std::int64_t g, std::uint64_t storage) -> Result<StateNode> {
    GtpFactoryParams p;
    p.key = kInProjKey;
    p.layout = SplitLayout{std::vector<std::int64_t>(6, c.rows / 6), {"z", "V0", "K0", "Q", "b0", "a"}};
    p.gtp_size = c.gtp, p.gtp_rank = g, p.pad_alignment = c.shard_rows, p.cols = c.cols, p.dtype = "float32";
    p.replica_id = ReplicaId::tuple({0, 0, 0});
    p.shard = TensorValue::of_storage(storage, {c.shard_rows, c.cols}, "float32");
    IH_TRY_ASSIGN(factory, make_gtp_factory(GtpSaveDesign::shard_split, p));
    return StateNode(StateDict{
        {std::string("mixer"), StateNode(StateDict{{std::string("in_proj.weight"), StateNode(std::move(factory))}})},
        {std::string("local"), StateNode(LocalNonpersistent{Payload(ObjectRef{500 + static_cast<std::uint64_t>(g)})})},
        {std::string("iteration"), StateNode(PlainValue{"7"})}});
  };
  if (c.rows % 6 != 0)
    return make_error(ErrorKind::invalid_argument, "load_orderings: rows must split into 6 sections");
  std::vector<StateNode> trees;
  for (std::int64_t g = 0; g < c.gtp; ++g) {
    IH_TRY_ASSIGN(t, tree(g, 0x7000 + static_cast<std::uint64_t>(g)));
    trees.push_back(std::move(t));
  }
  IH_TRY_ASSIGN(checkpoint, save_checkpoint(trees));
  LoadOrderingsAnswer answer;
  for (std::int64_t g = 0; g < c.gtp; ++g) {
    IH_TRY_ASSIGN(request, tree(g, 0x8000 + static_cast<std::uint64_t>(g)));
    OrderingsRank rank;
    for (const auto& [order, step, out] :
         {std::tuple{LoadOrder::serialization_load, "serialization.load", &rank.serialization_load},
          std::tuple{LoadOrder::to_state_dict_baseline, "to_state_dict", &rank.to_state_dict}}) {
      auto loaded = load_state(checkpoint, request, order);
      if (!loaded.ok()) {
        IH_TRY_ASSIGN(refused, refusal(loaded.error(), step));
        out->refused = std::move(refused);
        continue;
      }
      for (const DictItem& item : loaded->dict()) out->keys.push_back(std::get<std::string>(item.key));
      std::sort(out->keys.begin(), out->keys.end());
      const StateNode* mixer = loaded->find(std::string("mixer"));
      const StateNode* in_proj = mixer && mixer->is_dict() ? mixer->find(std::string("in_proj.weight")) : nullptr;
      const auto* value = in_proj ? in_proj->leaf_if<TensorValue>() : nullptr;
      for (std::int64_t j = 0; value && j < value->rows(); ++j) {
        const auto row = row_of(*value, j);
        out->rows.push_back(row ? std::optional(std::array<std::int64_t, 2>{
                                      static_cast<std::int64_t>(row->first - 0x7000), row->second})
                                : std::nullopt);
      }
    }
    answer.ranks.push_back(std::move(rank));
  }
  return answer;
}

// The synthetic model's GPT save (E experts) and the hybrid request retargeted through the seam: which
// stored object each expert object of the request asks for, and whether the save wrote it.
Result<SingleExpertAnswer> ReferenceImplementation::single_expert_load(const SingleExpertCase& c) {
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
  ModelConfig config;
  config.num_experts = c.experts;
  IH_TRY_ASSIGN(gpt, gpt_sharded_state_dict(config, maps.num_gpt_layers, RankLayout{}));
  IH_TRY_ASSIGN(checkpoint, save_checkpoint({gpt}));
  IH_TRY_ASSIGN(hybrid, hybrid_sharded_state_dict(config, c.pattern, RankLayout{}));
  IH_TRY_ASSIGN(after, retarget(c.pattern, flatten(hybrid)));
  SingleExpertAnswer answer;
  for (const FlatEntry& e : after) {
    const auto* o = std::get_if<ShardedObject>(&e.entry);
    if (!o || o->key.find(".mlp.experts.") == std::string::npos) continue;
    answer.objects.push_back({e.path, o->unique_key(), checkpoint.objects.count(o->unique_key()) > 0, std::nullopt});
  }
  if (answer.objects.empty())
    return make_error(seam_kind::harness_error, "the synthetic MoE model has no expert objects");
  return answer;
}

}  // namespace ih
