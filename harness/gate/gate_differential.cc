// Differential checks: the reference and the target answer the same generated inputs; the first
// disagreement (inputs enumerated shortest first, so it is a minimal case) is shown side by side.
#include <functional>

#include "codec/json_codec.h"
#include "harness/gate/gate.h"
#include "models/synthetic_model.h"
#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

/// Every string over `alphabet` of length 0..max_length, shortest first.
std::vector<std::string> all_strings(const std::string& alphabet, std::size_t max_length) {
  std::vector<std::string> out{""};
  for (std::size_t begin = 0, length = 1; length <= max_length; ++length) {
    const std::size_t end = out.size();
    for (std::size_t i = begin; i < end; ++i)
      for (const char c : alphabet) out.push_back(out[i] + c);
    begin = end;
  }
  return out;
}

std::string answer_text(const Result<GptCompatLayerMaps>& maps, std::string_view pattern) {
  json::Json j = json::layer_maps_to_json(pattern, maps);
  if (j.contains("error")) j["error"].erase("message");
  return json::dump(j);
}

template <class T>
std::string outcome_text(const Result<T>& result, const std::function<std::string(const T&)>& show) {
  return result.ok() ? show(*result) : "error " + std::string(to_string(result.error().kind));
}

/// Returns "" when every input agrees, else the first disagreement; no answer (unsupported, a timeout, a harness
/// fault) stops the check without a verdict.
Result<std::string> compare_all(const std::vector<std::string>& inputs,
                                const std::function<Result<std::string>(const std::string&)>& target_answer,
                                const std::function<std::string(const std::string&)>& reference_answer) {
  for (const std::string& input : inputs) {
    IH_TRY_ASSIGN(got, target_answer(input));
    const std::string want = reference_answer(input);
    if (got != want)
      return "minimal case " + json::dump(json::Json(input)) + "\n      reference: " + want +
             "\n      target:    " + got;
  }
  return std::string();
}

Result<std::string> check_layer_maps(Implementation& target) {
  ReferenceImplementation reference;
  auto inputs = all_strings("M*-E|/DG+X", 4);
  for (const char* longer :
       {"M*-M*-*-M*-*-", "MM*EM*E|M*E", "*-*-/MM/MM", "M*-|M*-|M*-|M*-", "**--MM", "E*E*", "M*-M*E-"})
    inputs.push_back(longer);
  return compare_all(
      inputs,
      [&](const std::string& p) -> Result<std::string> {
        auto maps = target.layer_maps(std::string_view(p));
        if (!maps.ok() && is_no_answer(maps.error().kind)) return maps.error();
        return answer_text(maps, p);
      },
      [&](const std::string& p) { return answer_text(reference.layer_maps(std::string_view(p)), p); });
}

std::string parsed_text(const pattern::ParsedPattern& p) {
  return json::dump(json::Json{{"main", p.main ? json::Json(*p.main) : json::Json(nullptr)},
                               {"mtp", p.mtp ? json::Json(*p.mtp) : json::Json(nullptr)},
                               {"depth", p.mtp_depth}});
}

Result<std::string> check_parse(Implementation& target) {
  ReferenceImplementation reference;
  const std::function<std::string(const pattern::ParsedPattern&)> show = parsed_text;
  return compare_all(
      all_strings("M*D|/X", 4),
      [&](const std::string& p) -> Result<std::string> {
        auto parsed = target.parse_pattern(std::string_view(p));
        if (!parsed.ok() && is_no_answer(parsed.error().kind)) return parsed.error();
        return outcome_text(parsed, show);
      },
      [&](const std::string& p) { return outcome_text(reference.parse_pattern(std::string_view(p)), show); });
}

