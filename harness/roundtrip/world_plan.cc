#include "harness/roundtrip/world_plan.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>

#include "codec/json_codec.h"
#include "models/checked_math.h"
#include "models/flat_state.h"
#include "models/gdp_layout.h"
#include "models/gpt_layer_maps.h"
#include "models/gtp_layout.h"
#include "models/retarget.h"
#include "properties/world_draw.h"

namespace ih {
namespace {

using json::Json;

Status write_json(const std::filesystem::path& path, const Json& value) {
  std::ofstream out(path, std::ios::binary);
  out << json::dump(value) << "\n";
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

std::int64_t numel(const Shape& shape) {
  std::int64_t n = 1;
  for (std::int64_t d : shape) {
    auto m = checked_mul(n, d, "tensor size");
    n = m.ok() ? *m : INT64_MAX;
  }
  return n;
}

/// A run of local rows [begin, begin + rows) of a local tensor whose element (r, c...) holds key
/// `key`'s element (offset[:p], offset[p] + r - begin, offset[p+1] + c, ...).
struct Segment {
  std::int64_t begin = 0, rows = 0;
  std::string key;
  Shape global_shape, global_offset;
  std::int64_t prepend = 0;
  bool operator==(const Segment&) const = default;
};

Json segment_json(const Segment& s, std::int64_t key_id) {
  return Json::array({s.begin, s.rows, key_id, s.global_shape, s.global_offset, s.prepend});
}

/// The catalogue's "oracle": how the scenario's values encode their keys (oracle_encoding.h).
Json oracle_json(const OracleEncoding& e) {
  return Json{{"key_shift", e.key_shift}, {"dtype", std::string(to_string(e.dtype))}};
}

Segment whole_tensor(const ShardedTensor& t) {
  return {0, t.local_shape.empty() ? 1 : t.local_shape[0], t.key, t.global_shape, t.global_offset, t.prepend_axis_num};
}

/// Segments of a factory's local data: each built tensor's rows are views of the factory's data
/// (reference build), so row block b of built tensor x maps data rows [b.first_row, +b.rows) to
/// x's global rows from x.global_offset[p] + (rows of x before b). Zero blocks (padding) map
/// nothing: those rows are expected to be zero.
///
/// A factory without data is a real model's, decoded from Megatron's `model dump` (its built tensors
/// only): its local data is taken as its built tensors' rows one after the other, which is how
/// Megatron's SwiGLU and split factories chunk their weight. The workers check that on the real
/// factory before they fill or verify it (a different layout is a harness error, never a finding).
Result<std::vector<Segment>> factory_segments(const ShardedTensorFactory& f) {
  IH_TRY_ASSIGN(built, f.build());
  std::vector<Segment> out;
  std::int64_t next_row = 0;
  for (const FlatEntry& e : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t) continue;
    if (!f.data) {
      const std::int64_t rows = t->local_shape.empty() ? 1 : t->local_shape[0];
      out.push_back({next_row, rows, t->key, t->global_shape, t->global_offset, t->prepend_axis_num});
      next_row += rows;
      continue;
    }
    if (!t->data) return make_error(seam_kind::harness_error, "factory '" + f.key + "' built a tensor without data");
    std::int64_t pos = 0;
    for (const RowBlock& b : t->data->blocks) {
      if (!b.is_zero()) {
        Segment s{b.first_row, b.rows, t->key, t->global_shape, t->global_offset, t->prepend_axis_num};
        s.global_offset[static_cast<std::size_t>(t->prepend_axis_num)] += pos;
        out.push_back(std::move(s));
      }
      pos += b.rows;
    }
  }
  return out;
}

/// Whether the factory's chunks are this rank's to write: its replica id, or for a real model's factory
/// (decoded without one) its built tensors' (all main, e.g. a split factory replicated over GTP on
/// GTP rank 0 only).
Result<bool> factory_is_main(const ShardedTensorFactory& f) {
  if (f.data) return f.replica_id.is_main();
  IH_TRY_ASSIGN(built, f.build());
  for (const FlatEntry& e : flatten(built))
    if (const auto* t = std::get_if<ShardedTensor>(&e.entry); t && !t->is_main_replica()) return false;
  return true;
}

/// The factory's local data shape; for a real model's factory (no data), its built tensors stacked on rows.
Result<Shape> factory_local_shape(const ShardedTensorFactory& f) {
  if (f.data) return f.data->shape;
  IH_TRY_ASSIGN(built, f.build());
  Shape shape;
  for (const FlatEntry& e : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t) continue;
    if (shape.empty()) {
      shape = t->local_shape;
    } else if (t->local_shape.size() != shape.size() ||
               !std::equal(shape.begin() + 1, shape.end(), t->local_shape.begin() + 1)) {
      return make_error(seam_kind::harness_error, "factory '" + f.key + "': built tensors of different row shapes");
    } else {
      shape[0] += t->local_shape[0];
    }
  }
  return shape;
}

std::string offset_text(const Shape& offset) {
  std::string s;
  for (std::size_t i = 0; i < offset.size(); ++i) s += (i ? "," : "") + std::to_string(offset[i]);
  return s;
}

/// Dense entries of ranks with ep_rank > 0 are replicas of ep_rank 0's: their DP coordinate.
void set_dense_replicas(std::vector<FlatEntry>& entries, const WorldLayout& w, const RankLayout& l) {
  if (w.ep == 1) return;
  const std::int64_t dp_coord = l.dp_rank * w.ep + l.ep_rank;
  const auto fix = [&](ReplicaId& id, const std::string& key) {
    if (key.find(".experts.") != std::string::npos || !id.is_tuple || id.coords.empty()) return;
    id.coords.back() = dp_coord;
  };
  for (FlatEntry& e : entries) {
    if (auto* t = std::get_if<ShardedTensor>(&e.entry)) fix(t->replica_id, t->key);
    if (auto* o = std::get_if<ShardedObject>(&e.entry)) fix(o->replica_id, o->key);
    if (auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) fix(f->replica_id, f->key);
  }
}

/// Small dimensions (hidden 64, 8 heads and query groups, 4 experts' FFN 64) that divide by TP up to
/// 8, so a round trip takes seconds.
ModelConfig small_world_config() {
  ModelConfig c;
  c.hidden = 64;
  c.num_attention_heads = 8;
  c.num_query_groups = 8;
  c.kv_channels = 8;
  c.ffn_hidden = 128;
  c.moe_ffn_hidden = 64;
  c.add_bias = true;
  c.vocab = 256;
  c.mamba_heads = 8;
  c.mamba_head_dim = 8;
  c.mamba_groups = 8;
  c.mamba_state = 8;
  return c;
}

Error cannot_lay_out(const std::string& name, std::int64_t a, std::int64_t b, const std::string& why) {
  return Error{seam_kind::unsupported, "scenario '" + name + "' cannot be laid out on " + std::to_string(a) +
                                           " save / " + std::to_string(b) + " load ranks: " + why};
}

bool power_of_two_upto8(std::int64_t n) { return n == 1 || n == 2 || n == 4 || n == 8; }

/// The GDP in_proj's GTP world of n ranks at pad alignment p: 1 or 2 ranks are all GTP; 4 ranks are
/// TP 2 x GTP 2, or GTP 4 when `all_gtp` (the repadding scenarios: three all-padding ranks).
Result<GtpWorld> gdp_gtp_world(const std::string& name, std::int64_t a, std::int64_t b, std::int64_t n, std::int64_t p,
                               bool all_gtp, GtpSaveDesign design) {
  if (n == 1) return GtpWorld{1, 1, p, design};
  if (n == 2) return GtpWorld{1, 2, p, design};
  if (n == 4) return all_gtp ? GtpWorld{1, 4, p, design} : GtpWorld{2, 2, p, design};
  return cannot_lay_out(name, a, b, "GTP worlds of 1, 2 or 4 ranks (TP <= 2 for 2 heads)");
}

constexpr std::pair<ScenarioKind, std::string_view> kScenarioKindNames[] = {
    {ScenarioKind::gpt_hybrid, "gpt_hybrid"},
    {ScenarioKind::gdp_gtp, "gdp_gtp"},
    {ScenarioKind::real_gpt_hybrid, "real_gpt_hybrid"},
    {ScenarioKind::real_hybrid_hybrid, "real_hybrid_hybrid"}};

constexpr std::pair<LoadPath, std::string_view> kLoadPathNames[] = {
    {LoadPath::dist_checkpointing, "dist_checkpointing"}, {LoadPath::training, "training"}};

}  // namespace

std::string_view to_string(LoadPath path) {
  for (const auto& [p, name] : kLoadPathNames)
    if (p == path) return name;
  return "?";
}

std::string_view to_string(ScenarioKind kind) {
  for (const auto& [k, name] : kScenarioKindNames)
    if (k == kind) return name;
  return "?";
}

Result<std::string_view> plan_word(LoadOrder order) {
  switch (order) {
    case LoadOrder::serialization_load: return std::string_view("serialization_load");
    case LoadOrder::to_state_dict_baseline: return std::string_view("to_state_dict");
    case LoadOrder::to_state_dict_fixed: break;
  }
  return make_error(ErrorKind::invalid_argument, "load order " + to_string(order) +
                                                     " is a reference-model ordering; a Megatron load world runs "
                                                     "serialization_load or Megatron's own to_state_dict");
}

bool WorldScenario::distributed_optimizer() const {
  return is_real() && real_save.optimizer && real_save.optimizer_kind == OptimizerKind::distributed;
}

std::string scenario_dir(const std::string& name) { return "s_" + name; }

Result<json::Json> world_plan_json(const std::vector<const WorldScenario*>& scenarios, std::string_view device) {
  Json list = Json::array();
  for (const WorldScenario* s : scenarios) {
    IH_TRY_ASSIGN(load_order, plan_word(s->load_order));
    list.push_back(Json{{"name", s->name},
                        {"kind", to_string(s->kind)},
                        {"dir", scenario_dir(s->name)},
                        {"pattern", s->pattern},
                        {"load_order", load_order},
                        {"load_path", to_string(s->load_path)},
                        {"save", s->layout_text(true)},
                        {"load", s->layout_text(false)}});
  }
  return Json{{"device", device}, {"scenarios", list}};
}

