// Built-in gate scenarios: synthetic GPT and Hybrid state dicts over every rank of a layout,
// retargeted through the Implementation under test and compared with what GPT itself emits.
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "codec/json_codec.h"
#include "harness/gate/gate.h"
#include "models/retarget.h"
#include "models/synthetic_model.h"

namespace ih::gate {
namespace {

struct Scenario {
  std::string name;
  std::string pattern;
  ModelConfig config;
  RankLayout layout;  // sizes; ranks are enumerated
};

ModelConfig gated() {
  ModelConfig c;
  c.gated_mlp = true;
  return c;
}

ModelConfig moe() {
  ModelConfig c;
  c.num_experts = 4;
  return c;
}

ModelConfig biased() {
  ModelConfig c;
  c.add_bias = true;
  return c;
}

std::vector<Scenario> scenarios() {
  return {
      {"dense M*-M*- tp2", "M*-M*-", ModelConfig{}, {.tp = 2}},
      {"gated *-*- tp2 pp2 (pipes)", "*-|*-", gated(), {.tp = 2, .pp = 2}},
      {"stacked **-- with bias tp4", "**--", biased(), {.tp = 4}},
      {"MoE M*EM*E tp2 ep2 etp2", "M*EM*E", moe(), {.tp = 2, .ep = 2, .etp = 2}},
      {"mamba-heavy MM*-M*-|M*-MM*- pp2", "MM*-M*-|M*-MM*-", ModelConfig{}, {.pp = 2}},
      {"virtual stages M*-|*-|M*-|*- pp2", "M*-|*-|M*-|*-", gated(), {.tp = 2, .pp = 2}},
  };
}

/// What a loader compares: storage key and box (objects by unique key).
std::string box_of(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf))
    return t->key + " shape " + json::dump(json::Json(t->global_shape)) + " offset " +
           json::dump(json::Json(t->global_offset)) + " frag " +
           (t->axis_fragmentations ? json::dump(json::Json(*t->axis_fragmentations)) : "None");
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return o->unique_key();
  return "";
}

Result<std::vector<FlatEntry>> built_entries(Result<StateNode> tree) {
  if (!tree.ok()) return tree.error();
  IH_TRY_STATUS(apply_factories(*tree));
  return flatten(*tree);
}

std::string first_difference(const std::multiset<std::string>& got, const std::multiset<std::string>& want) {
  for (const std::string& box : got)
    if (got.count(box) > want.count(box)) return "retargeted hybrid has an entry GPT lacks: " + box;
  for (const std::string& box : want)
    if (want.count(box) > got.count(box)) return "GPT has an entry the retargeted hybrid lacks: " + box;
  return "";
}

/// spec 2.9 over all ranks: boxes equal GPT's, no layer index left, fresh entries local, idempotent.
Result<std::string> run_scenario(Implementation& target, const Scenario& s) {
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(s.pattern)));
  std::multiset<std::string> hybrid_boxes, gpt_boxes;
  for (const RankLayout& rank : all_ranks(s.layout)) {
    IH_TRY_ASSIGN(hybrid, built_entries(hybrid_sharded_state_dict(s.config, s.pattern, rank, OptimizerStates::adam())));
    std::size_t expected_local = 0;
    for (const FlatEntry& e : hybrid) {
      if (!is_sharded_base(e.entry)) continue;
      const std::string key = std::get_if<ShardedTensor>(&e.entry) ? std::get<ShardedTensor>(e.entry).key
                                                                   : std::get<ShardedObject>(e.entry).key;
      const auto layer = find_decoder_layer(key);
      if ((layer && layer->index && maps.is_fresh(*layer->index)) || key.ends_with(kOmittedLocalKeySuffix))
        ++expected_local;
    }
    auto retargeted = target.retarget(s.pattern, hybrid);
    if (!retargeted.ok() && is_no_answer(retargeted.error().kind)) return retargeted.error();  // NOT RUN and kin
    if (!retargeted.ok())
      return "retarget failed: " + std::string(to_string(retargeted.error().kind)) + ": " + retargeted.error().message;
    std::size_t local = 0;
    for (const FlatEntry& e : *retargeted) {
      if (std::holds_alternative<LocalNonpersistent>(e.entry)) ++local;
      const std::string box = box_of(e.entry);
      if (box.empty()) continue;
      if (find_decoder_layer(box)) return "entry at " + e.path + " still carries a hybrid layer index: " + box;
      hybrid_boxes.insert(box);
    }
    if (local != expected_local)
      return "rank tp" + std::to_string(rank.tp_rank) + " pp" + std::to_string(rank.pp_rank) + ": " +
             std::to_string(local) + " entries became local, expected " + std::to_string(expected_local) +
             " (fresh layers and output_layer._extra_state)";
    auto again = target.retarget(s.pattern, *retargeted);
    if (!again.ok()) return "second retarget pass failed: " + again.error().message;
    if (*again != *retargeted) return std::string("a second retarget pass changed the state dict (not idempotent)");
    IH_TRY_ASSIGN(gpt,
                  built_entries(gpt_sharded_state_dict(s.config, maps.num_gpt_layers, rank, OptimizerStates::adam())));
    for (const FlatEntry& e : gpt)
      if (const std::string box = box_of(e.entry); !box.empty()) gpt_boxes.insert(box);
  }
  return first_difference(hybrid_boxes, gpt_boxes);
}

bool same_answer(const json::Json& got, const json::Json& want) {
  if (got.value("ok", false) != want.value("ok", false)) return false;
  if (!want.value("ok", false)) return got["error"].value("kind", "") == want["error"].value("kind", "");
  for (const char* field : {"num_gpt_layers", "attention_to_gpt", "mlp_to_gpt", "fresh_init"})
    if (got[field] != want[field]) return false;
  return true;
}

}  // namespace

std::vector<Check> retarget_scenario_checks() {
  std::vector<Check> out;
  for (const Scenario& s : scenarios())
    out.push_back(
        Check::simple("retarget round trip", s.name, [s](Implementation& target) { return run_scenario(target, s); }));
  return out;
}

Result<std::vector<Check>> pinned_layer_map_checks(const std::string& corpus_dir) {
  const std::string path = corpus_dir + "/pinned/layer_maps.jsonl";
  std::ifstream in(path);
  if (!in) return make_error(ErrorKind::invalid_argument, "cannot read " + path);
  std::vector<Check> out;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    auto want = json::parse(line);
    if (!want.ok() || !want->contains("pattern"))
      return make_error(ErrorKind::bad_json, path + ":" + std::to_string(number) + ": not a pinned layer-map case");
    const std::string pattern = (*want)["pattern"].get<std::string>();
    out.push_back(Check::simple("pinned layer maps", "'" + pattern + "'",
                                [pattern, want = *want](Implementation& target) -> Result<std::string> {
                                  const auto maps = target.layer_maps(std::string_view(pattern));
                                  if (!maps.ok() && is_no_answer(maps.error().kind)) return maps.error();
                                  const json::Json got = json::layer_maps_to_json(pattern, maps);
                                  if (same_answer(got, want)) return std::string();
                                  return "expected " + json::dump(want) + "\n      got      " + json::dump(got);
                                }));
  }
  return out;
}

}  // namespace ih::gate
