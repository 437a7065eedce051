#include "harness/roundtrip/world_plan.h"

#include <algorithm>
#include <fstream>
#include <map>
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
};

Json segment_json(const Segment& s, std::int64_t key_id) {
  return Json::array({s.begin, s.rows, key_id, s.global_shape, s.global_offset, s.prepend});
}

Segment whole_tensor(const ShardedTensor& t) {
  return {0, t.local_shape.empty() ? 1 : t.local_shape[0], t.key, t.global_shape, t.global_offset, t.prepend_axis_num};
}

/// Segments of a factory's local data: each built tensor's rows are views of the factory's data
/// (reference build), so row block b of built tensor x maps data rows [b.first_row, +b.rows) to
/// x's global rows from x.global_offset[p] + (rows of x before b). Zero blocks (padding) map
/// nothing: those rows are expected to be zero.
Result<std::vector<Segment>> factory_segments(const ShardedTensorFactory& f) {
  IH_TRY_ASSIGN(built, f.build());
  std::vector<Segment> out;
  for (const FlatEntry& e : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t) continue;
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

Shape factory_local_shape(const ShardedTensorFactory& f) { return f.data ? f.data->shape : Shape{}; }

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

constexpr std::pair<ScenarioKind, std::string_view> kScenarioKindNames[] = {{ScenarioKind::gpt_hybrid, "gpt_hybrid"},
                                                                            {ScenarioKind::gdp_gtp, "gdp_gtp"}};

}  // namespace

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
                        {"save", s->layout_text(true)},
                        {"load", s->layout_text(false)}});
  }
  return Json{{"device", device}, {"oracle", Json{{"key_shift", kOracleKeyShift}}}, {"scenarios", list}};
}

std::string WorldLayout::text() const {
  std::string s = "TP=" + std::to_string(tp) + " PP=" + std::to_string(pp);
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
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  params.shard = TensorValue::of_storage(1, {padding.shard_rows, cols});
  // The shard's rows are the gathered rows' window whatever the design saves; what each rank writes
  // is the design's: the gathered chunks (one main replica) or its own pieces (each GTP rank).
  IH_TRY_ASSIGN(gathered, make_gtp_factory(GtpSaveDesign::gather, params));
  IH_TRY_ASSIGN(full, factory_segments(gathered));
  GtpRank out;
  out.shard = window(full, params.gtp_rank * padding.shard_rows, padding.shard_rows);
  out.shard_shape = {padding.shard_rows, cols};
  if (w.design == GtpSaveDesign::gather) {
    out.written = full;
    out.main_replica = gathered.replica_id.is_main();
    return out;
  }
  params.replica_id = ReplicaId::tuple({0, 0, 0});  // the shard's id: rank in the GTP-excluded DP group (DP = 1)
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
  IH_TRY_STATUS(write_json(dir / "catalogue.json", Json{{"keys", catalogue_keys},
                                                        {"fresh_keys", Json::array()},
                                                        {"writers", expected_writers},
                                                        {"saved_plain", Json::object()},
                                                        {"uncovered_elements", stats.uncovered_elements}}));
  return stats;
}

}  // namespace