std::string WorldLayout::text() const {
  std::string s = "TP=" + std::to_string(tp) + " PP=" + std::to_string(pp);
  if (gtp > 1) s += " GTP=" + std::to_string(gtp);
  if (ep > 1) s += " EP=" + std::to_string(ep);
  if (dp > 1) s += " DP=" + std::to_string(dp);
  return s + " (" + std::to_string(ranks()) + (ranks() == 1 ? " rank)" : " ranks)");
}

std::string WorldScenario::layout_text(bool save_side) const {
  if (kind != ScenarioKind::gdp_gtp) return (save_side ? save : load).text();
  const GtpWorld& w = save_side ? gtp_save : gtp_load;
  const std::int64_t n = w.tp * w.gtp;
  return "TP=" + std::to_string(w.tp) + " GTP=" + std::to_string(w.gtp) + " p=" + std::to_string(w.pad_alignment) +
         (w.design == GtpSaveDesign::shard_split ? " shard-split" : "") + " (" + std::to_string(n) +
         (n == 1 ? " rank)" : " ranks)");
}

RankLayout WorldLayout::rank_layout(std::int64_t r) const {
  RankLayout l;
  l.tp = tp, l.tp_rank = r % tp;
  l.ep = ep, l.ep_rank = (r / tp) % ep;
  l.pp = pp, l.pp_rank = (r / (tp * ep)) % pp;
  l.dp_rank = r / (tp * ep * pp);
  l.etp = tp, l.etp_rank = l.tp_rank;  // Megatron's default: expert TP = TP
  return l;
}

std::vector<std::string> world_scenario_names() {
  return {"gpt_hybrid_tp", "gpt_hybrid_tp_pp", "gpt_hybrid_pp_tp", "gpt_hybrid_moe_ep", "dp_replicas"};
}

std::vector<std::string> gtp_world_scenario_names() {
  return {"gdp_in_proj_gtp", "gdp_in_proj_gtp_repad", "gdp_in_proj_gtp_local"};
}

std::vector<std::string> shard_split_world_scenario_names() {
  return {"gdp_in_proj_shard_split", "gdp_in_proj_gather_to_shard_split", "gdp_in_proj_shard_split_to_gather"};
}

std::vector<std::string> real_world_scenario_names() {
  return {"real_gpt_hybrid_tp",          "real_gpt_hybrid_swiglu_tied",  "real_gpt_hybrid_pp",
          "real_gpt_hybrid_moe",         "real_hybrid_hybrid_tp",        "real_gpt_hybrid_training",
          "real_hybrid_hybrid_gtp",      "real_gpt_hybrid_gtp",          "real_hybrid_hybrid_gdp_tp",
          "real_gpt_hybrid_optimizer",   "real_hybrid_hybrid_optimizer", "real_gpt_hybrid_training_optimizer",
          "real_hybrid_hybrid_gdp_gtp",  "real_gpt_hybrid_training_moe", "real_gpt_hybrid_training_pp",
          "real_gpt_hybrid_training_gtp"};
}

std::vector<std::string> real_finding_scenario_names() {
  return {"real_gpt_hybrid_gtp_swiglu",
          "real_hybrid_hybrid_gtp_tp2",
          "real_gpt_hybrid_moe_optimizer",
          "real_gpt_hybrid_gtp_p32",
          "real_gpt_hybrid_training_moe_optimizer",
          "real_gpt_hybrid_distributed_optimizer",
          "real_gpt_hybrid_moe_distributed_optimizer"};
}

