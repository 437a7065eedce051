// Retargeting over all ranks of generated models (spec 2.4-2.6, 2.9, bug classes 6.15-6.22).
#include <set>

#include "models/retarget.h"
#include "models/text.h"
#include "properties/invariants.h"
#include "properties/load_world.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

/// What a loader compares: key, box, fragmentations and prepended axes (objects by unique key).
std::string box_of(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf))
    return t->key + " global (" + join_ints(t->global_shape, ",") + ") offset (" + join_ints(t->global_offset, ",") +
           ") local (" + join_ints(t->local_shape, ",") + ") frag " +
           (t->axis_fragmentations ? "(" + join_ints(*t->axis_fragmentations, ",") + ")" : "None") + " prepend " +
           std::to_string(t->prepend_axis_num);
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return o->unique_key();
  return "";
}

/// The entries of one rank with factories built (what save/load preprocessing sees).
Result<std::vector<FlatEntry>> built(const std::vector<FlatEntry>& entries) {
  IH_TRY_ASSIGN(tree, unflatten(entries));
  IH_TRY_STATUS(apply_factories(tree));
  return flatten(tree);
}

/// Runs `each(rank, hybrid entries, retargeted entries)` over every rank of the case.
template <class Fn>
Verdict for_each_rank(Implementation& impl, const ModelCase& c, Fn each) {
  for (const RankLayout& rank : all_ranks(c.layout)) {
    IH_VERDICT_ASSIGN(tree, hybrid_sharded_state_dict(c.config, c.pattern, rank, OptimizerStates::adam()));
    const std::vector<FlatEntry> before = flatten(tree);
    IH_VERDICT_ASSIGN(after, impl.retarget(c.pattern, before));
    if (Verdict v = each(rank, before, after); !v.empty())
      return "rank tp" + std::to_string(rank.tp_rank) + " pp" + std::to_string(rank.pp_rank) + " ep" +
             std::to_string(rank.ep_rank) + " etp" + std::to_string(rank.etp_rank) + ": " + v;
  }
  return "";
}

Verdict matches_gpt(Implementation& impl, const ModelCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
  std::multiset<std::string> hybrid, gpt;
  const Verdict v = for_each_rank(impl, c, [&](const RankLayout& rank, const auto&, const auto& after) -> Verdict {
    IH_VERDICT_ASSIGN(mine, built(after));
    for (const FlatEntry& e : mine)
      if (std::string b = box_of(e.entry); !b.empty()) hybrid.insert(b);
    IH_VERDICT_ASSIGN(tree, gpt_sharded_state_dict(c.config, maps.num_gpt_layers,
                                                   {rank.tp, rank.tp_rank, 1, 0, rank.ep, rank.ep_rank, rank.etp,
                                                    rank.etp_rank, rank.dp_rank},
                                                   OptimizerStates::adam()));
    IH_VERDICT_ASSIGN(theirs, built(flatten(tree)));
    for (const FlatEntry& e : theirs)
      if (std::string b = box_of(e.entry); !b.empty() && rank.pp_rank == 0) gpt.insert(b);
    return "";
  });
  if (!v.empty()) return v;
  for (const std::string& b : hybrid)
    if (hybrid.count(b) != gpt.count(b))
      return "retargeted hybrid has " + std::to_string(hybrid.count(b)) + " x '" + b + "', GPT " +
             std::to_string(gpt.count(b));
  for (const std::string& b : gpt)
    if (!hybrid.count(b)) return "GPT saves '" + b + "', no retargeted hybrid entry asks for it";
  return "";
}

Verdict idempotent(Implementation& impl, const ModelCase& c) {
  return for_each_rank(
      impl, c,
      [&](const RankLayout&, const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after) -> Verdict {
        IH_VERDICT_ASSIGN(again, impl.retarget(c.pattern, after));
        return invariants::retarget_idempotent(before, after, again);  // shared with the fuzz targets
      });
}

