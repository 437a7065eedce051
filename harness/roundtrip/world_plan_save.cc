// The save world's plan: what each save rank fills into each of its entries (segments of the saved keys, the
// oracle strings of its objects), and which rank must write each saved chunk.
#include <algorithm>

#include "harness/roundtrip/plan_writers.h"
#include "harness/roundtrip/stored_layout.h"

namespace ih {
namespace {

using json::Json;

/// The chunks of the save world: who holds each one's main replica, and who holds it at all.
struct SaveWriters {
  std::map<Chunk, std::vector<std::int64_t>> main_replicas;
  std::map<Chunk, std::set<std::int64_t>> holders;
  /// Rows of the saved keys the reference lays out otherwise than the real model's description (stored_layout.h).
  std::vector<StoredRemap> remaps;
  /// The id whose values each saved key holds, a distributed optimizer's `param` states' included (the remaps').
  std::map<std::string, std::int64_t> ids;
};

/// What one save rank fills: per path its segments (fill), the paths whose segments fill the model's parameter (a
/// GTP shard of this shape, gtp_params) rather than the sharded state dict's tensor, the paths whose rows come from
/// the reference (reference_rows: the worker skips its pieces check there), and its objects' oracle strings (null:
/// the object carries Megatron's own value, left in place).
struct SaveRankPlan {
  Json fill = Json::object(), objects = Json::object(), gtp_params = Json::object(), reference_rows = Json::array();
};

Result<Json> segments_json(const ScenarioPlanner& planner, const SavedKeys& saved, const std::vector<Segment>& segs) {
  Json list = Json::array();
  for (const Segment& seg : segs) {
    IH_TRY_ASSIGN(id, saved.id_of(planner, seg.key));
    list.push_back(segment_json(seg, id));
  }
  return list;
}

Status plan_saved_tensor(const ScenarioPlanner& planner, const SavedKeys& saved, std::int64_t r, const FlatEntry& e,
                         const ShardedTensor& t, SaveRankPlan& plan, SaveWriters& writers) {
  IH_TRY_ASSIGN(id, saved.id_of(planner, t.key));
  IH_TRY_ASSIGN(segs, planner.tensor_segments(Side::save, r, t));
  plan.fill[e.path] = Json::array();
  for (const Segment& seg : segs) plan.fill[e.path].push_back(segment_json(seg, id));
  if (t.is_main_replica()) writers.main_replicas[{t.key, t.global_offset}].push_back(r);
  writers.holders[{t.key, t.global_offset}].insert(r);
  return Ok{};
}

Status plan_saved_factory(const ScenarioPlanner& planner, const SavedKeys& saved, std::int64_t r, const FlatEntry& e,
                          const ShardedTensorFactory& f, SaveRankPlan& plan, SaveWriters& writers) {
  IH_TRY_ASSIGN(chunks, factory_segments(f));  // the chunks Megatron's save writes
  for (const Segment& seg : chunks) writers.holders[{seg.key, seg.global_offset}].insert(r);
  IH_TRY_ASSIGN(rows, planner.factory_rows(Side::save, r, f));
  IH_TRY_ASSIGN(fill, segments_json(planner, saved, rows.segments));
  plan.fill[e.path] = fill;
  if (rows.gtp_param) plan.gtp_params[e.path] = *rows.gtp_param;
  if (rows.gtp_window) plan.reference_rows.push_back(e.path);
  IH_TRY_ASSIGN(main, factory_is_main(f));
  if (main)
    for (const Segment& seg : chunks) writers.main_replicas[{seg.key, seg.global_offset}].push_back(r);
  // A real factory laid out as described: its rows are remapped where the reference stores them otherwise (its
  // split factories against the reference's build of the same factory, a SwiGLU fc1 by its halves).
  if (main && !f.data && !rows.gtp_param && !rows.gtp_window) {
    IH_TRY_ASSIGN(local, factory_local_shape(f));
    const Shape row_tail(local.empty() ? local.end() : local.begin() + 1, local.end());
    IH_TRY_ASSIGN(reference, planner.reference_split_rows(Side::save, r, f));
    std::vector<StoredRemap> remaps;
    if (reference) {
      auto split = reference_remaps(rows.segments, *reference, row_tail, writers.ids);
      if (!split.ok()) return split.error().with_context("factory " + f.key + " of save rank " + std::to_string(r));
      remaps = std::move(split).value();
    } else {
      remaps = swiglu_reference_remaps(rows.segments, row_tail, writers.ids);
    }
    for (StoredRemap& m : remaps)
      if (std::find(writers.remaps.begin(), writers.remaps.end(), m) == writers.remaps.end())
        writers.remaps.push_back(std::move(m));
  }
  return Ok{};
}

Result<SaveRankPlan> save_rank_plan(const ScenarioPlanner& planner, const SavedKeys& saved, std::int64_t r,
                                    const std::vector<FlatEntry>& entries, SaveWriters& writers) {
  SaveRankPlan plan;
  for (const FlatEntry& e : entries) {
    if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
      IH_TRY_STATUS(plan_saved_tensor(planner, saved, r, e, *t, plan, writers));
    } else if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
      IH_TRY_STATUS(plan_saved_factory(planner, saved, r, e, *f, plan, writers));
    } else if (const auto* o = std::get_if<ShardedObject>(&e.entry)) {
      plan.objects[e.path] = carries_value(*o) ? Json(nullptr) : Json(oracle_object_text(*o));
    }
  }
  return plan;
}

}  // namespace

Result<Json> write_save_ranks(const ScenarioPlanner& planner, const SavedKeys& saved,
                              const std::vector<std::vector<FlatEntry>>& save_entries,
                              const std::filesystem::path& dir) {
  const WorldScenario& s = planner.scenario();
  SaveWriters writers;
  for (const auto& [key, shape] : saved.shapes) {
    IH_TRY_ASSIGN(id, saved.id_of(planner, key));
    writers.ids[key] = id;
  }
  for (std::size_t i = 0; i < save_entries.size(); ++i) {
    const auto r = static_cast<std::int64_t>(i);
    IH_TRY_ASSIGN(plan, save_rank_plan(planner, saved, r, save_entries[i], writers));
    IH_TRY_STATUS(write_plan_file(dir / ("save_rank_" + std::to_string(r) + ".json"),
                                  Json{{"kind", to_string(s.kind)},
                                       {"model", planner.model_json(Side::save, r)},
                                       {"entries", json::entries_to_json(save_entries[i])},
                                       {"fill", plan.fill},
                                       {"gtp_params", plan.gtp_params},
                                       {"reference_rows", plan.reference_rows},
                                       {"objects", plan.objects}}));
  }
  IH_TRY_STATUS(write_plan_file(dir / "stored_layout.json", Json{{"remaps", remaps_json(writers.remaps)}}));
  // A fully parallel save hands each replicated chunk to one of the ranks holding it, so there the writer is any one
  // of the chunk's holders.
  return expected_writers_json(writers.main_replicas, s.saves_fully_parallel() ? &writers.holders : nullptr,
                               s.is_real() ? DescribedBy::megatron : DescribedBy::reference);
}

}  // namespace ih
