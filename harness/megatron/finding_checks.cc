#include "harness/megatron/finding_checks.h"

#include <algorithm>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "codec/json_codec.h"
#include "harness/megatron/megatron_implementation.h"
#include "models/checkpoint_model.h"
#include "models/flat_state.h"
#include "models/gpt_layer_maps.h"
#include "models/gtp_layout.h"
#include "models/synthetic_model.h"
#include "seam/error_kinds.h"

namespace ih::megatron {
namespace {

constexpr const char* kGroup = "spec invariants";
constexpr const char* kInProjKey = "decoder.layers.0.mixer.in_proj.weight";
constexpr std::int64_t kCols = 2;

struct InProj {
  std::vector<std::int64_t> sections;  // at TP 1
  std::vector<std::string> names;
  std::int64_t rows() const {
    std::int64_t d = 0;
    for (std::int64_t s : sections) d += s;
    return d;
  }
};

const std::vector<std::string> kGdpNames = {"z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"};
/// The findings' GDP in_proj: D = 120 rows at TP 1 (d_inner 20, group state 6, heads 4, M = 3).
InProj gdp_review() { return {{20, 20, 20, 20, 6, 6, 6, 6, 4, 4, 4, 4}, kGdpNames}; }
/// D = 24 at TP 1: fewer rows than p * G (all-padding ranks at GTP 4, p 16).
InProj gdp_small() { return {std::vector<std::int64_t>(12, 2), kGdpNames}; }

struct Side {
  std::int64_t tp = 1, gtp = 1, pad = 0;
};
struct Resume {
  Side save, load;
  InProj in_proj;
};

std::string show(const Side& s) {
  return "{tp " + std::to_string(s.tp) + ", gtp " + std::to_string(s.gtp) + ", p " + std::to_string(s.pad) + "}";
}
std::string show(const Resume& r) {
  return "save " + show(r.save) + " -> load " + show(r.load) + " (D = " + std::to_string(r.in_proj.rows()) + ")";
}

MegatronImplementation* megatron_of(Implementation& target) { return dynamic_cast<MegatronImplementation*>(&target); }

/// An error that carries no verdict about the target (unsupported, timeout, harness) stays an error;
/// any other becomes the check's failure text.
Result<std::string> verdict_or_error(const Error& error, const std::string& what) {
  if (outcome_of_error(error.kind) != Outcome::failed) return error;
  return what + ": " + std::string(to_string(error.kind)) + ": " + error.message;
}

/// Joins the failing cases' texts ("" when all hold).
std::string joined(const std::vector<std::string>& failures) {
  std::string out;
  for (const std::string& f : failures) out += (out.empty() ? "" : "\n      ") + f;
  return out;
}

// --- R1, R2: optimizer state across a GTP change -------------------------------------------------

/// (TP rank, TP-local row) at T1 of TP-local row x of TP rank t2 at T2: the sections split by TP.
std::optional<std::pair<std::int64_t, std::int64_t>> source_row(const std::vector<std::int64_t>& sections,
                                                                std::int64_t t1_size, std::int64_t t2_size,
                                                                std::int64_t t2, std::int64_t x) {
  std::int64_t start1 = 0, start2 = 0;
  for (std::int64_t s : sections) {
    const std::int64_t s1 = s / t1_size, s2 = s / t2_size;
    if (x < start2 + s2) {
      const std::int64_t row = t2 * s2 + (x - start2);
      return std::make_pair(row / s1, start1 + row % s1);
    }
    start1 += s1, start2 += s2;
  }
  return std::nullopt;
}

/// Megatron: the adapter's gtp_roundtrip, a real save of the GDP mixer (gather design) and the
/// in_proj's exp_avg (make_sharded_optimizer_tensor over the parameter's own entry) in a T1 x G1
/// world, then a real load in a T2 x G2 world; every element checked by provenance there.
Result<std::string> resume_megatron(MegatronImplementation& megatron, const Resume& c) {
  const auto side = [](const Side& s) {
    return json::Json{{"tp", s.tp}, {"gtp", s.gtp}, {"pad_for_alignment", s.pad}};
  };
  IH_TRY_ASSIGN(r, megatron.adapter_op("gtp_roundtrip", {{"sections", c.in_proj.sections},
                                                         {"names", c.in_proj.names},
                                                         {"cols", kCols},
                                                         {"optimizer", true},
                                                         {"save", side(c.save)},
                                                         {"load", side(c.load)}}));
  if (r.value("ok", false)) return std::string();
  std::string out = show(c) + ": ";
  if (r.contains("load_error") && r["load_error"].is_string()) {
    out += "the load was refused: " + r["load_error"].get<std::string>();
    if (r.contains("megatron_frame") && r["megatron_frame"].is_string())
      out += " (at " + r["megatron_frame"].get<std::string>() + ")";
    return out;
  }
  std::vector<std::string> failures;
  for (const char* what : {"weight", "exp_avg"}) {
    const std::int64_t n = r.value(std::string(what) + "_mismatches", std::int64_t{0});
    if (n == 0) continue;
    json::Json first = r.value("first_" + std::string(what) + "_mismatches", json::Json::array());
    while (first.size() > 2) first.erase(first.size() - 1);
    failures.push_back(out + std::to_string(n) + " loaded " + what +
                       " rows are not the saved ones (first: " + json::dump(first) + ")");
  }
  const json::Json pad = r.value("model_pad_rows_in_checkpoint", json::Json::array());
  if (!pad.empty()) failures.push_back(out + "pad rows in the checkpoint: " + json::dump(pad));
  if (failures.empty()) failures.push_back(out + "the round trip did not hold: " + json::dump(r));
  return joined(failures);
}

std::uint64_t saved_storage(std::int64_t t, std::int64_t g) {
  return 0x5000 + static_cast<std::uint64_t>(t * 4096 + g);
}

GtpFactoryParams side_params(const InProj& p, const Side& s, std::int64_t t, std::int64_t g, std::uint64_t storage) {
  GtpFactoryParams params;
  params.key = kInProjKey;
  for (std::int64_t section : p.sections) params.layout.sections.push_back(section / s.tp);
  params.layout.names = p.names;
  params.tp_size = s.tp, params.tp_rank = t, params.gtp_size = s.gtp, params.gtp_rank = g;
  params.pad_alignment = s.pad, params.cols = kCols, params.dtype = "float32";
  params.replica_id = ReplicaId::tuple({0, 0, 0});  // DP = 1: every shard's only replica writes it
  const auto padding = gtp_padding_of(params);
  params.shard = TensorValue::of_storage(storage, {padding.ok() ? padding->shard_rows : 0, kCols}, "float32");
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

/// Any other target: the same case through the seam. The in_proj's exp_avg is keyed by the GTP
/// parameter's own entry (gtp_param_entry, "optimizer.state.exp_avg." prepended, as
/// make_sharded_optimizer_tensor does), real rows carrying their provenance and pad rows zero; every
/// rank of T1 x G1 saves, every rank of T2 x G2 loads its own entry (load_state, serialization.load).
Result<std::string> resume_through_seam(Implementation& target, const Resume& c) {
  const std::int64_t d1 = c.in_proj.rows() / c.save.tp, d2 = c.in_proj.rows() / c.load.tp;
  std::vector<StateNode> trees;
  std::map<std::int64_t, std::int64_t> saved_rows;  // t -> R at the save
  for (std::int64_t t = 0; t < c.save.tp; ++t)
    for (std::int64_t g = 0; g < c.save.gtp; ++g) {
      auto entry = target.gtp_param_entry(side_params(c.in_proj, c.save, t, g, saved_storage(t, g)));
      if (!entry.ok()) return verdict_or_error(entry.error(), show(c) + ": the save-side parameter entry");
      const std::int64_t r = entry->local_shape.at(0), real = std::clamp<std::int64_t>(d1 - g * r, 0, r);
      saved_rows[t] = r;
      IH_TRY_ASSIGN(
          exp_avg, TensorValue::concat_rows({TensorValue::of_storage(saved_storage(t, g), {r, kCols}).row_view(0, real),
                                             TensorValue::zeros({r - real, kCols})}));
      ShardedTensor state = *entry;
      state.key = "optimizer.state.exp_avg." + entry->key;
      state.data = exp_avg, state.dtype = exp_avg.dtype;
      trees.push_back(StateNode(StateDict{{std::string("exp_avg"), StateNode(std::move(state))}}));
    }
  IH_TRY_ASSIGN(checkpoint, save_checkpoint(trees));
  std::int64_t wrong = 0;
  std::string first;
  for (std::int64_t t = 0; t < c.load.tp; ++t)
    for (std::int64_t g = 0; g < c.load.gtp; ++g) {
      auto entry = target.gtp_param_entry(side_params(c.in_proj, c.load, t, g, 0x9000 + static_cast<std::uint64_t>(g)));
      if (!entry.ok()) return verdict_or_error(entry.error(), show(c) + ": the load-side parameter entry");
      ShardedTensor request = *entry;
      request.key = "optimizer.state.exp_avg." + entry->key;
      const StateNode tree(StateDict{{std::string("exp_avg"), StateNode(request)}});
      auto loaded = target.load_state(checkpoint, tree, LoadOrder::serialization_load);
      if (!loaded.ok()) return verdict_or_error(loaded.error(), show(c) + ": the load was refused");
      const StateNode* node = loaded->find(std::string("exp_avg"));
      const auto* value = node ? node->leaf_if<TensorValue>() : nullptr;
      const std::int64_t r = entry->local_shape.at(0);
      if (!value || value->rows() != r)
        return show(c) + ": rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ") loaded no (" +
               std::to_string(r) + ", C) exp_avg";
      for (std::int64_t j = 0; j < r; ++j) {
        const std::int64_t x = g * r + j;
        std::optional<std::pair<std::uint64_t, std::int64_t>> want;
        if (x < d2)
          if (const auto src = source_row(c.in_proj.sections, c.save.tp, c.load.tp, t, x))
            want = std::make_pair(saved_storage(src->first, src->second / saved_rows[src->first]),
                                  src->second % saved_rows[src->first]);
        if (row_of(*value, j) == want) continue;
        if (wrong++ == 0) {
          const auto got = row_of(*value, j);
          first = "rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ") row " + std::to_string(j) +
                  " (TP-local row " + std::to_string(x) + ") holds " +
                  (got ? "saved storage " + std::to_string(got->first) + " row " + std::to_string(got->second)
                       : std::string("zero")) +
                  ", expected " +
                  (want ? "saved storage " + std::to_string(want->first) + " row " + std::to_string(want->second)
                        : std::string("zero"));
        }
      }
    }
  if (wrong == 0) return std::string();
  return show(c) + ": " + std::to_string(wrong) + " loaded exp_avg rows are not the saved ones (first: " + first + ")";
}

Result<std::string> resume_check(Implementation& target, const std::vector<Resume>& cases) {
  std::vector<std::string> failures;
  for (const Resume& c : cases) {
    MegatronImplementation* megatron = megatron_of(target);
    IH_TRY_ASSIGN(verdict, megatron ? resume_megatron(*megatron, c) : resume_through_seam(target, c));
    if (!verdict.empty()) failures.push_back(verdict);
  }
  return joined(failures);
}

// --- B: a fresh in_proj under GTP in GPT->Hybrid retargeting ------------------------------------

struct FreshCase {
  std::string mixer;
  InProj in_proj;  // TP-local (TP 1)
};

std::vector<FreshCase> fresh_cases() {
  return {{"gdp", {{10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2}, kGdpNames}},
          {"mamba", {{4, 4, 2, 2, 1}, {"z", "x", "B", "C", "dt"}}}};
}

/// Megatron: the mixer's own sharded_state_dict under GTP 2, retargeted with its layer fresh, then
/// what load_preprocess and the nonpersistent merge hand back copied into the parameter.
Result<std::string> fresh_megatron(MegatronImplementation& megatron) {
  std::vector<std::string> failures;
  for (const FreshCase& c : fresh_cases()) {
    IH_TRY_ASSIGN(r, megatron.adapter_op("gtp_fresh_retarget", {{"sections", c.in_proj.sections},
                                                                {"names", c.in_proj.names},
                                                                {"cols", kCols},
                                                                {"tp", 1},
                                                                {"gtp", 2},
                                                                {"pad_for_alignment", 16},
                                                                {"pattern", "M*-"}}));
    for (const json::Json& rank : r.value("ranks", json::Json::array())) {
      const std::string where = c.mixer +
                                " 'M*-' tp 1 gtp 2 p 16 rank (t=" + json::dump(rank.value("tp", json::Json())) +
                                ", g=" + json::dump(rank.value("gtp", json::Json())) + "): ";
      if (rank.value("entry_type", std::string()) != "LocalNonpersistentObject") {
        failures.push_back(where + "the fresh layer's in_proj became a " + rank.value("entry_type", std::string("?")) +
                           ", not a local object");
        continue;
      }
      const std::string copied = rank.value("copy_into_param", std::string("?"));
      if (copied != "ok")
        failures.push_back(where + "a load hands the fresh in_proj back as " +
                           json::dump(rank.value("loaded_shape", json::Json())) + " for the parameter of shape " +
                           json::dump(rank.value("param_shape", json::Json())) + ": " + copied);
    }
  }
  return joined(failures);
}

/// Any other target: the synthetic hybrid model's GDP (gather design) / Mamba in_proj under GTP 2,
/// retargeted through the seam; the fresh layer's local value must have the parameter's (R, C)
/// shape (the shape of the exp_avg keyed by the parameter's own entry).
Result<std::string> fresh_through_seam(Implementation& target) {
  std::vector<std::string> failures;
  for (const std::string mixer : {"gdp", "mamba"}) {
    ModelConfig config;
    config.ssm_mixer = mixer, config.gdp_design = GtpSaveDesign::gather, config.pad_alignment = 16;
    for (std::int64_t g = 0; g < 2; ++g) {
      RankLayout rank;
      rank.gtp = 2, rank.gtp_rank = g;
      IH_TRY_ASSIGN(tree, hybrid_sharded_state_dict(config, "M*-", rank, OptimizerStates{{"exp_avg"}}));
      const std::vector<FlatEntry> before = flatten(tree);
      IH_TRY_ASSIGN(after, target.retarget("M*-", before));
      if (after.size() != before.size())
        return make_error(seam_kind::harness_error, "retarget changed the entry count");
      std::map<std::string, Shape> param_shape;
      for (const FlatEntry& e : before)
        if (const auto* t = std::get_if<ShardedTensor>(&e.entry); t && e.path.starts_with("optimizer.state."))
          param_shape[e.path] = t->local_shape;
      for (std::size_t i = 0; i < before.size(); ++i) {
        if (!std::holds_alternative<ShardedTensorFactory>(before[i].entry) ||
            !before[i].path.ends_with("mixer.in_proj.weight"))
          continue;
        const std::string where =
            mixer + " 'M*-' tp 1 gtp 2 p 16 rank g=" + std::to_string(g) + " " + before[i].path + ": ";
        const auto shape = param_shape.find("optimizer.state." + before[i].path + ".exp_avg");
        if (shape == param_shape.end())
          return make_error(seam_kind::harness_error, where + "no exp_avg entry beside it");
        const auto* lnp = std::get_if<LocalNonpersistent>(&after[i].entry);
        const auto* value = lnp ? std::get_if<TensorValue>(&lnp->payload) : nullptr;
        if (!value)
          failures.push_back(where + "the fresh layer's in_proj did not become a local object holding a tensor");
        else if (value->shape != shape->second)
          failures.push_back(where + "a load hands the fresh in_proj back as " + json::dump(json::Json(value->shape)) +
                             " for the parameter of shape " + json::dump(json::Json(shape->second)));
      }
    }
  }
  return joined(failures);
}

// --- C: the two load orderings with all-padding GTP ranks ---------------------------------------

/// Megatron: serialization.load and MCoreTensorAwareStateDict.to_state_dict of one tree per rank
/// ({"mixer": {"in_proj.weight": factory}, "local": LNP, "iteration": 7}) whose factory builds what
/// spec 4.7's shard split builds: a real piece, or one LocalNonpersistentObject on an all-padding
/// rank. D = 6, GTP 4, R = 16: ranks 1-3 hold only padding.
Result<std::string> orders_megatron(MegatronImplementation& megatron) {
  IH_TRY_ASSIGN(
      r, megatron.adapter_op("load_orderings", {{"rows", 6}, {"gtp_size", 4}, {"shard_rows", 16}, {"cols", kCols}}));
  std::vector<std::string> failures;
  std::int64_t g = 0;
  for (const json::Json& rank : r.value("ranks", json::Json::array())) {
    const std::string where = "D 6 gtp 4 R 16 rank g=" + std::to_string(g++) + ": ";
    const json::Json a = rank.value("serialization_load", json::Json::object()),
                     b = rank.value("to_state_dict", json::Json::object());
    for (const json::Json* x : {&a, &b})
      if (!x->value("ok", false) && x->value("error", std::string()).find("nvidia_resiliency_ext") != std::string::npos)
        return unsupported(megatron.name(), "MCoreTensorAwareStateDict.to_state_dict without nvidia_resiliency_ext (" +
                                                x->value("error", std::string()) + ")");
    const auto failed = [](const char* order, const json::Json& x) {
      return std::string(order) + " failed: " + x.value("error", std::string("?")) +
             (x.contains("frame") && x["frame"].is_string() ? " (at " + x["frame"].get<std::string>() + ")" : "");
    };
    if (!a.value("ok", false)) failures.push_back(where + failed("serialization.load", a));
    if (!b.value("ok", false)) failures.push_back(where + failed("to_state_dict", b));
    if (a.value("ok", false) && b.value("ok", false) && (a["rows"] != b["rows"] || a["keys"] != b["keys"]))
      failures.push_back(where + "the orderings disagree: serialization.load " + json::dump(a) + ", to_state_dict " +
                         json::dump(b));
  }
  return joined(failures);
}

/// Any other target: the same trees through the seam, the in_proj factory being the target's
/// shard split (make_gtp_factory); to_state_dict is the target's model of Megatron's order
/// (LoadOrder::to_state_dict_baseline).
Result<std::string> orders_through_seam(Implementation& target) {
  const auto tree = [](std::int64_t g, std::uint64_t storage) -> Result<StateNode> {
    GtpFactoryParams p;
    p.key = kInProjKey;
    p.layout = SplitLayout{{1, 1, 1, 1, 1, 1}, {"z", "V0", "K0", "Q", "b0", "a"}};
    p.gtp_size = 4, p.gtp_rank = g, p.pad_alignment = 16, p.cols = kCols, p.dtype = "float32";
    p.replica_id = ReplicaId::tuple({0, 0, 0});
    p.shard = TensorValue::of_storage(storage, {16, kCols}, "float32");
    IH_TRY_ASSIGN(factory, make_gtp_factory(GtpSaveDesign::shard_split, p));
    return StateNode(StateDict{
        {std::string("mixer"), StateNode(StateDict{{std::string("in_proj.weight"), StateNode(std::move(factory))}})},
        {std::string("local"), StateNode(LocalNonpersistent{Payload(ObjectRef{500 + static_cast<std::uint64_t>(g)})})},
        {std::string("iteration"), StateNode(PlainValue{"7"})}});
  };
  std::vector<StateNode> trees;
  for (std::int64_t g = 0; g < 4; ++g) {
    IH_TRY_ASSIGN(t, tree(g, 0x7000 + static_cast<std::uint64_t>(g)));
    trees.push_back(std::move(t));
  }
  IH_TRY_ASSIGN(checkpoint, save_checkpoint(trees));
  std::vector<std::string> failures;
  for (std::int64_t g = 0; g < 4; ++g) {
    const std::string where = "D 6 gtp 4 R 16 rank g=" + std::to_string(g) + ": ";
    IH_TRY_ASSIGN(request, tree(g, 0x8000 + static_cast<std::uint64_t>(g)));
    auto a = target.load_state(checkpoint, request, LoadOrder::serialization_load);
    auto b = target.load_state(checkpoint, request, LoadOrder::to_state_dict_baseline);
    for (const auto* x : {&a, &b})
      if (!x->ok() && outcome_of_error(x->error().kind) != Outcome::failed) return x->error();
    if (!a.ok())
      failures.push_back(where + "serialization.load failed: " + std::string(to_string(a.error().kind)) + ": " +
                         a.error().message);
    if (!b.ok())
      failures.push_back(where + "to_state_dict failed: " + std::string(to_string(b.error().kind)) + ": " +
                         b.error().message);
    if (a.ok() && b.ok() && !(*a == *b)) failures.push_back(where + "the orderings give different trees");
  }
  return joined(failures);
}

// --- A: one expert -------------------------------------------------------------------------------

/// Megatron: a real GPT save of the expert _extra_state objects (layer and expert axes), the hybrid
/// request retargeted by Megatron, a real load (one rank); E = 1 and E = 2. Every hybrid MoE layer
/// must load its GPT layer's object.
Result<std::string> experts_megatron(MegatronImplementation& megatron) {
  const std::string pattern = "*E*E";
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(pattern)));
  std::vector<std::string> failures;
  for (std::int64_t experts : {1, 2}) {
    IH_TRY_ASSIGN(r, megatron.adapter_op("single_expert_load", {{"experts", experts}, {"pattern", pattern}}));
    const std::string where = "'" + pattern + "' E = " + std::to_string(experts) + ": ";
    if (r.contains("save_error")) {
      failures.push_back(where + "the GPT save failed: " + json::dump(r["save_error"]));
      continue;
    }
    if (r.contains("load_error")) {
      failures.push_back(where + "the GPT->Hybrid load failed: " + r.value("load_error", std::string()) +
                         " (requested " + json::dump(r.value("requested", json::Json::object())) + "; saved " +
                         json::dump(r.value("saved", json::Json::array())) + ")");
      continue;
    }
    const json::Json loaded = r.value("load", json::Json::object());
    for (const auto& [hybrid, gpt] : maps.mlp_to_gpt)
      for (std::int64_t e = 0; e < experts; ++e) {
        const std::string key =
            "decoder.layers." + std::to_string(hybrid) + ".mlp.experts.linear_fc1._extra_state#" + std::to_string(e);
        const json::Json want{{"layer", gpt}, {"expert", e}};
        if (!loaded.contains(key) || loaded[key] != want)
          failures.push_back(where + key + " loaded " + (loaded.contains(key) ? json::dump(loaded[key]) : "nothing") +
                             ", expected GPT layer " + std::to_string(gpt) + "'s object " + json::dump(want));
      }
  }
  return joined(failures);
}