namespace {

/// A real model of the worlds' small dimensions at TP x PP (the layout's other sizes 1).
ModelDumpSpec real_model(ModelKind model, std::string pattern, std::int64_t tp, std::int64_t pp) {
  ModelDumpSpec m;
  m.model = model;
  m.pattern = std::move(pattern);
  m.config = small_world_config();
  m.config.gdp_design = ModelDumpSpec{}.config.gdp_design;  // what a Megatron model saves (the gather design)
  m.sizes.tp = tp, m.sizes.pp = pp, m.sizes.etp = tp;
  return m;
}

/// `m` with Megatron's optimizer of `kind`: the FP32Optimizer (the default) takes a round trip's float64
/// parameters; the DistributedOptimizer takes fp32 ones, whose oracle values the plan keeps below 2^24
/// (OracleDtype::float32). The Float16 optimizer's bf16 parameters cannot hold them.
ModelDumpSpec with_optimizer(ModelDumpSpec m, OptimizerKind kind = OptimizerKind::fp32) {
  m.optimizer = true;
  m.optimizer_kind = kind;
  return m;
}

/// Fills in the scenario's layouts from its real models (for the plan's text and the world sizes) and
/// checks both models: a configuration the reference refuses is not laid out.
Result<WorldScenario> with_real_models(WorldScenario s, const ModelDumpSpec& save, const ModelDumpSpec& load) {
  s.real_save = save, s.real_load = load;
  s.pattern = load.pattern;
  s.gated = save.config.gated_mlp;
  s.optimizer = save.optimizer;
  // The world of a real model is GTP x TP x DP x PP (EP and ETP tile the same ranks); the layout shows
  // EP beside DP where it divides DP (then DP = EP x the expert grid's DP), so its rank count is the world's.
  const auto layout = [](const ModelDumpSpec& m) {
    const std::int64_t dp = data_parallel_size(m.sizes), ep = dp % m.sizes.ep == 0 ? m.sizes.ep : 1;
    return WorldLayout{m.sizes.tp, m.sizes.pp, ep, dp / ep, m.sizes.gtp};
  };
  s.save = layout(save), s.load = layout(load);
  for (const ModelDumpSpec* m : {&save, &load})
    if (auto st = validate_model_dump(*m, 0); !st.ok()) return st.error().with_context("scenario '" + s.name + "'");
  return s;
}

Result<WorldScenario> make_real_world_scenario(const std::string& name, std::int64_t a, std::int64_t b) {
  WorldScenario s;
  s.name = name;
  s.kind = ScenarioKind::real_gpt_hybrid;
  s.config = small_world_config();
  const std::int64_t gpt_layers = 2;
  if (name == "real_gpt_hybrid_tp") {
    s.description = "Megatron's GPTModel -> its HybridModel M*-M*- (retargeted by Megatron), TP change";
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a, 1), load = real_model(ModelKind::hybrid, "M*-M*-", b, 1);
    save.layers = gpt_layers;
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_swiglu_tied") {
    s.description = "Megatron's GPTModel -> HybridModel, SwiGLU (factories), tied embeddings, LayerNorm, TP change";
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a, 1), load = real_model(ModelKind::hybrid, "*-M*-M", b, 1);
    save.layers = gpt_layers;
    for (ModelDumpSpec* m : {&save, &load})
      m->config.gated_mlp = true, m->config.tied_embeddings = true, m->config.layer_norm = true;
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_optimizer") {
    s.description =
        "Megatron's GPTModel with SwiGLU and its FP32Optimizer (Adam's moments) -> HybridModel M*-M*- and its "
        "FP32Optimizer (retargeted by Megatron, moments alike, the Mamba layers' kept fresh), TP change";
    ModelDumpSpec save = with_optimizer(real_model(ModelKind::gpt, "", a, 1)),
                  load = with_optimizer(real_model(ModelKind::hybrid, "M*-M*-", b, 1));
    save.layers = gpt_layers;
    save.config.gated_mlp = load.config.gated_mlp = true;
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_distributed_optimizer") {
    s.description =
        "Megatron's GPTModel and its DistributedOptimizer (fp32, the gradient buffer in several buckets with end "
        "padding) saved in the model-space format fully_reshardable -> HybridModel M*-M*- and its "
        "DistributedOptimizer (retargeted by Megatron, the Mamba layers' kept fresh), TP change; what Megatron "
        "loaded is verified, then the optimizer takes it (load_state_dict)";
    ModelDumpSpec save = with_optimizer(real_model(ModelKind::gpt, "", a, 1), OptimizerKind::distributed),
                  load = with_optimizer(real_model(ModelKind::hybrid, "M*-M*-", b, 1), OptimizerKind::distributed);
    save.layers = gpt_layers;
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_moe_distributed_optimizer") {  // before the real_gpt_hybrid_moe* family below
    s.description =
        "Megatron's GPTModel with 4 experts at EP = min(ranks, 4) (TP 1, so DP = ranks: each DP rank holds a slice "
        "of the dense states) and its chained dense + expert DistributedOptimizers (fp32, padded buckets) saved "
        "fully_reshardable -> HybridModel *E*E at EP = min(ranks, 4) and its DistributedOptimizers (retargeted by "
        "Megatron): DP and EP change; what Megatron loaded is verified, then the optimizers take it";
    if (a < 2 || b < 2) return cannot_lay_out(name, a, b, "both worlds need EP >= 2 (one optimizer chain shape)");
    ModelDumpSpec save = with_optimizer(real_model(ModelKind::gpt, "", 1, 1), OptimizerKind::distributed),
                  load = with_optimizer(real_model(ModelKind::hybrid, "*E*E", 1, 1), OptimizerKind::distributed);
    save.layers = gpt_layers;
    save.sizes.ep = std::min<std::int64_t>(a, 4), load.sizes.ep = std::min<std::int64_t>(b, 4);
    // With their biases (ETP 1): 64-element tensors end buckets off the 128-element grid, so they are padded.
    save.config.num_experts = load.config.num_experts = 4;
    return with_real_models(s, save, load);
  }
  if (name == "real_hybrid_hybrid_optimizer") {
    s.kind = ScenarioKind::real_hybrid_hybrid;
    s.description =
        "Megatron's HybridModel M*-M*- and its FP32Optimizer saved and loaded across a TP change (the Mamba "
        "in_proj's split moments included)";
    const ModelDumpSpec save = with_optimizer(real_model(ModelKind::hybrid, "M*-M*-", a, 1)),
                        load = with_optimizer(real_model(ModelKind::hybrid, "M*-M*-", b, 1));
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_pp") {
    s.description = "Megatron's GPTModel at TP x PP=2 -> HybridModel M*-|M*- at TP x PP=2 (stages by pipes)";
    if (a < 2 || b < 2) return cannot_lay_out(name, a, b, "both worlds need PP=2");
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a / 2, 2),
                  load = real_model(ModelKind::hybrid, "M*-|M*-", b / 2, 2);
    save.layers = gpt_layers;
    return with_real_models(s, save, load);
  }
  if (name.starts_with("real_gpt_hybrid_moe") || name.starts_with("real_gpt_hybrid_training_moe")) {
    const bool optimizer = name.ends_with("_optimizer");
    if (name.starts_with("real_gpt_hybrid_training")) s.load_path = LoadPath::training;
    s.description =
        std::string(
            "Megatron's GPTModel with 4 experts (EP = min(ranks, 4), ETP 1) -> HybridModel *E*E at TP = ETP = "
            "ranks / EP' (EP' = min(ranks, 4) / 2 or 1): EP and ETP change") +
        (optimizer ? ", with their FP32Optimizers (chained dense + expert where experts have their own groups)" : "") +
        (s.load_path == LoadPath::training
             ? "; saved by save_checkpoint (fully parallel: each replicated chunk written by one of its holders), "
               "loaded by load_checkpoint (Megatron's own GPT -> hybrid setup)"
             : "");
    const std::int64_t save_ep = std::min<std::int64_t>(a, 4);
    const std::int64_t load_ep = std::max<std::int64_t>(1, std::min<std::int64_t>(b, 4) / 2);
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a / save_ep, 1),
                  load = real_model(ModelKind::hybrid, "*E*E", b / load_ep, 1);
    save.layers = gpt_layers;
    save.sizes.ep = save_ep, load.sizes.ep = load_ep;
    for (ModelDumpSpec* m : {&save, &load})  // Megatron: "Bias in Moe is only supported when ETP==1"
      m->config.num_experts = 4, m->config.add_bias = false;
    if (optimizer) save = with_optimizer(save), load = with_optimizer(load);
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_training_pp") {
    s.description =
        "Megatron's GPTModel at TP x PP=2 with SwiGLU, tied embeddings and LayerNorm saved by save_checkpoint -> "
        "HybridModel *-M|*-M at TP x PP=2 loaded by load_checkpoint (Megatron's own GPT -> hybrid setup per stage)";
    if (a < 2 || b < 2) return cannot_lay_out(name, a, b, "both worlds need PP=2");
    s.load_path = LoadPath::training;
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a / 2, 2),
                  load = real_model(ModelKind::hybrid, "*-M|*-M", b / 2, 2);
    save.layers = gpt_layers;
    for (ModelDumpSpec* m : {&save, &load})
      m->config.gated_mlp = true, m->config.tied_embeddings = true, m->config.layer_norm = true;
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_training" || name == "real_gpt_hybrid_training_optimizer") {
    const bool optimizer = name == "real_gpt_hybrid_training_optimizer";
    s.description = optimizer
                        ? "Megatron's GPTModel and its FP32Optimizer saved by save_checkpoint -> HybridModel *-M*-M "
                          "and its FP32Optimizer loaded by load_checkpoint (Megatron's own GPT -> hybrid setup "
                          "retargets the optimizer state too), TP change"
                        : "Megatron's GPTModel saved by save_checkpoint -> HybridModel *-M*-M loaded by "
                          "load_checkpoint (Megatron's own GPT -> hybrid setup and retarget), TP change";
    s.load_path = LoadPath::training;
    ModelDumpSpec save = real_model(ModelKind::gpt, "", a, 1), load = real_model(ModelKind::hybrid, "*-M*-M", b, 1);
    if (optimizer) save = with_optimizer(save), load = with_optimizer(load);
    save.layers = gpt_layers;
    return with_real_models(s, save, load);
  }
  if (name == "real_hybrid_hybrid_tp" || name == "real_hybrid_hybrid_gdp_tp") {
    const bool gdp = name == "real_hybrid_hybrid_gdp_tp";
    s.kind = ScenarioKind::real_hybrid_hybrid;
    s.description = gdp ? "Megatron's HybridModel M*-M*- with GatedDeltaProduct mixers saved and loaded across a TP "
                          "change (the GDP in_proj's split factory [z|V|K|Q|b|a] and its conv1d loaded)"
                        : "Megatron's HybridModel M*-M*- saved and loaded across a TP change (Mamba layers loaded too)";
    ModelDumpSpec save = real_model(ModelKind::hybrid, "M*-M*-", a, 1),
                  load = real_model(ModelKind::hybrid, "M*-M*-", b, 1);
    if (gdp) save.config.ssm_mixer = load.config.ssm_mixer = "gdp";
    return with_real_models(s, save, load);
  }
  if (name == "real_hybrid_hybrid_gtp" || name == "real_hybrid_hybrid_gdp_gtp") {
    const bool gdp = name == "real_hybrid_hybrid_gdp_gtp";
    s.kind = ScenarioKind::real_hybrid_hybrid;
    s.description = std::string("Megatron's HybridModel M*-M*- ") + (gdp ? "with GatedDeltaProduct mixers " : "") +
                    "at TP 1 saved at GTP = save ranks, loaded at GTP = load ranks (p = 16): every linear GTP-wrapped, "
                    "the " +
                    (gdp ? "GDP in_proj ([z|V*|K*|Q|b*|a])" : "Mamba in_proj") +
                    " gathered on save and padded to p x G rows";
    ModelDumpSpec save = real_model(ModelKind::hybrid, "M*-M*-", 1, 1),
                  load = real_model(ModelKind::hybrid, "M*-M*-", 1, 1);
    save.sizes.gtp = a, load.sizes.gtp = b;
    if (gdp) save.config.ssm_mixer = load.config.ssm_mixer = "gdp";
    return with_real_models(s, save, load);
  }
  if (name == "real_gpt_hybrid_gtp" || name == "real_gpt_hybrid_gtp_swiglu" || name == "real_gpt_hybrid_gtp_p32" ||
      name == "real_gpt_hybrid_training_gtp") {
    const bool swiglu = name == "real_gpt_hybrid_gtp_swiglu", padded = name == "real_gpt_hybrid_gtp_p32";
    if (name == "real_gpt_hybrid_training_gtp") s.load_path = LoadPath::training;
    s.description =
        "Megatron's GPTModel at TP 1 saved at GTP = save ranks -> HybridModel *-*- loaded at GTP = load ranks "
        "(retargeted by Megatron): every linear GTP-wrapped (no Mamba layer: a fresh in_proj under GTP is "
        "finding B); " +
        std::string(swiglu   ? "p = 16, none padded; SwiGLU, fc1's rows [W; V] taken from the reference (finding S)"
                    : padded ? "p = 32: the 64-row linears padded to 128 rows at GTP 4, planned from the reference"
                             : "p = 16, none padded") +
        (s.load_path == LoadPath::training
             ? "; saved by save_checkpoint, loaded by load_checkpoint (--tensor-parallel-num-weight-shards = G)"
             : "");
    ModelDumpSpec save = real_model(ModelKind::gpt, "", 1, 1), load = real_model(ModelKind::hybrid, "*-*-", 1, 1);
    save.layers = gpt_layers;
    save.sizes.gtp = a, load.sizes.gtp = b;
    save.config.gated_mlp = load.config.gated_mlp = swiglu;
    save.config.pad_alignment = load.config.pad_alignment = padded ? 32 : 16;
    return with_real_models(s, save, load);
  }
  if (name == "real_hybrid_hybrid_gtp_tp2") {
    s.kind = ScenarioKind::real_hybrid_hybrid;
    s.description =
        "Megatron's HybridModel M*-M*- at TP 2 saved at GTP = save ranks / 2, loaded at GTP = load ranks / 2 "
        "(p = 32): the attention's linear_qkv (96 rows per TP rank) is padded to 128 under GTP 2";
    if (a < 2 || b < 2) return cannot_lay_out(name, a, b, "both worlds need TP 2");
    ModelDumpSpec save = real_model(ModelKind::hybrid, "M*-M*-", 2, 1),
                  load = real_model(ModelKind::hybrid, "M*-M*-", 2, 1);
    save.sizes.gtp = a / 2, load.sizes.gtp = b / 2;
    save.config.pad_alignment = load.config.pad_alignment = 32;
    return with_real_models(s, save, load);
  }
  return make_error(ErrorKind::invalid_argument, "unknown real scenario '" + name + "'");
}

}  // namespace

Result<WorldScenario> seeded_real_world_scenario(std::uint64_t seed, std::int64_t a, std::int64_t b) {
  if (!power_of_two_upto8(a) || !power_of_two_upto8(b))
    return make_error(ErrorKind::invalid_argument, "save and load ranks must be 1, 2, 4 or 8");
  std::mt19937_64 rng(seed);
  const auto pick = [&](std::int64_t n) { return static_cast<std::int64_t>(rng() % static_cast<std::uint64_t>(n)); };
  const std::int64_t save_pp = a >= 2 && pick(3) == 0 ? 2 : 1, load_pp = b >= 2 && pick(3) == 0 ? 2 : 1;
  const std::int64_t gpt_layers = save_pp * (1 + pick(2));
  // The hybrid pattern: gpt_layers attention + MLP pairs with Mamba layers between, split by pipes into
  // load_pp stages that each hold at least one layer.
  std::vector<std::string> units;
  for (std::int64_t i = 0; i < gpt_layers; ++i) {
    if (pick(2) == 0) units.push_back("M");
    units.push_back("*-");
  }
  if (pick(2) == 0) units.push_back("M");
  if (load_pp == 2 && units.size() < 2) units.push_back("M");
  std::string pattern;
  const std::size_t cut =
      load_pp == 2 ? 1 + static_cast<std::size_t>(pick(static_cast<std::int64_t>(units.size()) - 1)) : units.size();
  for (std::size_t i = 0; i < units.size(); ++i) pattern += (i == cut ? "|" : "") + units[i];
  ModelDumpSpec save = real_model(ModelKind::gpt, "", a / save_pp, save_pp),
                load = real_model(ModelKind::hybrid, pattern, b / load_pp, load_pp);
  save.layers = gpt_layers;
  const bool gated = pick(2) == 0, tied = pick(2) == 0, layer_norm = pick(3) == 0;
  for (ModelDumpSpec* m : {&save, &load})
    m->config.gated_mlp = gated, m->config.tied_embeddings = tied, m->config.layer_norm = layer_norm;
  WorldScenario s;
  s.name = "real_seed_" + std::to_string(seed);
  s.kind = ScenarioKind::real_gpt_hybrid;
  s.config = small_world_config();
  s.description = "drawn from seed " + std::to_string(seed) + ": Megatron's GPTModel (" + std::to_string(gpt_layers) +
                  " layers) -> HybridModel " + pattern + (gated ? ", SwiGLU" : "") + (tied ? ", tied" : "") +
                  (layer_norm ? ", LayerNorm" : ", RMSNorm");
  return with_real_models(s, save, load);
}

