// The plan of the GDP in_proj under GTP (kind gdp_gtp): the mixer's state is built by Megatron's own code in
// the workers (roundtrip_world.py's stand-in); the plan gives each rank the segments of its GTP shard, and each
// save rank what its design writes (the gathered chunks, one main replica, or its own pieces).
#include <algorithm>
#include <map>

#include "harness/roundtrip/plan_writers.h"
#include "models/gdp_layout.h"

namespace ih {
namespace {

using json::Json;
namespace fs = std::filesystem;

constexpr const char* kInProjKey = "decoder.layers.0.mixer.in_proj.weight";

/// The TP-local sections of the in_proj: d_inner 8, ngroups x d_state 4, 2 heads, one Householder, over TP.
Result<SplitLayout> in_proj_layout(const GtpWorld& w) {
  GdpDims dims;
  dims.d_inner_local = 8 / w.tp, dims.group_state_local = 4 / w.tp, dims.nheads_local = 2 / w.tp, dims.householder = 1;
  return gdp_in_proj_layout(dims);
}

struct GtpRank {
  std::vector<Segment> shard;  // the (R, C) shard's rows
  Shape shard_shape;
  std::vector<Segment> written;  // what the rank's save writes: the gathered (D, C) rows, or its pieces
  bool main_replica = false;
};

/// The shard-split pieces of `params` (spec 4.7), which each GTP rank writes itself.
Result<ShardedTensorFactory> shard_split_pieces(GtpFactoryParams params) {
  params.replica_id = ReplicaId::tuple({0, 0, 0});  // the shard's id: rank in the GTP-excluded DP group (DP = 1)
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  params.shard = TensorValue::of_storage(1, {padding.shard_rows, params.cols});
  return make_gtp_factory(GtpSaveDesign::shard_split, params);
}

Result<GtpRank> gtp_rank(const GtpWorld& w, std::int64_t cols, std::int64_t rank) {
  IH_TRY_ASSIGN(layout, in_proj_layout(w));
  GtpFactoryParams params;
  params.key = kInProjKey;
  params.layout = layout;
  params.tp_size = w.tp, params.tp_rank = rank / w.gtp;
  params.gtp_size = w.gtp, params.gtp_rank = rank % w.gtp;
  params.pad_alignment = w.pad_alignment;
  params.cols = cols;
  params.replica_id = ReplicaId::tuple({0, 0, params.gtp_rank});  // rank in the GTP-inclusive dp_cp group
  // The shard's rows are the gathered rows' window whatever the design saves; what each rank writes
  // is the design's: the gathered chunks (one main replica) or its own pieces (each GTP rank).
  IH_TRY_ASSIGN(g, gathered_shard(params));
  GtpRank out{g.shard, g.shard_shape, g.gathered, g.factory.replica_id.is_main()};
  if (w.design == GtpSaveDesign::gather) return out;
  IH_TRY_ASSIGN(pieces, shard_split_pieces(params));
  IH_TRY_ASSIGN(written, factory_segments(pieces));
  out.written = written;
  out.main_replica = pieces.replica_id.is_main();
  return out;
}

Json gtp_json(const GtpWorld& w) {
  return Json{{"tp", w.tp}, {"gtp", w.gtp}, {"pad_for_alignment", w.pad_alignment}, {"design", to_string(w.design)}};
}

Result<Json> layout_json(const GtpWorld& w, std::int64_t cols) {
  IH_TRY_ASSIGN(layout, in_proj_layout(w));
  return Json{
      {"sections", layout.sections}, {"names", layout.names}, {"cols", cols}, {"pad_for_alignment", w.pad_alignment}};
}

/// What the save world writes: each rank's shard, the saved keys (ids from 1 in key order) and their writers.
struct GtpSaved {
  std::vector<GtpRank> ranks;
  std::map<std::string, Shape> shapes;
  std::map<Chunk, std::vector<std::int64_t>> writers;
  std::map<std::string, std::int64_t> key_id;
  Json catalogue_keys = Json::array();
};

Result<GtpSaved> gtp_saved(const WorldScenario& s) {
  GtpSaved out;
  for (std::int64_t r = 0; r < s.gtp_save.ranks(); ++r) {
    IH_TRY_ASSIGN(g, gtp_rank(s.gtp_save, s.gdp_cols, r));
    for (const Segment& seg : g.written) {
      out.shapes.emplace(seg.key, seg.global_shape);
      if (g.main_replica) out.writers[{seg.key, seg.global_offset}].push_back(r);
    }
    out.ranks.push_back(std::move(g));
  }
  for (const auto& [key, shape] : out.shapes) {
    out.key_id[key] = static_cast<std::int64_t>(out.key_id.size()) + 1;
    out.catalogue_keys.push_back(Json{{"id", out.key_id[key]}, {"key", key}, {"global_shape", shape}});
  }
  return out;
}

Result<Json> segments_json(const GtpSaved& saved, const std::vector<Segment>& segs) {
  Json list = Json::array();
  for (const Segment& seg : segs) {
    auto it = saved.key_id.find(seg.key);
    if (it == saved.key_id.end()) return make_error(seam_kind::harness_error, "GTP key '" + seg.key + "' is not saved");
    list.push_back(segment_json(seg, it->second));
  }
  return list;
}

Status write_save_ranks(const WorldScenario& s, const GtpSaved& saved, const fs::path& dir) {
  IH_TRY_ASSIGN(layout, layout_json(s.gtp_save, s.gdp_cols));
  for (std::size_t r = 0; r < saved.ranks.size(); ++r) {
    IH_TRY_ASSIGN(fill, segments_json(saved, saved.ranks[r].shard));
    IH_TRY_STATUS(write_plan_file(dir / ("save_rank_" + std::to_string(r) + ".json"),
                                  Json{{"kind", to_string(ScenarioKind::gdp_gtp)},
                                       {"gtp", gtp_json(s.gtp_save)},
                                       {"layout", layout},
                                       {"fill", Json{{kInProjKey, fill}}}}));
  }
  return Ok{};
}

/// Writes each load rank's plan and oracle; counts the elements they hold and marks which saved ones they read.
Status write_load_ranks(const WorldScenario& s, const GtpSaved& saved, const fs::path& dir, WorldPlanStats& stats,
                        std::map<std::string, std::vector<char>>& covered) {
  IH_TRY_ASSIGN(layout, layout_json(s.gtp_load, s.gdp_cols));
  for (std::int64_t r = 0; r < s.gtp_load.ranks(); ++r) {
    IH_TRY_ASSIGN(g, gtp_rank(s.gtp_load, s.gdp_cols, r));
    IH_TRY_ASSIGN(segs, segments_json(saved, g.shard));
    for (std::size_t i = 0; i < g.shard.size(); ++i) mark_covered(covered[g.shard[i].key], segs[i], g.shard_shape);
    stats.expected_elements += numel(g.shard_shape);
    IH_TRY_STATUS(write_plan_file(
        dir / ("load_rank_" + std::to_string(r) + ".json"),
        Json{{"kind", to_string(ScenarioKind::gdp_gtp)}, {"gtp", gtp_json(s.gtp_load)}, {"layout", layout}}));
    const Json tensor{{"path", kInProjKey}, {"local_shape", g.shard_shape}, {"segments", segs}, {"fresh", false}};
    IH_TRY_STATUS(write_plan_file(
        dir / ("oracle_rank_" + std::to_string(r) + ".json"),
        Json{{"rank", r}, {"tensors", Json::array({tensor})}, {"objects", Json::array()}, {"plain", Json::array()}}));
  }
  return Ok{};
}

}  // namespace

Result<WorldPlanStats> write_gdp_gtp_scenario(const WorldScenario& s, const fs::path& dir) {
  IH_TRY_STATUS(create_plan_dir(dir));
  IH_TRY_ASSIGN(saved, gtp_saved(s));
  WorldPlanStats stats;
  std::int64_t max_numel = 0;
  std::map<std::string, std::vector<char>> covered;
  for (const auto& [key, shape] : saved.shapes) {
    stats.saved_elements += numel(shape);
    max_numel = std::max(max_numel, numel(shape));
    covered[key].assign(static_cast<std::size_t>(numel(shape)), 0);
  }
  stats.gpt_keys = static_cast<std::int64_t>(saved.shapes.size());
  IH_TRY_STATUS(write_save_ranks(s, saved, dir));
  IH_TRY_STATUS(write_load_ranks(s, saved, dir, stats, covered));
  for (const auto& [key, bits] : covered) stats.uncovered_elements += std::count(bits.begin(), bits.end(), 0);
  IH_TRY_ASSIGN(writers, expected_writers_json(saved.writers));
  stats.expected_writers = static_cast<std::int64_t>(writers.size());
  IH_TRY_ASSIGN(encoding, oracle_encoding(OracleDtype::float64, max_numel, stats.gpt_keys));
  IH_TRY_STATUS(write_catalogue(dir, {encoding, saved.catalogue_keys, Json::array(), Json::array(), writers,
                                      Json::object(), stats.uncovered_elements}));
  return stats;
}

}  // namespace ih