/// Any other target: the synthetic model's GPT save (E experts) and the hybrid request retargeted
/// through the seam; every expert object the hybrid asks for must be stored.
Result<std::string> experts_through_seam(Implementation& target) {
  const std::string pattern = "*E*E";
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(pattern)));
  std::vector<std::string> failures;
  for (std::int64_t experts : {1, 2}) {
    ModelConfig config;
    config.num_experts = experts;
    IH_TRY_ASSIGN(gpt, gpt_sharded_state_dict(config, maps.num_gpt_layers, RankLayout{}));
    IH_TRY_ASSIGN(checkpoint, save_checkpoint({gpt}));
    IH_TRY_ASSIGN(hybrid, hybrid_sharded_state_dict(config, pattern, RankLayout{}));
    IH_TRY_ASSIGN(after, target.retarget(pattern, flatten(hybrid)));
    std::int64_t asked = 0;
    for (const FlatEntry& e : after) {
      const auto* o = std::get_if<ShardedObject>(&e.entry);
      if (!o || o->key.find(".mlp.experts.") == std::string::npos) continue;
      ++asked;
      if (!checkpoint.objects.count(o->unique_key()))
        failures.push_back("'" + pattern + "' E = " + std::to_string(experts) + ": " + e.path + " asks for " +
                           o->unique_key() + ", which the GPT save did not write");
    }
    if (asked == 0) return make_error(seam_kind::harness_error, "the synthetic MoE model has no expert objects");
  }
  return joined(failures);
}

}  // namespace