std::vector<std::pair<std::string, std::string>> world_scenarios_not_run() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& name : shard_split_world_scenario_names())
    out.emplace_back(name,
                     "the shard-split save design (spec 4.7) is not in the Megatron-LM snapshot: only the "
                     "gather design runs (--candidate shard-split runs the harness's candidate of it)");
  return out;
}

Result<WorldScenario> make_world_scenario(const std::string& name, std::int64_t a, std::int64_t b) {
  if (a < 1 || b < 1 || a > 8 || b > 8)
    return make_error(ErrorKind::invalid_argument, "save and load ranks must be in [1, 8]");
  if (!power_of_two_upto8(a) || !power_of_two_upto8(b))
    return cannot_lay_out(name, a, b, "the small model's dimensions (8 heads, 4 experts) divide by 1, 2, 4 or 8 ranks");
  if (name.rfind("real_", 0) == 0) return make_real_world_scenario(name, a, b);
  WorldScenario s;
  s.name = name;
  s.config = small_world_config();
  if (name == "gpt_hybrid_tp") {
    s.description = "GPT -> hybrid, TP change, SwiGLU factories and optimizer states";
    s.gated = s.optimizer = true;
    s.save.tp = a, s.load.tp = b;
  } else if (name == "gpt_hybrid_tp_pp") {
    s.description = "GPT saved at TP x PP=2 -> hybrid loaded at TP only, optimizer states";
    if (a < 2) return cannot_lay_out(name, a, b, "the save world needs PP=2");
    s.pattern = "M*-M*-M*-M*-";
    s.optimizer = true;
    s.save.tp = a / 2, s.save.pp = 2, s.load.tp = b;
  } else if (name == "gpt_hybrid_pp_tp") {
    s.description = "GPT saved at TP only -> hybrid loaded at TP x PP=2 (layers split evenly), SwiGLU";
    if (b < 2) return cannot_lay_out(name, a, b, "the load world needs PP=2");
    s.pattern = "M*-M*-M*-M*-";
    s.gated = true;
    s.save.tp = a, s.load.tp = b / 2, s.load.pp = 2;
  } else if (name == "gpt_hybrid_moe_ep") {
    s.description = "GPT MoE (4 experts) -> hybrid with E layers, EP change, optimizer states";
    s.pattern = "M*EM*E";
    s.config.num_experts = 4;
    s.optimizer = true;
    const std::int64_t sep = std::min<std::int64_t>(a, 4), lep = std::min<std::int64_t>(b, 4);
    s.save.ep = sep, s.save.tp = a / sep, s.load.ep = lep, s.load.tp = b / lep;
  } else if (name == "gdp_in_proj_gtp" || name == "gdp_in_proj_gtp_repad") {
    // d_inner 8, ngroups x d_state 4, 2 heads, one Householder: D = 28 / T TP-local rows; with
    // p = 16 and G = 2 the aligned block is 32 rows, so at T = 2 (D = 14 < p x G) GTP rank 1
    // holds only padding, at T = 1 (D = 28) its shard ends in 4 pad rows. The repad variant
    // saves at p = 16 and loads at p = 32 with all ranks in GTP (4 ranks: G = 4, 3 all-padding).
    s.kind = ScenarioKind::gdp_gtp;
    const bool repad = name == "gdp_in_proj_gtp_repad";
    s.description = repad ? "GDP in_proj (gather design) saved at p=16, loaded at p=32 across a GTP change (G up to 4)"
                          : "GDP in_proj (gather design) across a GTP x TP change, rows < p x G, all-padding GTP ranks";
    IH_TRY_ASSIGN(sw, gdp_gtp_world(name, a, b, a, 16, repad, GtpSaveDesign::gather));
    IH_TRY_ASSIGN(lw, gdp_gtp_world(name, a, b, b, repad ? 32 : 16, repad, GtpSaveDesign::gather));
    s.gtp_save = sw, s.gtp_load = lw;
    s.save.tp = sw.tp * sw.gtp, s.load.tp = lw.tp * lw.gtp;  // world sizes (rank = t * G + g)
  } else if (name == "gdp_in_proj_shard_split" || name == "gdp_in_proj_gather_to_shard_split" ||
             name == "gdp_in_proj_shard_split_to_gather") {
    // The shard-split design (spec 4.7) on the same in_proj: saved and loaded across a GTP x TP change
    // (rows < p x G: all-padding GTP ranks keep only a placeholder), and cross-loads with the gather
    // design in both directions, the gather -> shard-split one also across a padding change (p 16 -> 32).
    s.kind = ScenarioKind::gdp_gtp;
    const bool from_gather = name == "gdp_in_proj_gather_to_shard_split";
    const bool to_gather = name == "gdp_in_proj_shard_split_to_gather";
    s.description = from_gather ? "GDP in_proj saved with the gather design (p=16), loaded with the shard split (p=32)"
                    : to_gather
                        ? "GDP in_proj saved with the shard split, loaded with the gather design (TP x GTP change)"
                        : "GDP in_proj saved and loaded with the shard split across a GTP x TP change";
    const auto design = [](bool gather) { return gather ? GtpSaveDesign::gather : GtpSaveDesign::shard_split; };
    IH_TRY_ASSIGN(sw, gdp_gtp_world(name, a, b, a, 16, from_gather, design(from_gather)));
    IH_TRY_ASSIGN(lw, gdp_gtp_world(name, a, b, b, from_gather ? 32 : 16, from_gather, design(to_gather)));
    s.gtp_save = sw, s.gtp_load = lw;
    s.save.tp = sw.tp * sw.gtp, s.load.tp = lw.tp * lw.gtp;
  } else if (name == "gdp_in_proj_gtp_local") {
    // The other load ordering: a local checkpoint (MCoreTensorAwareStateDict) reloaded through
    // to_state_dict, which reads back only the layout it saved (Megatron asserts otherwise).
    s.kind = ScenarioKind::gdp_gtp;
    s.load_order = LoadOrder::to_state_dict_baseline;
    s.description = "GDP in_proj (gather design) reloaded from each rank's local checkpoint by to_state_dict";
    if (a != b) return cannot_lay_out(name, a, b, "a local checkpoint reloads only the layout it saved (A = B)");
    if (a == 1) return cannot_lay_out(name, a, b, "GTP needs 2 or 4 ranks");
    if (a > 4) return cannot_lay_out(name, a, b, "GTP worlds of 2 or 4 ranks (TP <= 2 for 2 heads)");
    s.gtp_save = s.gtp_load = a == 2 ? GtpWorld{1, 2, 16} : GtpWorld{2, 2, 16};
    s.save.tp = s.load.tp = a;
  } else if (name == "dp_replicas") {
    s.description = "DP=2 replicas on both sides (exactly one writer per shard), TP change";
    if (a < 2 || b < 2) return cannot_lay_out(name, a, b, "both worlds need DP=2");
    s.optimizer = true;
    s.save.dp = 2, s.save.tp = a / 2, s.load.dp = 2, s.load.tp = b / 2;
  } else {
    std::string known;
    for (const auto& n : world_scenario_names()) known += (known.empty() ? "" : ", ") + n;
    for (const auto& [n, why] : world_scenarios_not_run()) {
      if (n == name) return make_error(seam_kind::unsupported, "scenario '" + name + "' is not run: " + why);
    }
    return make_error(ErrorKind::invalid_argument, "unknown scenario '" + name + "' (known: " + known + ")");
  }
  return s;
}

Result<WorldScenario> custom_world_scenario(const std::string& pattern, const WorldLayout& save,
                                            const WorldLayout& load, bool gated, bool optimizer) {
  auto maps = gpt_compatible_layer_maps(pattern);
  if (!maps.ok()) return maps.error().with_context("pattern '" + pattern + "'");
  for (const WorldLayout* w : {&save, &load})
    if (w->tp < 1 || w->pp < 1 || w->ep != 1 || w->dp != 1)
      return make_error(ErrorKind::invalid_argument, "TP and PP sizes must be at least 1 (no EP or DP here)");
  if (maps->num_gpt_layers % save.pp != 0)
    return make_error(ErrorKind::invalid_argument, "the GPT model has " + std::to_string(maps->num_gpt_layers) +
                                                       " layers, not divisible by --save-pp " +
                                                       std::to_string(save.pp));
  WorldScenario s;
  s.name = kCustomScenarioName;
  s.config = small_world_config();
  s.pattern = pattern;
  s.gated = gated, s.optimizer = optimizer;
  s.save = save, s.load = load;
  s.description = "GPT -> hybrid " + pattern + " from the command line" + (gated ? ", SwiGLU" : "") +
                  (optimizer ? ", optimizer states" : "");
  return s;
}