Result<WorldPlanStats> write_world_scenario(const WorldScenario& s, const std::filesystem::path& dir) {
  if (s.kind == ScenarioKind::gdp_gtp) return write_gdp_gtp_scenario(s, dir);
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(s.pattern));
  const std::int64_t layers = maps.num_gpt_layers;
  if (layers % s.save.pp != 0)
    return make_error(ErrorKind::invalid_argument, "scenario '" + s.name + "': " + std::to_string(layers) +
                                                       " GPT layers do not split over PP=" + std::to_string(s.save.pp));
  ModelConfig config = s.config;
  config.gated_mlp = s.gated;
  const OptimizerStates optimizer = s.optimizer ? OptimizerStates::adam() : OptimizerStates{};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());

  // Save world: entries, then the catalogue of GPT keys (ids from 1 in key order).
  std::vector<std::vector<FlatEntry>> save_entries;
  std::map<std::string, Shape> gpt_shapes;
  for (std::int64_t r = 0; r < s.save.ranks(); ++r) {
    const RankLayout l = s.save.rank_layout(r);
    auto tree = gpt_sharded_state_dict(config, layers, l, optimizer);
    if (!tree.ok())
      return tree.error().with_context("scenario '" + s.name + "', GPT state dict of save rank " + std::to_string(r));
    std::vector<FlatEntry> entries = flatten(*tree);
    set_dense_replicas(entries, s.save, l);
    for (const FlatEntry& e : entries) {
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) gpt_shapes.emplace(t->key, t->global_shape);
      if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        IH_TRY_ASSIGN(segs, factory_segments(*f));
        for (const Segment& seg : segs) gpt_shapes.emplace(seg.key, seg.global_shape);
      }
    }
    save_entries.push_back(std::move(entries));
  }
  std::map<std::string, std::int64_t> key_id;
  Json catalogue_keys = Json::array();
  for (const auto& [key, shape] : gpt_shapes) {
    key_id[key] = static_cast<std::int64_t>(key_id.size()) + 1;
    catalogue_keys.push_back(Json{{"id", key_id[key]}, {"key", key}, {"global_shape", shape}});
  }
  WorldPlanStats stats;
  stats.gpt_keys = static_cast<std::int64_t>(gpt_shapes.size());
  for (const auto& [key, shape] : gpt_shapes) stats.saved_elements += numel(shape);

  // Expected writers: every main-replica chunk, and the rank that holds it.
  std::map<std::pair<std::string, Shape>, std::vector<std::int64_t>> writers;
  const auto id_of = [&](const std::string& key) -> Result<std::int64_t> {
    auto it = key_id.find(key);
    if (it == key_id.end())
      return make_error(seam_kind::harness_error, "key '" + key + "' is not in the GPT catalogue");
    return it->second;
  };
  for (std::size_t r = 0; r < save_entries.size(); ++r) {
    Json fill = Json::object(), objects = Json::object();
    for (const FlatEntry& e : save_entries[r]) {
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        IH_TRY_ASSIGN(id, id_of(t->key));
        fill[e.path] = Json::array({segment_json(whole_tensor(*t), id)});
        if (t->is_main_replica()) writers[{t->key, t->global_offset}].push_back(static_cast<std::int64_t>(r));
      } else if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        IH_TRY_ASSIGN(segs, factory_segments(*f));
        Json list = Json::array();
        for (const Segment& seg : segs) {
          IH_TRY_ASSIGN(id, id_of(seg.key));
          list.push_back(segment_json(seg, id));
        }
        fill[e.path] = list;
        if (f->replica_id.is_main())
          for (const Segment& seg : segs) writers[{seg.key, seg.global_offset}].push_back(static_cast<std::int64_t>(r));
      } else if (const auto* o = std::get_if<ShardedObject>(&e.entry)) {
        objects[e.path] = "oracle-object|" + o->key + "|" + offset_text(o->global_offset);
      }
    }
    IH_TRY_STATUS(
        write_json(dir / ("save_rank_" + std::to_string(r) + ".json"),
                   Json{{"entries", json::entries_to_json(save_entries[r])}, {"fill", fill}, {"objects", objects}}));
  }
  Json expected_writers = Json::array();
  for (const auto& [chunk, ranks] : writers) {
    if (ranks.size() != 1)
      return make_error(seam_kind::harness_error, "plan bug: " + std::to_string(ranks.size()) + " main replicas of " +
                                                      chunk.first + " at [" + offset_text(chunk.second) + "]");
    expected_writers.push_back(Json::array({chunk.first, chunk.second, ranks[0]}));
  }
  stats.expected_writers = static_cast<std::int64_t>(expected_writers.size());

  // Load world: the hybrid entries, the reference retarget, and per path what it must hold.
  std::map<std::string, std::int64_t> fresh_id;
  Json fresh_keys = Json::array();
  std::map<std::string, std::vector<char>> covered;  // GPT key -> which global elements some rank reads
  for (const auto& [key, shape] : gpt_shapes) covered[key].assign(static_cast<std::size_t>(numel(shape)), 0);
  for (std::int64_t r = 0; r < s.load.ranks(); ++r) {
    const RankLayout l = s.load.rank_layout(r);
    auto tree = hybrid_sharded_state_dict(config, s.pattern, l, optimizer);
    if (!tree.ok())
      return tree.error().with_context("scenario '" + s.name + "', hybrid state dict of load rank " +
                                       std::to_string(r));
    std::vector<FlatEntry> entries = flatten(*tree);
    set_dense_replicas(entries, s.load, l);
    IH_TRY_ASSIGN(retargeted_tree, unflatten(entries));
    if (auto st = retarget_sharded_state_dict(retargeted_tree, maps); !st.ok())
      return st.error().with_context("scenario '" + s.name + "', reference retarget of load rank " + std::to_string(r));
    const std::vector<FlatEntry> retargeted = flatten(retargeted_tree);
    std::map<std::string, const Leaf*> after;
    for (const FlatEntry& e : retargeted) after[e.path] = &e.entry;

    Json prefill = Json::object(), objects = Json::object(), oracle_tensors = Json::array(),
         oracle_objects = Json::array(), oracle_plain = Json::array();
    for (const FlatEntry& e : entries) {
      const Leaf* post = after.count(e.path) ? after[e.path] : nullptr;
      const bool fresh = post && std::holds_alternative<LocalNonpersistent>(*post) &&
                         !std::holds_alternative<LocalNonpersistent>(e.entry);
      const auto fresh_segments = [&](const std::vector<Segment>& segs) {
        Json list = Json::array();
        for (const Segment& seg : segs) {
          auto [it, added] = fresh_id.emplace(seg.key, kOracleFreshIdBase + static_cast<std::int64_t>(fresh_id.size()));
          if (added)
            fresh_keys.push_back(Json{{"id", it->second}, {"key", seg.key}, {"global_shape", seg.global_shape}});
          list.push_back(segment_json(seg, it->second));
        }
        return list;
      };
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        Json segs;
        if (fresh) {
          segs = fresh_segments({whole_tensor(*t)});
          prefill[e.path] = segs;
        } else {
          const auto* pt = post ? std::get_if<ShardedTensor>(post) : nullptr;
          if (!pt) return make_error(seam_kind::harness_error, "reference retarget dropped " + e.path);
          IH_TRY_ASSIGN(id, id_of(pt->key));
          segs = Json::array({segment_json(whole_tensor(*pt), id)});
          prefill[e.path] = "sentinel";
        }
        oracle_tensors.push_back(
            Json{{"path", e.path}, {"local_shape", t->local_shape}, {"segments", segs}, {"fresh", fresh}});
      } else if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        Json segs;
        if (fresh) {
          IH_TRY_ASSIGN(pre_segs, factory_segments(*f));
          segs = fresh_segments(pre_segs);
          prefill[e.path] = segs;
        } else {
          const auto* pf = post ? std::get_if<ShardedTensorFactory>(post) : nullptr;
          if (!pf) return make_error(seam_kind::harness_error, "reference retarget dropped factory " + e.path);
          IH_TRY_ASSIGN(post_segs, factory_segments(*pf));
          segs = Json::array();
          for (const Segment& seg : post_segs) {
            IH_TRY_ASSIGN(id, id_of(seg.key));
            segs.push_back(segment_json(seg, id));
          }
          prefill[e.path] = "sentinel";
        }
        oracle_tensors.push_back(
            Json{{"path", e.path}, {"local_shape", factory_local_shape(*f)}, {"segments", segs}, {"fresh", fresh}});
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
    IH_TRY_STATUS(
        write_json(dir / ("load_rank_" + rank + ".json"),
                   Json{{"entries", json::entries_to_json(entries)}, {"prefill", prefill}, {"objects", objects}}));
    IH_TRY_STATUS(write_json(
        dir / ("oracle_rank_" + rank + ".json"),
        Json{{"rank", r}, {"tensors", oracle_tensors}, {"objects", oracle_objects}, {"plain", oracle_plain}}));
  }
  for (const auto& [key, bits] : covered) stats.uncovered_elements += std::count(bits.begin(), bits.end(), 0);
  // Plain values the save world writes (the loaded common state must equal them).
  Json saved_plain = Json::object();
  for (const FlatEntry& e : save_entries[0])
    if (const auto* p = std::get_if<PlainValue>(&e.entry)) saved_plain[e.path] = p->repr;
  IH_TRY_STATUS(write_json(dir / "catalogue.json", Json{{"keys", catalogue_keys},
                                                        {"fresh_keys", fresh_keys},
                                                        {"writers", expected_writers},
                                                        {"saved_plain", saved_plain},
                                                        {"uncovered_elements", stats.uncovered_elements}}));
  return stats;
}

}  // namespace ih