std::vector<gate::Check> finding_checks() {
  const InProj gdp = gdp_review();
  return {
      gate::Check::simple(kGroup, "optimizer_resume_gtp_to_no_gtp",
                          [gdp](Implementation& target) {
                            return resume_check(target, {{{1, 2, 16}, {1, 1, 16}, gdp}, {{2, 2, 16}, {1, 1, 16}, gdp}});
                          }),
      gate::Check::simple(kGroup, "optimizer_resume_tp2_gtp_change",
                          [gdp](Implementation& target) {
                            return resume_check(target, {{{2, 2, 32}, {2, 4, 32}, gdp}});
                          }),
      gate::Check::simple(kGroup, "optimizer_resume_tp1_gtp_change",
                          [gdp](Implementation& target) {
                            return resume_check(target, {{{1, 1, 16}, {1, 2, 16}, gdp},
                                                         {{1, 2, 16}, {1, 4, 16}, gdp},
                                                         {{1, 4, 32}, {1, 2, 16}, gdp},
                                                         {{1, 2, 16}, {1, 4, 16}, gdp_small()}});
                          }),
      gate::Check::simple(kGroup, "fresh_in_proj_fits_parameter",
                          [](Implementation& target) {
                            MegatronImplementation* megatron = megatron_of(target);
                            return megatron ? fresh_megatron(*megatron) : fresh_through_seam(target);
                          }),
      gate::Check::simple(kGroup, "load_orders_agree_all_padding",
                          [](Implementation& target) {
                            MegatronImplementation* megatron = megatron_of(target);
                            return megatron ? orders_megatron(*megatron) : orders_through_seam(target);
                          }),
      gate::Check::simple(kGroup, "single_expert_objects_load",
                          [](Implementation& target) {
                            MegatronImplementation* megatron = megatron_of(target);
                            return megatron ? experts_megatron(*megatron) : experts_through_seam(target);
                          }),
  };
}

}  // namespace ih::megatron