Result<WorldScenario> seeded_world_scenario(std::uint64_t seed, std::int64_t a, std::int64_t b) {
  IH_TRY_ASSIGN(drawn, props::draw_world_load_case(seed, a, b));
  WorldScenario s;
  s.name = "seed_" + std::to_string(seed);
  s.config = small_world_config();
  s.pattern = drawn.pattern;
  if (drawn.num_experts > 0) s.config.num_experts = drawn.num_experts;
  s.gated = drawn.gated;
  s.optimizer = drawn.optimizer;
  const auto layout = [](const props::WorldSplit& w) { return WorldLayout{w.tp, w.pp, w.ep, w.dp}; };
  s.save = layout(drawn.save);
  s.load = layout(drawn.load);
  s.description = "drawn from seed " + std::to_string(seed) + " by the property generators: pattern " + s.pattern +
                  (s.gated ? ", SwiGLU" : "") + (s.optimizer ? ", optimizer states" : "") +
                  (drawn.num_experts > 0 ? ", " + std::to_string(drawn.num_experts) + " experts" : "");
  return s;
}

namespace {

/// Segments of rows [first, first + rows) of a factory's data, renumbered from 0 (a GTP shard of
/// the gathered TP-local weight): the reference factory's segments clipped to the window.
std::vector<Segment> window(const std::vector<Segment>& segs, std::int64_t first, std::int64_t rows) {
  std::vector<Segment> out;
  for (const Segment& seg : segs) {
    const std::int64_t lo = std::max(seg.begin, first), hi = std::min(seg.begin + seg.rows, first + rows);
    if (lo >= hi) continue;
    Segment w = seg;
    w.begin = lo - first;
    w.rows = hi - lo;
    w.global_offset[static_cast<std::size_t>(seg.prepend)] += lo - seg.begin;
    out.push_back(std::move(w));
  }
  return out;
}

/// A GTP in_proj shard under the gather design: the reference factory's segments over the gathered
/// (D, C) rows, and the (R, C) shard's rows, the window [g R, (g+1) R) of them (rows past D: padding,
/// covered by no segment). `params.shard` is set here.
struct GatheredShard {
  std::vector<Segment> gathered, shard;
  Shape shard_shape;
  ShardedTensorFactory factory;  // the reference's gather factory
};

Result<GatheredShard> gathered_shard(GtpFactoryParams params) {
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  params.shard = TensorValue::of_storage(1, {padding.shard_rows, params.cols});
  IH_TRY_ASSIGN(factory, make_gtp_factory(GtpSaveDesign::gather, params));
  IH_TRY_ASSIGN(gathered, factory_segments(factory));
  GatheredShard out;
  out.shard = window(gathered, params.gtp_rank * padding.shard_rows, padding.shard_rows);
  out.gathered = std::move(gathered);
  out.shard_shape = {padding.shard_rows, params.cols};
  out.factory = std::move(factory);
  return out;
}

struct GtpRank {
  std::vector<Segment> shard;  // the (R, C) shard's rows
  Shape shard_shape;
  std::vector<Segment> written;  // what the rank's save writes: the gathered (D, C) rows, or its pieces
  bool main_replica = false;
};

Result<GtpRank> gtp_rank(const GtpWorld& w, std::int64_t cols, std::int64_t rank, const std::string& key) {
  GdpDims dims;
  dims.d_inner_local = 8 / w.tp, dims.group_state_local = 4 / w.tp, dims.nheads_local = 2 / w.tp, dims.householder = 1;
  IH_TRY_ASSIGN(layout, gdp_in_proj_layout(dims));
  GtpFactoryParams params;
  params.key = key;
  params.layout = layout;
  params.tp_size = w.tp, params.tp_rank = rank / w.gtp;
  params.gtp_size = w.gtp, params.gtp_rank = rank % w.gtp;
  params.pad_alignment = w.pad_alignment;
  params.cols = cols;
  params.replica_id = ReplicaId::tuple({0, 0, params.gtp_rank});  // rank in the GTP-inclusive dp_cp group
  // The shard's rows are the gathered rows' window whatever the design saves; what each rank writes
  // is the design's: the gathered chunks (one main replica) or its own pieces (each GTP rank).
  IH_TRY_ASSIGN(g, gathered_shard(params));
  GtpRank out;
  out.shard = g.shard;
  out.shard_shape = g.shard_shape;
  if (w.design == GtpSaveDesign::gather) {
    out.written = g.gathered;
    out.main_replica = g.factory.replica_id.is_main();
    return out;
  }
  params.replica_id = ReplicaId::tuple({0, 0, 0});  // the shard's id: rank in the GTP-excluded DP group (DP = 1)
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  params.shard = TensorValue::of_storage(1, {padding.shard_rows, cols});
  IH_TRY_ASSIGN(pieces, make_gtp_factory(GtpSaveDesign::shard_split, params));
  IH_TRY_ASSIGN(written, factory_segments(pieces));
  out.written = written;
  out.main_replica = pieces.replica_id.is_main();
  return out;
}

/// The GDP in_proj scenario: the mixer's state is built by Megatron's own code in the workers
/// (gtp_world.py's stand-in); the plan gives each rank the segments of its GTP shard.
Result<WorldPlanStats> write_gdp_gtp_scenario(const WorldScenario& s, const std::filesystem::path& dir) {
  const std::string key = "decoder.layers.0.mixer.in_proj.weight", path = key;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());
  const auto gtp_json = [](const GtpWorld& w) {
    return Json{{"tp", w.tp}, {"gtp", w.gtp}, {"pad_for_alignment", w.pad_alignment}, {"design", to_string(w.design)}};
  };
  const auto layout_json = [&](const GtpWorld& w) -> Result<Json> {
    GdpDims dims;
    dims.d_inner_local = 8 / w.tp, dims.group_state_local = 4 / w.tp, dims.nheads_local = 2 / w.tp,
    dims.householder = 1;
    IH_TRY_ASSIGN(layout, gdp_in_proj_layout(dims));
    return Json{{"sections", layout.sections},
                {"names", layout.names},
                {"cols", s.gdp_cols},
                {"pad_for_alignment", w.pad_alignment}};
  };
  std::map<std::string, Shape> shapes;
  std::map<std::pair<std::string, Shape>, std::vector<std::int64_t>> writers;
  std::vector<GtpRank> save_ranks, load_ranks;
  for (std::int64_t r = 0; r < s.gtp_save.tp * s.gtp_save.gtp; ++r) {
    IH_TRY_ASSIGN(g, gtp_rank(s.gtp_save, s.gdp_cols, r, key));
    for (const Segment& seg : g.written) {
      shapes.emplace(seg.key, seg.global_shape);
      if (g.main_replica) writers[{seg.key, seg.global_offset}].push_back(r);
    }
    save_ranks.push_back(std::move(g));
  }
  std::map<std::string, std::int64_t> key_id;
  Json catalogue_keys = Json::array();
  WorldPlanStats stats;
  for (const auto& [k, shape] : shapes) {
    key_id[k] = static_cast<std::int64_t>(key_id.size()) + 1;
    catalogue_keys.push_back(Json{{"id", key_id[k]}, {"key", k}, {"global_shape", shape}});
    stats.saved_elements += numel(shape);
  }
  stats.gpt_keys = static_cast<std::int64_t>(shapes.size());
  const auto seg_list = [&](const std::vector<Segment>& segs) -> Result<Json> {
    Json list = Json::array();
    for (const Segment& seg : segs) {
      auto it = key_id.find(seg.key);
      if (it == key_id.end()) return make_error(seam_kind::harness_error, "GTP key '" + seg.key + "' is not saved");
      list.push_back(segment_json(seg, it->second));
    }
    return list;
  };
  IH_TRY_ASSIGN(save_layout, layout_json(s.gtp_save));
  IH_TRY_ASSIGN(load_layout, layout_json(s.gtp_load));
  for (std::size_t r = 0; r < save_ranks.size(); ++r) {
    IH_TRY_ASSIGN(fill, seg_list(save_ranks[r].shard));
    IH_TRY_STATUS(
        write_json(dir / ("save_rank_" + std::to_string(r) + ".json"), Json{{"kind", to_string(ScenarioKind::gdp_gtp)},
                                                                            {"gtp", gtp_json(s.gtp_save)},
                                                                            {"layout", save_layout},
                                                                            {"fill", Json{{path, fill}}}}));
  }
  std::map<std::string, std::vector<char>> covered;
  for (const auto& [k, shape] : shapes) covered[k].assign(static_cast<std::size_t>(numel(shape)), 0);
  for (std::int64_t r = 0; r < s.gtp_load.tp * s.gtp_load.gtp; ++r) {
    IH_TRY_ASSIGN(g, gtp_rank(s.gtp_load, s.gdp_cols, r, key));
    IH_TRY_ASSIGN(segs, seg_list(g.shard));
    for (const Segment& seg : g.shard) {
      const std::int64_t inner = s.gdp_cols;
      for (std::int64_t row = 0; row < seg.rows; ++row)
        for (std::int64_t c = 0; c < inner; ++c) {
          const std::int64_t lin = (seg.global_offset[0] + row) * seg.global_shape[1] + seg.global_offset[1] + c;
          auto& bits = covered[seg.key];
          if (lin >= 0 && lin < static_cast<std::int64_t>(bits.size())) bits[static_cast<std::size_t>(lin)] = 1;
        }
    }
    stats.expected_elements += numel(g.shard_shape);
    IH_TRY_STATUS(write_json(
        dir / ("load_rank_" + std::to_string(r) + ".json"),
        Json{{"kind", to_string(ScenarioKind::gdp_gtp)}, {"gtp", gtp_json(s.gtp_load)}, {"layout", load_layout}}));
    IH_TRY_STATUS(write_json(
        dir / ("oracle_rank_" + std::to_string(r) + ".json"),
        Json{{"rank", r},
             {"tensors", Json::array({Json{
                             {"path", path}, {"local_shape", g.shard_shape}, {"segments", segs}, {"fresh", false}}})},
             {"objects", Json::array()},
             {"plain", Json::array()}}));
  }
  for (const auto& [k, bits] : covered) stats.uncovered_elements += std::count(bits.begin(), bits.end(), 0);
  Json expected_writers = Json::array();
  for (const auto& [chunk, ranks] : writers) {
    if (ranks.size() != 1)
      return make_error(seam_kind::harness_error,
                        "plan bug: " + std::to_string(ranks.size()) + " main replicas of " + chunk.first);
    expected_writers.push_back(Json::array({chunk.first, chunk.second, ranks[0]}));
  }
  stats.expected_writers = static_cast<std::int64_t>(expected_writers.size());
  std::int64_t max_numel = 0;
  for (const auto& [k, shape] : shapes) max_numel = std::max(max_numel, numel(shape));
  IH_TRY_ASSIGN(encoding, oracle_encoding(OracleDtype::float64, max_numel, stats.gpt_keys));
  IH_TRY_STATUS(write_json(dir / "catalogue.json", Json{{"oracle", oracle_json(encoding)},
                                                        {"keys", catalogue_keys},
                                                        {"fresh_keys", Json::array()},
                                                        {"aliases", Json::array()},
                                                        {"writers", expected_writers},
                                                        {"saved_plain", Json::object()},
                                                        {"uncovered_elements", stats.uncovered_elements}}));
  return stats;
}

