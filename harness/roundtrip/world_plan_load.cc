// The load world's plan and the load oracle: each load rank's hybrid entries are retargeted with the reference
// retarget, and what each entry must hold afterwards is read off the retargeted entry (the saved key's segments,
// a fresh entry's own values, an object's oracle string, a common value). Which saved elements the load ranks
// read is counted as it goes: every one must be read by some rank.
#include <algorithm>

#include "harness/roundtrip/plan_writers.h"
#include "models/retarget.h"

namespace ih {
namespace {

using json::Json;

/// What one load rank is given (prefill, gtp_params, reference_rows, objects: as its save rank's fill) and what
/// the verifier expects of it (the oracle's tensors, objects and common values).
struct LoadRankPlan {
  Json prefill = Json::object(), objects = Json::object(), gtp_params = Json::object(), reference_rows = Json::array();
  Json oracle_tensors = Json::array(), oracle_objects = Json::array(), oracle_plain = Json::array();
};

/// One entry of a load rank as the plan sees it: before the retarget, after it (nullptr: dropped), and whether
/// the retarget kept it fresh (a layer the GPT checkpoint has no state for).
struct LoadEntry {
  const FlatEntry& before;
  const Leaf* after;
  bool fresh;
};

/// The planner and the catalogue a load rank's plan reads, the shared oracle it adds to, and the rank.
struct LoadContext {
  const ScenarioPlanner& planner;
  const SavedKeys& saved;
  LoadOracle& oracle;
  std::int64_t rank;
};

/// The rank's entries after the reference retarget, by path.
Result<std::map<std::string, Leaf>> retargeted(const LoadContext& c, const std::vector<FlatEntry>& entries) {
  IH_TRY_ASSIGN(tree, unflatten(entries));
  if (const auto& maps = c.planner.maps())
    if (auto st = retarget_sharded_state_dict(tree, *maps); !st.ok())
      return st.error().with_context("scenario '" + c.planner.scenario().name + "', reference retarget of load rank " +
                                     std::to_string(c.rank));
  std::map<std::string, Leaf> out;
  for (FlatEntry& e : flatten(tree)) out.emplace(std::move(e.path), std::move(e.entry));
  return out;
}

/// A fresh entry's segments, under fresh key ids: they follow the saved keys' (aliases counted; a value says
/// which by the catalogue's lists).
Json fresh_segments(const LoadContext& c, const std::vector<Segment>& segs) {
  Json list = Json::array();
  LoadOracle& o = c.oracle;
  for (const Segment& seg : segs) {
    const std::string key = c.planner.source_key(seg.key);
    const auto [it, added] = o.fresh_ids.emplace(
        key, static_cast<std::int64_t>(c.saved.shapes.size()) + 1 + static_cast<std::int64_t>(o.fresh_ids.size()));
    if (added) o.fresh_keys.push_back(Json{{"id", it->second}, {"key", key}, {"global_shape", seg.global_shape}});
    list.push_back(segment_json(seg, it->second));
    o.max_numel = std::max(o.max_numel, numel(seg.global_shape));
  }
  return list;
}

Result<Json> loaded_tensor_segments(const LoadContext& c, const LoadEntry& e, const ShardedTensor& t) {
  IH_TRY_ASSIGN(padded, c.planner.padded_rows(Side::load, c.rank, t));
  IH_TRY_ASSIGN(pre_segs, c.planner.tensor_segments(Side::load, c.rank, t));
  if (e.fresh) return fresh_segments(c, pre_segs);
  const auto* pt = e.after ? std::get_if<ShardedTensor>(e.after) : nullptr;
  if (!pt) return make_error(seam_kind::harness_error, "reference retarget dropped " + e.before.path);
  IH_TRY_ASSIGN(id, c.saved.id_of(c.planner, pt->key));
  Json segs = Json::array();
  for (const Segment& seg : padded ? pre_segs : std::vector<Segment>{whole_tensor(*pt)})
    segs.push_back(segment_json(padded ? retargeted_segment(seg, whole_tensor(*pt)) : seg, id));
  return segs;
}

Status plan_loaded_tensor(const LoadContext& c, const LoadEntry& e, const ShardedTensor& t, LoadRankPlan& plan) {
  IH_TRY_ASSIGN(segs, loaded_tensor_segments(c, e, t));
  plan.prefill[e.before.path] = e.fresh ? segs : Json("sentinel");
  plan.oracle_tensors.push_back(
      Json{{"path", e.before.path}, {"local_shape", t.local_shape}, {"segments", segs}, {"fresh", e.fresh}});
  return Ok{};
}

/// A retargeted factory's segments: a GTP in_proj keeps its parameter's rows (its key must not change), a SwiGLU
/// fc1's window moves with the factory's first piece, any other factory holds what it builds after the retarget.
Result<Json> loaded_factory_segments(const LoadContext& c, const LoadEntry& e, const ShardedTensorFactory& f,
                                     const FactoryRows& rows) {
  if (e.fresh) return fresh_segments(c, rows.segments);
  const auto* pf = e.after ? std::get_if<ShardedTensorFactory>(e.after) : nullptr;
  if (!pf) return make_error(seam_kind::harness_error, "reference retarget dropped factory " + e.before.path);
  if (rows.gtp_param && pf->key != f.key)
    return make_error(seam_kind::unsupported, "the GTP in_proj " + f.key + " retargeted to " + pf->key);
  IH_TRY_ASSIGN(post_segs, factory_segments(*pf));
  if (rows.gtp_window && post_segs.empty())
    return make_error(seam_kind::harness_error, "reference retarget built nothing of factory " + e.before.path);
  Json segs = Json::array();
  for (const Segment& pre : rows.gtp_window || rows.gtp_param ? rows.segments : post_segs) {
    const Segment seg = rows.gtp_window ? retargeted_segment(pre, post_segs.front()) : pre;
    IH_TRY_ASSIGN(id, c.saved.id_of(c.planner, seg.key));
    segs.push_back(segment_json(seg, id));
  }
  return segs;
}

Status plan_loaded_factory(const LoadContext& c, const LoadEntry& e, const ShardedTensorFactory& f,
                           LoadRankPlan& plan) {
  const std::string& path = e.before.path;
  IH_TRY_ASSIGN(rows, c.planner.factory_rows(Side::load, c.rank, f));
  IH_TRY_ASSIGN(segs, loaded_factory_segments(c, e, f, rows));
  plan.prefill[path] = e.fresh ? segs : Json("sentinel");
  IH_TRY_ASSIGN(local_shape, factory_local_shape(f));
  if (rows.gtp_param) plan.gtp_params[path] = local_shape = *rows.gtp_param;
  if (rows.gtp_window) plan.reference_rows.push_back(path);
  plan.oracle_tensors.push_back(
      Json{{"path", path}, {"local_shape", local_shape}, {"segments", segs}, {"fresh", e.fresh}});
  return Ok{};
}

/// The object a loaded (not fresh) object reads after the reference retarget.
Result<const ShardedObject*> retargeted_object(const LoadEntry& e) {
  const auto* po = e.after ? std::get_if<ShardedObject>(e.after) : nullptr;
  if (!po) return make_error(seam_kind::harness_error, "reference retarget dropped object " + e.before.path);
  return po;
}

/// An object carrying Megatron's own value is left in place; afterwards it holds what the save world's object of
/// its retarget key carried (no "expected" where no save rank saved that key), a fresh one its own value.
Status plan_loaded_carried(const LoadContext& c, const LoadEntry& e, const ShardedObject& o, LoadRankPlan& plan) {
  plan.objects[e.before.path] = nullptr;
  Json want{{"path", e.before.path}, {"carried", true}, {"fresh", e.fresh}};
  const std::string* value = &std::get<CarriedValue>(*o.data).json;
  if (!e.fresh) {
    IH_TRY_ASSIGN(po, retargeted_object(e));
    want["key"] = po->unique_key();
    const auto saved = c.saved.carried.find(po->unique_key());
    value = saved == c.saved.carried.end() ? nullptr : &saved->second;
  }
  if (value) {
    IH_TRY_ASSIGN(expected, json::parse(*value));
    want["expected"] = std::move(expected);
  }
  plan.oracle_objects.push_back(std::move(want));
  return Ok{};
}

Status plan_loaded_object(const LoadContext& c, const LoadEntry& e, const ShardedObject& o, LoadRankPlan& plan) {
  if (carries_value(o)) return plan_loaded_carried(c, e, o, plan);
  const std::string pre = "hybrid-preload|" + o.key + "|" + offset_text(o.global_offset);
  plan.objects[e.before.path] = pre;
  std::string want = pre;
  if (!e.fresh) {
    IH_TRY_ASSIGN(po, retargeted_object(e));
    want = oracle_object_text(*po);
  }
  plan.oracle_objects.push_back(Json{{"path", e.before.path}, {"expected", want}, {"fresh", e.fresh}});
  return Ok{};
}

/// Marks which saved elements the oracle tensor last planned reads (a fresh one reads none) and counts them.
void cover(const LoadContext& c, const Json& tensor) {
  for (const Json& seg : tensor["segments"]) {
    std::vector<char>& bits = c.oracle.covered[c.saved.key_of(seg[2].get<std::int64_t>())];
    c.oracle.expected_elements += mark_covered(bits, seg, tensor["local_shape"].get<Shape>());
  }
}

Status plan_loaded_entry(const LoadContext& c, const LoadEntry& e, LoadRankPlan& plan) {
  const Leaf& leaf = e.before.entry;
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) {
    IH_TRY_STATUS(plan_loaded_tensor(c, e, *t, plan));
  } else if (const auto* f = std::get_if<ShardedTensorFactory>(&leaf)) {
    IH_TRY_STATUS(plan_loaded_factory(c, e, *f, plan));
  } else if (const auto* o = std::get_if<ShardedObject>(&leaf)) {
    return plan_loaded_object(c, e, *o, plan);
  } else if (const auto* p = std::get_if<PlainValue>(&leaf)) {
    plan.oracle_plain.push_back(Json{{"path", e.before.path}, {"expected", p->repr}});
    return Ok{};
  } else {
    return Ok{};
  }
  if (!e.fresh) cover(c, plan.oracle_tensors.back());
  return Ok{};
}

Result<LoadRankPlan> load_rank_plan(const LoadContext& c, const std::vector<FlatEntry>& entries) {
  IH_TRY_ASSIGN(after, retargeted(c, entries));
  LoadRankPlan plan;
  for (const FlatEntry& before : entries) {
    const auto found = after.find(before.path);
    const Leaf* post = found == after.end() ? nullptr : &found->second;
    const bool fresh = post && std::holds_alternative<LocalNonpersistent>(*post) &&
                       !std::holds_alternative<LocalNonpersistent>(before.entry);
    IH_TRY_STATUS(plan_loaded_entry(c, {before, post, fresh}, plan));
  }
  return plan;
}

}  // namespace