Result<std::string> check_segments(Implementation& target) {
  ReferenceImplementation reference;
  const std::function<std::string(const pattern::SegmentSelection&)> show = [](const pattern::SegmentSelection& s) {
    return "'" + s.layers + "' @" + std::to_string(s.offset);
  };
  const std::vector<std::optional<std::int64_t>> optional_counts = {std::nullopt, 0, 1, 2};
  for (const std::string& main : all_strings("M*|", 4)) {
    for (std::int64_t pp = 1; pp <= 3; ++pp)
      for (std::int64_t rank = 0; rank < pp; ++rank)
        for (const auto& vp : std::vector<std::optional<std::int64_t>>{std::nullopt, 0, 1})
          for (const auto& first : optional_counts)
            for (const auto& last : optional_counts) {
              const pattern::SegmentRequest request{rank, pp, vp, first, last};
              auto got = target.select_segment(main, request);
              if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
              const std::string want_text = outcome_text(reference.select_segment(main, request), show);
              const std::string got_text = outcome_text(got, show);
              if (got_text != want_text) {
                const auto opt = [](const std::optional<std::int64_t>& v) {
                  return v ? std::to_string(*v) : std::string("None");
                };
                return "minimal case pattern '" + main + "' pp_rank " + std::to_string(rank) + " pp_size " +
                       std::to_string(pp) + " vp " + opt(vp) + " first " + opt(first) + " last " + opt(last) +
                       "\n      reference: " + want_text + "\n      target:    " + got_text;
              }
            }
  }
  return std::string();
}

/// Retarget edge cases the synthetic models do not produce.
std::vector<FlatEntry> edge_entries() {
  const auto tensor = [](std::string key, Shape local) {
    return Leaf(ShardedTensor::from_rank_offsets(std::move(key), std::move(local), {}).value());
  };
  const auto object = [](std::string key, Shape shape, Shape offset) {
    return Leaf(
        ShardedObject{std::move(key), std::nullopt, std::move(shape), std::move(offset), ReplicaId::tuple({0, 1, 0})});
  };
  return {
      {"leading_zero", tensor("decoder.layers.01.self_attention.linear_qkv.weight", {4})},
      {"nested", tensor("model.decoder.layers.2.decoder.layers.1.mlp.linear_fc1.weight", {2, 3})},
      {"norm_twice", tensor("decoder.final_norm.decoder.final_norm.weight", {4})},
      {"norm_in_opt", tensor("optimizer.state.exp_avg.decoder.final_norm.weight", {4})},
      {"omitted_prefixed", object("model.output_layer._extra_state", {1}, {0})},
      {"omitted_like", tensor("output_layer._extra_state_x", {1})},
      {"single_expert", object("decoder.layers.1.mlp.experts.linear_fc1._extra_state", {1}, {0})},
      {"expert_axis", object("decoder.layers.2.mlp.experts.linear_fc1._extra_state", {4}, {3})},
      {"two_axes", object("decoder.layers.4.x._extra_state", {2, 3}, {1, 2})},
      {"fresh_object", object("decoder.layers.0.mixer.in_proj._extra_state", {1}, {0})},
      {"not_layer", tensor("decoder.layers.x.weight", {1})},
      {"plain", Leaf(PlainValue{"3"})},
      {"local", Leaf(LocalNonpersistent{})},
  };
}

/// Entries as JSON; a factory is compared by what it builds, not by how it is constructed.
std::string entries_text(const std::vector<FlatEntry>& entries) {
  json::Json out = json::entries_to_json(entries);
  for (json::Json& item : out)
    for (const char* recipe_field : {"factory", "tensor", "sharded_offsets"}) item["entry"].erase(recipe_field);
  return json::dump(out);
}