/// A real model's GTP-wrapped in_proj (spec 4.10): Megatron's sharded state dict holds a factory over
/// the all-gathered (D, C) buffer, not the parameter, so the workers fill and dump the parameter itself,
/// the (R, C) shard of that buffer zero-padded to p x G rows. The reference gives the shard's rows (its
/// gather factory of the same layout, checked against the factory Megatron describes); nullopt for any
/// other factory.
Result<std::optional<GatheredShard>> real_gtp_in_proj(const ModelDumpSpec& m, std::int64_t rank,
                                                      const ShardedTensorFactory& f) {
  static constexpr std::string_view kInProj = ".mixer.in_proj.weight";
  if (m.sizes.gtp == 1 || !f.key.ends_with(kInProj)) return std::optional<GatheredShard>();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  const ModelConfig& c = m.config;
  GtpFactoryParams p;
  p.key = f.key;
  p.tp_size = l.tp, p.tp_rank = l.tp_rank, p.gtp_size = l.gtp, p.gtp_rank = l.gtp_rank;
  p.pad_alignment = c.pad_alignment, p.cols = c.hidden;
  const std::int64_t d_inner = c.mamba_heads * c.mamba_head_dim / l.tp, heads = c.mamba_heads / l.tp,
                     group_state = c.mamba_groups * c.mamba_state / l.tp;
  // Both mixers save a GTP in_proj by the gather design here: the GDP mixer's [z|V*|K*|Q|b*|a] sections, the
  // Mamba mixer's own.
  if (c.ssm_mixer == "gdp") {
    IH_TRY_ASSIGN(layout, gdp_in_proj_layout({d_inner, group_state, heads, c.gdp_householder}));
    p.layout = layout, p.mixer = GtpMixer::gdp;
  } else {
    IH_TRY_ASSIGN(layout, mamba_in_proj_layout({d_inner, group_state, heads}));
    p.layout = layout, p.mixer = GtpMixer::mamba;
  }
  IH_TRY_ASSIGN(g, gathered_shard(p));
  IH_TRY_ASSIGN(described, factory_segments(f));
  if (described != g.gathered)
    return make_error(seam_kind::harness_error, "real GTP in_proj " + f.key + " on rank " + std::to_string(rank) +
                                                    ": Megatron's gathered pieces are not the reference's (" +
                                                    std::to_string(described.size()) + " vs " +
                                                    std::to_string(g.gathered.size()) + " segments)");
  return std::optional<GatheredShard>(std::move(g));
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
  const std::int64_t first = gtp_rank * padding.shard_rows, end = first + padding.real_rows(gtp_rank);
  std::vector<Segment> out;
  for (const Segment& s : unwrapped) {
    const std::int64_t a = std::max(s.begin, first), b = std::min(s.begin + s.rows, end);
    if (a >= b) continue;
    Segment w = s;
    w.begin = a - first, w.rows = b - a;
    w.global_offset[static_cast<std::size_t>(s.prepend)] += a - s.begin;
    out.push_back(std::move(w));
  }
  return out;
}

/// Whether two entries' global offsets agree on their first `prepended` axes (the layer and expert axes that
/// tell apart a GPT's layers, which share one key).
bool same_prepended(const Shape& a, const Shape& b, std::int64_t prepended) {
  const auto n = static_cast<std::size_t>(prepended);
  return a.size() >= n && b.size() >= n && std::equal(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(n), b.begin());
}

Status require_shard_rows(const std::string& key, std::int64_t rank, std::int64_t shard, const GtpPadding& padding) {
  if (padding.shard_rows == shard) return Ok{};
  return make_error(seam_kind::harness_error, "GTP-wrapped " + key + " on rank " + std::to_string(rank) + ": " +
                                                  std::to_string(shard) + " shard rows, the reference's padding of " +
                                                  std::to_string(padding.rows) + " rows gives " +
                                                  std::to_string(padding.shard_rows));
}

/// A real model's GTP-wrapped linear whose rows Megatron padded (allow_shape_mismatch): its entry is the
/// padded (R, ...) shard at the composite offset of the padded global tensor, so the plan takes the
/// shard's rows from the reference instead (gtp_window of the same key unwrapped). nullopt for an entry
/// GTP did not wrap (its rows' fragmentation is the unwrapped one's) or did not pad.
Result<std::optional<std::vector<Segment>>> real_gtp_padded_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                 const ShardedTensor& t) {
  using Rows = std::optional<std::vector<Segment>>;
  if (m.sizes.gtp == 1 || !t.allow_shape_mismatch || t.local_shape.empty()) return Rows();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  IH_TRY_ASSIGN(reference, unwrapped_reference(m, l));
  const ShardedTensor* ref = nullptr;
  for (const FlatEntry& e : reference)
    if (const auto* rt = std::get_if<ShardedTensor>(&e.entry);
        rt && rt->key == t.key && same_prepended(rt->global_offset, t.global_offset, t.prepend_axis_num))
      ref = rt;
  if (!ref)
    return make_error(seam_kind::harness_error, "GTP-padded " + t.key + ": the reference model has no such tensor");
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

/// A real model's GTP-wrapped SwiGLU fc1 (weight or bias). Its
/// parameter is the GTP shard of the TP-local [W; V], and Megatron's factory splits whatever parameter it
/// is given, so its description of which rows are W and which V is not the oracle (finding S): the plan
/// takes the shard's rows from the reference's factory of the same key unwrapped (gtp_window). nullopt
/// where GTP did not wrap the factory (its rows are the TP-local ones).
Result<std::optional<std::vector<Segment>>> real_gtp_factory_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                  const ShardedTensorFactory& f) {
  using Rows = std::optional<std::vector<Segment>>;
  // The MLP's SwiGLU factories (fc1's weight and bias); the mixers' split factories are not over GTP shards.
  if (m.sizes.gtp == 1 || f.data || !(f.key.ends_with(".linear_fc1.weight") || f.key.ends_with(".linear_fc1.bias")))
    return Rows();
  IH_TRY_ASSIGN(l, rank_layout(m.sizes, rank));
  IH_TRY_ASSIGN(reference, unwrapped_reference(m, l));
  IH_TRY_ASSIGN(pieces, factory_segments(f));
  if (pieces.empty()) return make_error(seam_kind::harness_error, "GTP-wrapped factory " + f.key + " builds nothing");
  const ShardedTensorFactory* ref = nullptr;
  std::vector<Segment> unwrapped;
  for (const FlatEntry& e : reference) {
    const auto* rf = std::get_if<ShardedTensorFactory>(&e.entry);
    if (!rf || rf->key != f.key || !rf->data) continue;
    IH_TRY_ASSIGN(segs, factory_segments(*rf));
    if (!segs.empty() &&
        same_prepended(segs.front().global_offset, pieces.front().global_offset, pieces.front().prepend))
      ref = rf, unwrapped = std::move(segs);
  }
  if (!ref)
    return make_error(seam_kind::harness_error, "GTP-wrapped factory " + f.key + ": the reference model has none");
  IH_TRY_ASSIGN(described, factory_local_shape(f));
  const std::int64_t rows = ref->data->rows(), shard = described.empty() ? 1 : described[0];
  if (shard == rows) return Rows();
  IH_TRY_ASSIGN(padding, gtp_weight_padding(rows, l.gtp, m.config.pad_alignment));
  IH_TRY_STATUS(require_shard_rows(f.key, rank, shard, padding));
  return Rows(gtp_window(unwrapped, padding, l.gtp_rank));
}

/// A segment of the rows an entry holds before the retarget, moved to where the retarget put that entry
/// (`post`, a segment of the retargeted entry): its key and prepended axes, the segment's own axes after
/// its prepended ones (a retarget renames and prepends axes, nothing else).
Segment retargeted_segment(const Segment& pre, const Segment& post) {
  Segment out = pre;
  out.key = post.key;
  out.prepend = post.prepend;
  const auto keep = static_cast<std::ptrdiff_t>(post.prepend), skip = static_cast<std::ptrdiff_t>(pre.prepend);
  out.global_shape.assign(post.global_shape.begin(), post.global_shape.begin() + keep);
  out.global_shape.insert(out.global_shape.end(), pre.global_shape.begin() + skip, pre.global_shape.end());
  out.global_offset.assign(post.global_offset.begin(), post.global_offset.begin() + keep);
  out.global_offset.insert(out.global_offset.end(), pre.global_offset.begin() + skip, pre.global_offset.end());
  return out;
}

}  // namespace