Status write_load_ranks(const ScenarioPlanner& planner, const SavedKeys& saved, LoadOracle& oracle,
                        const std::filesystem::path& dir) {
  // A DistributedOptimizer's own states after its load_state_dict (past finding F) are held to the same oracle as
  // what Megatron's load returned (docs/roundtrip.md, "The DistributedOptimizer"); load_checkpoint's are not dumped.
  const bool after_load_state_dict =
      planner.scenario().distributed_optimizer() && planner.scenario().load_path != LoadPath::training;
  for (std::int64_t r = 0; r < planner.ranks(Side::load); ++r) {
    IH_TRY_ASSIGN(entries, planner.rank_entries(Side::load, r));
    IH_TRY_ASSIGN(plan, load_rank_plan({planner, saved, oracle, r}, entries));
    const std::string rank = std::to_string(r);
    IH_TRY_STATUS(
        write_plan_file(dir / ("load_rank_" + rank + ".json"), Json{{"kind", to_string(planner.scenario().kind)},
                                                                    {"model", planner.model_json(Side::load, r)},
                                                                    {"entries", json::entries_to_json(entries)},
                                                                    {"prefill", plan.prefill},
                                                                    {"gtp_params", plan.gtp_params},
                                                                    {"reference_rows", plan.reference_rows},
                                                                    {"objects", plan.objects}}));
    IH_TRY_STATUS(write_plan_file(
        dir / ("oracle_rank_" + rank + ".json"),
        Json{{"rank", r},
             {"tensors", plan.oracle_tensors},
             {"objects", plan.oracle_objects},
             {"plain", plan.oracle_plain},
             {"optimizer_after_load_state_dict", after_load_state_dict},
             {"param_groups_after_load_checkpoint", planner.scenario().param_groups_after_load_checkpoint()}}));
  }
  return Ok{};
}

}  // namespace ih
