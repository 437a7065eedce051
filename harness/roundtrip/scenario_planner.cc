// Where each rank's entries of a scenario come from, which rows each entry holds, and the catalogue of the keys
// the save world writes (plan_writers.h).
#include <algorithm>

#include "harness/roundtrip/plan_writers.h"
#include "harness/roundtrip/real_gtp_rows.h"

namespace ih {
namespace {

using json::Json;
using Rows = std::optional<std::vector<Segment>>;

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

std::string side_text(Side side) { return side == Side::save ? "save" : "load"; }

}  // namespace

Result<ScenarioPlanner> ScenarioPlanner::create(const WorldScenario& s, const RealModelEntries& real_entries) {
  if (s.is_real() && !real_entries)
    return make_error(seam_kind::harness_error, "scenario '" + s.name + "' needs the Megatron target's real models");
  ScenarioPlanner p;
  p.s_ = &s;
  p.real_entries_ = real_entries;
  // The hybrid side is retargeted at the GPT checkpoint, except hybrid -> hybrid.
  if (s.kind != ScenarioKind::real_hybrid_hybrid) {
    IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(s.pattern));
    p.maps_ = std::move(maps);
  }
  const std::int64_t layers = p.maps_ ? p.maps_->num_gpt_layers : 0;
  if (!s.is_real() && layers % s.save.pp != 0)
    return make_error(ErrorKind::invalid_argument, "scenario '" + s.name + "': " + std::to_string(layers) +
                                                       " GPT layers do not split over PP=" + std::to_string(s.save.pp));
  p.config_ = s.config;
  p.config_.gated_mlp = s.gated;
  p.optimizer_ = s.optimizer ? OptimizerStates::adam() : OptimizerStates{};
  return p;
}

Result<std::vector<FlatEntry>> ScenarioPlanner::rank_entries(Side side, std::int64_t r) const {
  const std::string where = side_text(side) + " rank " + std::to_string(r);
  if (s_->is_real()) {
    auto entries = real_entries_(real_model(side), r);
    if (!entries.ok()) return entries.error().with_context("scenario '" + s_->name + "', real model of " + where);
    return entries;
  }
  const WorldLayout& w = side == Side::save ? s_->save : s_->load;
  const RankLayout l = w.rank_layout(r);
  auto tree = side == Side::save ? gpt_sharded_state_dict(config_, maps_ ? maps_->num_gpt_layers : 0, l, optimizer_)
                                 : hybrid_sharded_state_dict(config_, s_->pattern, l, optimizer_);
  if (!tree.ok()) return tree.error().with_context("scenario '" + s_->name + "', state dict of " + where);
  std::vector<FlatEntry> entries = flatten(*tree);
  set_dense_replicas(entries, w, l);
  return entries;
}

Json ScenarioPlanner::model_json(Side side, std::int64_t r) const {
  return s_->is_real() ? json::model_dump_spec_to_json(real_model(side), r) : Json();
}

Result<Rows> ScenarioPlanner::padded_rows(Side side, std::int64_t r, const ShardedTensor& t) const {
  return s_->is_real() ? real_gtp_padded_rows(real_model(side), r, t) : Result<Rows>(Rows());
}

Result<std::vector<Segment>> ScenarioPlanner::tensor_segments(Side side, std::int64_t r, const ShardedTensor& t) const {
  IH_TRY_ASSIGN(padded, padded_rows(side, r, t));
  return padded ? *padded : std::vector<Segment>{whole_tensor(t)};
}

Result<FactoryRows> ScenarioPlanner::factory_rows(Side side, std::int64_t r, const ShardedTensorFactory& f) const {
  if (s_->is_real()) {
    IH_TRY_ASSIGN(in_proj, real_gtp_in_proj(real_model(side), r, f));
    if (in_proj) return FactoryRows{in_proj->shard, in_proj->shard_shape, false};
    IH_TRY_ASSIGN(window, real_gtp_factory_rows(real_model(side), r, f));
    if (window) return FactoryRows{*window, std::nullopt, true};
  }
  IH_TRY_ASSIGN(built, factory_segments(f));
  return FactoryRows{built, std::nullopt, false};
}

Result<Rows> ScenarioPlanner::reference_split_rows(Side side, std::int64_t r, const ShardedTensorFactory& f) const {
  return s_->is_real() ? real_reference_split_rows(real_model(side), r, f) : Result<Rows>(Rows());
}

std::string ScenarioPlanner::source_key(const std::string& key) const {
  static const std::string kParamState = "optimizer.state.param.";
  return s_->distributed_optimizer() && key.starts_with(kParamState) ? key.substr(kParamState.size()) : key;
}

Result<std::int64_t> SavedKeys::id_of(const ScenarioPlanner& planner, const std::string& key) const {
  auto it = ids.find(planner.source_key(key));
  if (it == ids.end()) return make_error(seam_kind::harness_error, "key '" + key + "' is not in the GPT catalogue");
  return it->second;
}

const std::string& SavedKeys::key_of(std::int64_t id) const {
  return keys[static_cast<std::size_t>(id - 1)]["key"].get_ref<const std::string&>();
}

namespace {

/// Every key the save world writes, with its global shape: each tensor's (a GTP-padded one's from its real rows;
/// one all padding leaves the shape to another rank) and each factory's built tensors'.
Result<std::map<std::string, Shape>> saved_shapes(const ScenarioPlanner& planner,
                                                  const std::vector<std::vector<FlatEntry>>& save_entries) {
  std::map<std::string, Shape> shapes;
  for (std::size_t r = 0; r < save_entries.size(); ++r)
    for (const FlatEntry& e : save_entries[r]) {
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry)) {
        IH_TRY_ASSIGN(segs, planner.tensor_segments(Side::save, static_cast<std::int64_t>(r), *t));
        if (!segs.empty()) shapes.emplace(t->key, segs.front().global_shape);
      }
      if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
        IH_TRY_ASSIGN(segs, factory_segments(*f));
        for (const Segment& seg : segs) shapes.emplace(seg.key, seg.global_shape);
      }
    }
  return shapes;
}

}  // namespace

Result<SavedKeys> saved_keys(const ScenarioPlanner& planner, const std::vector<std::vector<FlatEntry>>& save_entries) {
  SavedKeys out;
  IH_TRY_ASSIGN(shapes, saved_shapes(planner, save_entries));
  out.shapes = std::move(shapes);
  for (const auto& [key, shape] : out.shapes) {
    out.max_numel = std::max(out.max_numel, numel(shape));
    if (planner.source_key(key) != key) continue;
    out.ids[key] = static_cast<std::int64_t>(out.ids.size()) + 1;
    out.keys.push_back(Json{{"id", out.ids[key]}, {"key", key}, {"global_shape", shape}});
  }
  for (const auto& [key, shape] : out.shapes) {
    const std::string source = planner.source_key(key);
    if (source == key) continue;
    const auto id = out.ids.find(source);
    if (id == out.ids.end() || out.shapes.at(source) != shape)
      return make_error(seam_kind::harness_error, "scenario '" + planner.scenario().name +
                                                      "': the distributed optimizer's " + key +
                                                      " has no parameter of its shape in the save world");
    out.aliases.push_back(Json{{"key", key}, {"id", id->second}});
  }
  for (const std::vector<FlatEntry>& rank : save_entries)
    for (const FlatEntry& e : rank)
      if (const auto* o = std::get_if<ShardedObject>(&e.entry); o && o->is_main_replica() && carries_value(*o))
        out.carried.emplace(o->unique_key(), std::get<CarriedValue>(*o->data).json);
  return out;
}

}  // namespace ih