Result<WorldPlanStats> write_world_scenario(const WorldScenario& s, const std::filesystem::path& dir,
                                            const RealModelEntries& real_entries) {
  if (s.kind == ScenarioKind::gdp_gtp) return write_gdp_gtp_scenario(s, dir);
  if (s.is_real() && !real_entries)
    return make_error(seam_kind::harness_error, "scenario '" + s.name + "' needs the Megatron target's real models");
  // The hybrid side is retargeted at the GPT checkpoint, except hybrid -> hybrid.
  std::optional<GptCompatLayerMaps> maps;
  if (s.kind != ScenarioKind::real_hybrid_hybrid) {
    IH_TRY_ASSIGN(m, gpt_compatible_layer_maps(s.pattern));
    maps = std::move(m);
  }
  const std::int64_t layers = maps ? maps->num_gpt_layers : 0;
  if (!s.is_real() && layers % s.save.pp != 0)
    return make_error(ErrorKind::invalid_argument, "scenario '" + s.name + "': " + std::to_string(layers) +
                                                       " GPT layers do not split over PP=" + std::to_string(s.save.pp));
  ModelConfig config = s.config;
  config.gated_mlp = s.gated;
  const OptimizerStates optimizer = s.optimizer ? OptimizerStates::adam() : OptimizerStates{};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());
  // A rank's entries: Megatron's real model (as the target describes it), or the reference's synthetic one.
  const auto rank_entries = [&](bool save_side, std::int64_t r) -> Result<std::vector<FlatEntry>> {
    const std::string where = std::string(save_side ? "save" : "load") + " rank " + std::to_string(r);
    if (s.is_real()) {
      auto entries = real_entries(save_side ? s.real_save : s.real_load, r);
      if (!entries.ok()) return entries.error().with_context("scenario '" + s.name + "', real model of " + where);
      return entries;
    }
    const WorldLayout& w = save_side ? s.save : s.load;
    const RankLayout l = w.rank_layout(r);
    auto tree = save_side ? gpt_sharded_state_dict(config, layers, l, optimizer)
                          : hybrid_sharded_state_dict(config, s.pattern, l, optimizer);
    if (!tree.ok()) return tree.error().with_context("scenario '" + s.name + "', state dict of " + where);
    std::vector<FlatEntry> entries = flatten(*tree);
    set_dense_replicas(entries, w, l);
    return entries;
  };
  // What the workers build: the real model of this rank (kinds real_*).
  const auto real_model_json = [&](bool save_side, std::int64_t r) {
    return s.is_real() ? json::model_dump_spec_to_json(save_side ? s.real_save : s.real_load, r) : Json();
  };

  // Save world: entries, then the catalogue of GPT keys (ids from 1 in key order).
  using Rows = std::optional<std::vector<Segment>>;
  // A real GTP-padded linear of save (or load) rank r: its rows in the unpadded tensor (real_gtp_padded_rows).
  const auto gtp_padded = [&](bool save_side, std::int64_t r, const ShardedTensor& t) {
    return s.is_real() ? real_gtp_padded_rows(save_side ? s.real_save : s.real_load, r, t) : Result<Rows>(Rows());
  };
  // A real GTP-wrapped SwiGLU fc1 of save (or load) rank r: its rows in the TP-local [W; V] (real_gtp_factory_rows).
  const auto gtp_factory = [&](bool save_side, std::int64_t r, const ShardedTensorFactory& f) {
    return s.is_real() ? real_gtp_factory_rows(save_side ? s.real_save : s.real_load, r, f) : Result<Rows>(Rows());
  };
  // The segments of a tensor entry: the whole tensor, or a GTP-padded shard's real rows (none: all padding).
  const auto tensor_segments = [&](bool save_side, std::int64_t r,
                                   const ShardedTensor& t) -> Result<std::vector<Segment>> {
    IH_TRY_ASSIGN(padded, gtp_padded(save_side, r, t));
    return padded ? *padded : std::vector<Segment>{whole_tensor(t)};
  };
  std::vector<std::vector<FlatEntry>> save_entries;
  std::map<std::string, Shape> gpt_shapes;
  for (std::int64_t r = 0; r < s.save.ranks(); ++r) {
    IH_TRY_ASSIGN(entries, rank_entries(true, r));
    for (const FlatEntry& e : entries) {
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        IH_TRY_ASSIGN(segs, tensor_segments(true, r, *t));  // none: all padding, another rank names the shape
        if (!segs.empty()) gpt_shapes.emplace(t->key, segs.front().global_shape);
      }
      if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        IH_TRY_ASSIGN(segs, factory_segments(*f));
        for (const Segment& seg : segs) gpt_shapes.emplace(seg.key, seg.global_shape);
      }
    }
    save_entries.push_back(std::move(entries));
  }
  // The key whose values an entry holds: a distributed optimizer's `param` state is the parameter itself.
  const std::string param_state = "optimizer.state.param.";
  const auto source_key = [&](const std::string& key) {
    return s.distributed_optimizer() && key.starts_with(param_state) ? key.substr(param_state.size()) : key;
  };
  std::map<std::string, std::int64_t> key_id;
  Json catalogue_keys = Json::array(), aliases = Json::array();
  std::int64_t max_numel = 0;
  for (const auto& [key, shape] : gpt_shapes) {
    max_numel = std::max(max_numel, numel(shape));
    if (source_key(key) != key) continue;
    key_id[key] = static_cast<std::int64_t>(key_id.size()) + 1;
    catalogue_keys.push_back(Json{{"id", key_id[key]}, {"key", key}, {"global_shape", shape}});
  }
  for (const auto& [key, shape] : gpt_shapes) {
    if (source_key(key) == key) continue;
    const auto source = key_id.find(source_key(key));
    if (source == key_id.end() || gpt_shapes[source_key(key)] != shape)
      return make_error(seam_kind::harness_error, "scenario '" + s.name + "': the distributed optimizer's " + key +
                                                      " has no parameter of its shape in the save world");
    aliases.push_back(Json{{"key", key}, {"id", source->second}});
  }
  WorldPlanStats stats;
  stats.gpt_keys = static_cast<std::int64_t>(gpt_shapes.size());
  for (const auto& [key, shape] : gpt_shapes) stats.saved_elements += numel(shape);

  // Expected writers: every main-replica chunk, and the rank that holds it. Training's save_checkpoint saves
  // fully parallel (its default --ckpt-fully-parallel-save): the wrapper hands each replicated chunk to one
  // of the ranks holding it, so there the writer is any one of the chunk's holders.
  std::map<std::pair<std::string, Shape>, std::vector<std::int64_t>> writers;
  std::map<std::pair<std::string, Shape>, std::set<std::int64_t>> holders;
  const auto id_of = [&](const std::string& key) -> Result<std::int64_t> {
    auto it = key_id.find(source_key(key));
    if (it == key_id.end())
      return make_error(seam_kind::harness_error, "key '" + key + "' is not in the GPT catalogue");
    return it->second;
  };
  // A real GTP in_proj of save (or load) rank r: its parameter's rows (real_gtp_in_proj).
  const auto gtp_in_proj = [&](bool save_side, std::int64_t r, const ShardedTensorFactory& f) {
    return s.is_real() ? real_gtp_in_proj(save_side ? s.real_save : s.real_load, r, f)
                       : Result<std::optional<GatheredShard>>(std::optional<GatheredShard>());
  };
  // The rows a factory's parameter holds, before any retarget: a real GTP in_proj's or SwiGLU fc1's from the
  // reference, any other factory's as it builds them; and the GTP shard's shape where the parameter is not
  // the factory's data (the in_proj, whose factory is over the gathered buffer).
  struct FactoryRows {
    std::vector<Segment> segments;
    std::optional<Shape> gtp_param;
    bool gtp_window = false;  // a SwiGLU fc1's window: the retarget moves it like the factory's own pieces
  };
  const auto factory_rows = [&](bool save_side, std::int64_t r, const ShardedTensorFactory& f) -> Result<FactoryRows> {
    IH_TRY_ASSIGN(in_proj, gtp_in_proj(save_side, r, f));
    if (in_proj) return FactoryRows{in_proj->shard, in_proj->shard_shape, false};
    IH_TRY_ASSIGN(window, gtp_factory(save_side, r, f));
    if (window) return FactoryRows{*window, std::nullopt, true};
    IH_TRY_ASSIGN(built, factory_segments(f));
    return FactoryRows{built, std::nullopt, false};
  };
  for (std::size_t r = 0; r < save_entries.size(); ++r) {
    // gtp_params: the paths whose segments fill the model's parameter (a GTP shard of this shape), not
    // the sharded state dict's tensor.
    Json fill = Json::object(), objects = Json::object(), gtp_params = Json::object(), reference_rows = Json::array();
    for (const FlatEntry& e : save_entries[r]) {
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        IH_TRY_ASSIGN(id, id_of(t->key));
        IH_TRY_ASSIGN(segs, tensor_segments(true, static_cast<std::int64_t>(r), *t));
        fill[e.path] = Json::array();
        for (const Segment& seg : segs) fill[e.path].push_back(segment_json(seg, id));
        if (t->is_main_replica()) writers[{t->key, t->global_offset}].push_back(static_cast<std::int64_t>(r));
        holders[{t->key, t->global_offset}].insert(static_cast<std::int64_t>(r));
      } else if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        IH_TRY_ASSIGN(segs, factory_segments(*f));  // the chunks Megatron's save writes
        for (const Segment& seg : segs) holders[{seg.key, seg.global_offset}].insert(static_cast<std::int64_t>(r));
        IH_TRY_ASSIGN(rows, factory_rows(true, static_cast<std::int64_t>(r), *f));
        Json list = Json::array();
        for (const Segment& seg : rows.segments) {
          IH_TRY_ASSIGN(id, id_of(seg.key));
          list.push_back(segment_json(seg, id));
        }
        fill[e.path] = list;
        if (rows.gtp_param) gtp_params[e.path] = *rows.gtp_param;
        if (rows.gtp_window) reference_rows.push_back(e.path);
        IH_TRY_ASSIGN(main, factory_is_main(*f));
        if (main)
          for (const Segment& seg : segs) writers[{seg.key, seg.global_offset}].push_back(static_cast<std::int64_t>(r));
      } else if (const auto* o = std::get_if<ShardedObject>(&e.entry)) {
        objects[e.path] = "oracle-object|" + o->key + "|" + offset_text(o->global_offset);
      }
    }
    IH_TRY_STATUS(write_json(dir / ("save_rank_" + std::to_string(r) + ".json"),
                             Json{{"kind", to_string(s.kind)},
                                  {"model", real_model_json(true, static_cast<std::int64_t>(r))},
                                  {"entries", json::entries_to_json(save_entries[r])},
                                  {"fill", fill},
                                  {"gtp_params", gtp_params},
                                  {"reference_rows", reference_rows},
                                  {"objects", objects}}));
  }
  Json expected_writers = Json::array();
  for (const auto& [chunk, ranks] : writers) {
    if (ranks.size() != 1)
      return make_error(seam_kind::harness_error, "plan bug: " + std::to_string(ranks.size()) + " main replicas of " +
                                                      chunk.first + " at [" + offset_text(chunk.second) + "]");
    Json writer = Json::array({chunk.first, chunk.second, ranks[0]});
    if (s.load_path == LoadPath::training) writer.push_back(holders[chunk]);
    expected_writers.push_back(std::move(writer));
  }
  stats.expected_writers = static_cast<std::int64_t>(expected_writers.size());

  // Load world: the hybrid entries, the reference retarget, and per path what it must hold.
  std::map<std::string, std::int64_t> fresh_id;
  Json fresh_keys = Json::array();
  // GPT key -> which global elements some rank reads (an alias's are its source key's).
  std::map<std::string, std::vector<char>> covered;
  for (const auto& [key, shape] : gpt_shapes)
    if (source_key(key) == key) covered[key].assign(static_cast<std::size_t>(numel(shape)), 0);
  for (std::int64_t r = 0; r < s.load.ranks(); ++r) {
    IH_TRY_ASSIGN(entries, rank_entries(false, r));
    IH_TRY_ASSIGN(retargeted_tree, unflatten(entries));
    if (maps)
      if (auto st = retarget_sharded_state_dict(retargeted_tree, *maps); !st.ok())
        return st.error().with_context("scenario '" + s.name + "', reference retarget of load rank " +
                                       std::to_string(r));
    const std::vector<FlatEntry> retargeted = flatten(retargeted_tree);
    std::map<std::string, const Leaf*> after;
    for (const FlatEntry& e : retargeted) after[e.path] = &e.entry;

    Json prefill = Json::object(), objects = Json::object(), gtp_params = Json::object(),
         reference_rows = Json::array(), oracle_tensors = Json::array(), oracle_objects = Json::array(),
         oracle_plain = Json::array();
    for (const FlatEntry& e : entries) {
      const Leaf* post = after.count(e.path) ? after[e.path] : nullptr;
      const bool fresh = post && std::holds_alternative<LocalNonpersistent>(*post) &&
                         !std::holds_alternative<LocalNonpersistent>(e.entry);
      const auto fresh_segments = [&](const std::vector<Segment>& segs) {
        Json list = Json::array();
        for (const Segment& seg : segs) {
          // Fresh ids follow the GPT keys' (a value says which by the catalogue's lists).
          const std::string key = source_key(seg.key);
          auto [it, added] = fresh_id.emplace(key, stats.gpt_keys + 1 + static_cast<std::int64_t>(fresh_id.size()));
          if (added) fresh_keys.push_back(Json{{"id", it->second}, {"key", key}, {"global_shape", seg.global_shape}});
          list.push_back(segment_json(seg, it->second));
          max_numel = std::max(max_numel, numel(seg.global_shape));
        }
        return list;
      };
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        Json segs;
        IH_TRY_ASSIGN(padded, gtp_padded(false, r, *t));
        IH_TRY_ASSIGN(pre_segs, tensor_segments(false, r, *t));
        if (fresh) {
          segs = fresh_segments(pre_segs);
          prefill[e.path] = segs;
        } else {
          const auto* pt = post ? std::get_if<ShardedTensor>(post) : nullptr;
          if (!pt) return make_error(seam_kind::harness_error, "reference retarget dropped " + e.path);
          IH_TRY_ASSIGN(id, id_of(pt->key));
          segs = Json::array();
          for (const Segment& seg : padded ? pre_segs : std::vector<Segment>{whole_tensor(*pt)})
            segs.push_back(segment_json(padded ? retargeted_segment(seg, whole_tensor(*pt)) : seg, id));
          prefill[e.path] = "sentinel";
        }
        oracle_tensors.push_back(
            Json{{"path", e.path}, {"local_shape", t->local_shape}, {"segments", segs}, {"fresh", fresh}});
      } else if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        Json segs;
        IH_TRY_ASSIGN(rows, factory_rows(false, r, *f));
        if (fresh) {
          segs = fresh_segments(rows.segments);
          prefill[e.path] = segs;
        } else {
          const auto* pf = post ? std::get_if<ShardedTensorFactory>(post) : nullptr;
          if (!pf) return make_error(seam_kind::harness_error, "reference retarget dropped factory " + e.path);
          if (rows.gtp_param && pf->key != f->key)
            return make_error(seam_kind::unsupported, "the GTP in_proj " + f->key + " retargeted to " + pf->key);
          IH_TRY_ASSIGN(post_segs, factory_segments(*pf));
          if (rows.gtp_window && post_segs.empty())
            return make_error(seam_kind::harness_error, "reference retarget built nothing of factory " + e.path);
          segs = Json::array();
          for (const Segment& pre : rows.gtp_window || rows.gtp_param ? rows.segments : post_segs) {
            const Segment seg = rows.gtp_window ? retargeted_segment(pre, post_segs.front()) : pre;
            IH_TRY_ASSIGN(id, id_of(seg.key));
            segs.push_back(segment_json(seg, id));
          }
          prefill[e.path] = "sentinel";
        }
        IH_TRY_ASSIGN(local_shape, factory_local_shape(*f));
        if (rows.gtp_param) gtp_params[e.path] = local_shape = *rows.gtp_param;
        if (rows.gtp_window) reference_rows.push_back(e.path);
        oracle_tensors.push_back(
            Json{{"path", e.path}, {"local_shape", local_shape}, {"segments", segs}, {"fresh", fresh}});
      } else if (const auto* o = std::get_if<ShardedObject>(&e.entry)) {
        const std::string pre = "hybrid-preload|" + o->key + "|" + offset_text(o->global_offset);
        objects[e.path] = pre;
        std::string want = pre;
        if (!fresh) {
          const auto* po = post ? std::get_if<ShardedObject>(post) : nullptr;
          if (!po) return make_error(seam_kind::harness_error, "reference retarget dropped object " + e.path);
          want = "oracle-object|" + po->key + "|" + offset_text(po->global_offset);
        }
        oracle_objects.push_back(Json{{"path", e.path}, {"expected", want}, {"fresh", fresh}});
      } else if (const auto* p = std::get_if<PlainValue>(&e.entry)) {
        oracle_plain.push_back(Json{{"path", e.path}, {"expected", p->repr}});
      }
      // Coverage: which saved elements this rank reads.
      for (const auto& seg : oracle_tensors.empty() || oracle_tensors.back()["path"] != e.path || fresh
                                 ? Json::array()
                                 : oracle_tensors.back()["segments"]) {
        const std::int64_t id = seg[2].get<std::int64_t>();
        const std::string& key = catalogue_keys[static_cast<std::size_t>(id - 1)]["key"].get_ref<const std::string&>();
        const Shape gshape = seg[3].get<Shape>(), goff = seg[4].get<Shape>();
        const std::int64_t p = seg[5].get<std::int64_t>(), rows = seg[1].get<std::int64_t>();
        const Shape local = oracle_tensors.back()["local_shape"].get<Shape>();
        // Walk the local block's elements (small model: at most a few hundred thousand).
        Shape idx(local.size(), 0);
        const std::int64_t inner = local.empty() ? 1 : numel(Shape(local.begin() + 1, local.end()));
        std::vector<char>& bits = covered[key];
        for (std::int64_t row = 0; row < rows; ++row)
          for (std::int64_t k = 0; k < inner; ++k) {
            std::int64_t rem = k, lin = 0;
            Shape g = goff;
            if (!local.empty()) {
              g[static_cast<std::size_t>(p)] += row;
              for (std::size_t d = local.size(); d-- > 1;) {
                g[static_cast<std::size_t>(p) + d] += rem % local[d];
                rem /= local[d];
              }
            }
            for (std::size_t d = 0; d < gshape.size(); ++d) lin = lin * gshape[d] + g[d];
            if (lin >= 0 && lin < static_cast<std::int64_t>(bits.size())) bits[static_cast<std::size_t>(lin)] = 1;
            ++stats.expected_elements;
          }
      }
    }
    const std::string rank = std::to_string(r);
    IH_TRY_STATUS(write_json(dir / ("load_rank_" + rank + ".json"), Json{{"kind", to_string(s.kind)},
                                                                         {"model", real_model_json(false, r)},
                                                                         {"entries", json::entries_to_json(entries)},
                                                                         {"prefill", prefill},
                                                                         {"gtp_params", gtp_params},
                                                                         {"reference_rows", reference_rows},
                                                                         {"objects", objects}}));
    IH_TRY_STATUS(write_json(
        dir / ("oracle_rank_" + rank + ".json"),
        Json{{"rank", r}, {"tensors", oracle_tensors}, {"objects", oracle_objects}, {"plain", oracle_plain}}));
  }
  for (const auto& [key, bits] : covered) stats.uncovered_elements += std::count(bits.begin(), bits.end(), 0);
  // Plain values the save world writes (the loaded common state must equal them).
  Json saved_plain = Json::object();
  for (const FlatEntry& e : save_entries[0])
    if (const auto* p = std::get_if<PlainValue>(&e.entry)) saved_plain[e.path] = p->repr;
  IH_TRY_ASSIGN(encoding, oracle_encoding(s.distributed_optimizer() ? OracleDtype::float32 : OracleDtype::float64,
                                          max_numel, stats.gpt_keys + static_cast<std::int64_t>(fresh_id.size())));
  IH_TRY_STATUS(write_json(dir / "catalogue.json", Json{{"oracle", oracle_json(encoding)},
                                                        {"keys", catalogue_keys},
                                                        {"fresh_keys", fresh_keys},
                                                        {"aliases", aliases},
                                                        {"writers", expected_writers},
                                                        {"saved_plain", saved_plain},
                                                        {"uncovered_elements", stats.uncovered_elements}}));
  return stats;
}

}  // namespace ih