Result<std::string> check_retarget(Implementation& target) {
  ReferenceImplementation reference;
  std::vector<std::pair<std::string, std::vector<FlatEntry>>> cases = {{"M*-M*-", edge_entries()}};
  ModelConfig moe;
  moe.num_experts = 2;
  for (const auto& [pattern, config, layout] : std::vector<std::tuple<std::string, ModelConfig, RankLayout>>{
           {"M*-M*-", ModelConfig{}, {.tp = 2, .tp_rank = 1}}, {"*E*E", moe, {.ep = 2, .ep_rank = 1}}}) {
    StateNode tree = hybrid_sharded_state_dict(config, pattern, layout, OptimizerStates::adam()).value();
    IH_TRY_STATUS(apply_factories(tree));
    cases.push_back({pattern, flatten(tree)});
  }
  // Unbuilt SwiGLU factories: retargeting must wrap each build exactly once (spec 2.5).
  ModelConfig gated;
  gated.gated_mlp = true;
  cases.push_back(
      {"M*-M*-",
       flatten(hybrid_sharded_state_dict(gated, "M*-M*-", {.tp = 2, .tp_rank = 1}, OptimizerStates::adam()).value())});
  for (const auto& [pattern, entries] : cases) {
    auto got = target.retarget(pattern, entries);
    if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
    const auto want = reference.retarget(pattern, entries);
    const std::function<std::string(const std::vector<FlatEntry>&)> show = entries_text;
    if (outcome_text(got, show) == outcome_text(want, show)) continue;
    if (!got.ok() || !want.ok())
      return "pattern '" + pattern + "'\n      reference: " + outcome_text(want, show) +
             "\n      target:    " + outcome_text(got, show);
    for (std::size_t i = 0; i < std::max(got->size(), want->size()); ++i) {
      const std::string a = i < want->size() ? entries_text({(*want)[i]}) : "(none)";
      const std::string b = i < got->size() ? entries_text({(*got)[i]}) : "(none)";
      if (a != b)
        return "pattern '" + pattern + "', entry " + std::to_string(i) + "\n      reference: " + a +
               "\n      target:    " + b;
    }
  }
  return std::string();
}

Result<std::string> check_fsdp(Implementation& target) {
  ReferenceImplementation reference;
  const std::vector<std::string> checkpoint_keys = {
      "optimizer.state.module.module.decoder.layers.0.self_attention.linear_qkv.weight",
      "model.module.decoder.layers.1.mlp.linear_fc1.weight", "model.decoder.layers.1.mlp.linear_fc1.weight",
      "model.xdecoder.final_layernorm.weight"};
  const std::vector<std::string> keys = {"module.module.module.decoder.layers.1.self_attention.linear_qkv.weight",
                                         "decoder.layers.5.mlp.linear_fc1.weight",
                                         "decoder.layers.0.mixer.in_proj.weight",
                                         "output_layer._extra_state",
                                         "decoder.final_norm.weight",
                                         "module.decoder.layers.4.self_attention.linear_qkv.weight",
                                         "decoder.layers.7.mlp.linear_fc1.weight"};
  const std::function<std::string(const std::optional<std::string>&)> show = [](const std::optional<std::string>& k) {
    return k ? "'" + *k + "'" : std::string("None (omitted)");
  };
  for (const auto& with_keys :
       {std::optional<std::vector<std::string>>(), std::optional<std::vector<std::string>>(checkpoint_keys)})
    for (const std::string& key : keys) {
      auto got = target.fsdp_key("M*-M*-", key, with_keys);
      if (!got.ok() && is_no_answer(got.error().kind)) return got.error();
      const std::string want_text = outcome_text(reference.fsdp_key("M*-M*-", key, with_keys), show);
      if (outcome_text(got, show) != want_text)
        return "key '" + key + "'" + (with_keys ? " with checkpoint keys" : "") + "\n      reference: " + want_text +
               "\n      target:    " + outcome_text(got, show);
    }
  return std::string();
}

}  // namespace

std::vector<Check> differential_checks() {
  return {Check::simple("differential", "layer maps, all patterns up to length 4 over M*-E|/DG+X", check_layer_maps),
          Check::simple("differential", "parse, all patterns up to length 4 over M*D|/X", check_parse),
          Check::simple("differential", "pipeline segments, patterns up to length 4, PP 1-3, VPP, first/last",
                        check_segments),
          Check::simple("differential", "retarget: edge entries and synthetic TP/EP state dicts", check_retarget),
          Check::simple("differential", "FSDP explicit keys with and without checkpoint keys", check_fsdp)};
}

}  // namespace ih::gate