Verdict no_index_fresh_local(Implementation& impl, const ModelCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
  return for_each_rank(
      impl, c,
      [&](const RankLayout&, const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after) -> Verdict {
        // Shared with the fuzz targets: no index in the retargeted keys, fresh and omitted entries local.
        if (Verdict v = invariants::retarget_no_index_fresh_local(before, after, maps); !v.empty()) return v;
        IH_VERDICT_ASSIGN(mine, built(after));  // and none in what the retargeted factories build
        for (const FlatEntry& e : mine)
          if (const std::string b = box_of(e.entry); !b.empty() && find_decoder_layer(b))
            return "still carries a hybrid index: " + b;
        return "";
      });
}

Verdict metadata_valid(Implementation& impl, const ModelCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
  return for_each_rank(impl, c, [&](const RankLayout&, const auto&, const std::vector<FlatEntry>& after) -> Verdict {
    IH_VERDICT_ASSIGN(mine, built(after));
    for (const FlatEntry& e : mine) {
      const auto* t = std::get_if<ShardedTensor>(&e.entry);
      if (!t) continue;
      if (auto ok = t->validate_metadata_integrity(); !ok.ok()) return e.path + ": " + ok.error().message;
      const bool layer = t->key.find("decoder.layers.") != std::string::npos;
      if (layer && (t->global_shape.empty() || t->global_shape[0] != maps.num_gpt_layers || t->prepend_axis_num < 1 ||
                    t->global_shape.size() != t->local_shape.size() + static_cast<std::size_t>(t->prepend_axis_num)))
        return e.path + ": layer entry without exactly one leading GPT layer axis: " + box_of(e.entry);
    }
    return "";
  });
}

Verdict optimizer_keys(Implementation& impl, const ModelCase& c) {
  return for_each_rank(
      impl, c,
      [&](const RankLayout&, const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after) -> Verdict {
        for (std::size_t i = 0; i < before.size(); ++i) {
          const std::string b = box_of(before[i].entry), a = box_of(after[i].entry);
          if (b.rfind("optimizer.state.", 0) == 0 && !a.empty() && a.rfind("optimizer.state.", 0) != 0)
            return "optimizer entry lost its prefix: " + b + " -> " + a;
          if (b.find("decoder.final_norm.") != std::string::npos && !a.empty() &&
              a.find("decoder.final_layernorm.weight") == std::string::npos)
            return "final norm entry not renamed to decoder.final_layernorm.weight: " + a;
        }
        return "";
      });
}

ModelCase spec_2_3() { return ModelCase{"M*-M*-", ModelConfig{}, {.tp = 2}}; }

}  // namespace

Property key_rules_property();  // props_key_rules.cc

std::vector<Property> retarget_properties() {
  const auto gen = genModelCase();
  const std::map<std::string, ModelCase> spec = {{"spec_2_3_tp2", spec_2_3()}};
  return {
      make_property<ModelCase>("retarget_matches_gpt", "retarget",
                               "retargeted hybrid boxes equal what GPT saves, every rank (2.9, 6.17-6.19)", gen,
                               matches_gpt, spec),
      make_property<ModelCase>("retarget_idempotent", "retarget", "a second retarget pass changes nothing (2.9)", gen,
                               idempotent, spec),
      make_property<ModelCase>("retarget_no_index_fresh_local", "retarget",
                               "no entry keeps a layer index; fresh and omitted entries are local (2.9, 6.20, 6.22)",
                               gen, no_index_fresh_local, spec),
      make_property<ModelCase>("retarget_metadata_valid", "retarget",
                               "retargeted and factory-built tensors keep spec 3.1 invariants, one L axis (6.18, 6.19)",
                               gen, metadata_valid, spec),
      make_property<ModelCase>(
          "retarget_optimizer_keys", "retarget",
          "optimizer keys keep their prefix; final norm becomes decoder.final_layernorm (6.15, 6.16)", gen,
          optimizer_keys, spec),
      key_rules_property(),
  };
}

}  // namespace ih::props
