// The Megatron client's model operations: pattern grammar and layer maps, retargeting (sharded and FSDP),
// the non-GTP split factory, Megatron's sharding validation and integrity report, and real model dumps.
#include <utility>

#include "harness/megatron/adapter_replies.h"
#include "harness/megatron/megatron_implementation.h"
#include "harness/megatron/megatron_wire.h"

namespace ih {
namespace {

json::Json nullable(std::optional<std::string_view> text) {
  return text ? json::Json(std::string(*text)) : json::Json(nullptr);
}
json::Json nullable_int(std::optional<std::int64_t> v) { return v ? json::Json(*v) : json::Json(nullptr); }

json::Json keys_or_null(const std::optional<std::vector<std::string>>& keys) {
  return keys ? json::Json(*keys) : json::Json(nullptr);
}

}  // namespace

Result<pattern::ParsedPattern> MegatronImplementation::parse_pattern(std::optional<std::string_view> text) {
  return ask("parse_pattern", {{"pattern", nullable(text)}}, [](const json::Json& result) {
    pattern::ParsedPattern out;
    if (!result.at("main").is_null()) out.main = result.at("main").get<std::string>();
    if (!result.at("mtp").is_null()) out.mtp = result.at("mtp").get<std::string>();
    out.mtp_depth = result.at("depth").get<std::int64_t>();
    return Result<pattern::ParsedPattern>(std::move(out));
  });
}

Result<GptCompatLayerMaps> MegatronImplementation::layer_maps(std::optional<std::string_view> text) {
  return ask("pattern_maps", {{"pattern", nullable(text)}},
             [](const json::Json& result) { return json::layer_maps_from_json(result); });
}

Result<pattern::SegmentSelection> MegatronImplementation::select_segment(std::string_view main,
                                                                         const pattern::SegmentRequest& r) {
  return ask("select_segment",
             {{"pattern", std::string(main)},
              {"pp_rank", r.pp_rank},
              {"pp_size", r.pp_size},
              {"vp_stage", nullable_int(r.vp_stage)},
              {"first", nullable_int(r.first_stage_layers)},
              {"last", nullable_int(r.last_stage_layers)}},
             [](const json::Json& result) {
               return Result<pattern::SegmentSelection>(pattern::SegmentSelection{
                   result.at("layers").get<std::string>(), result.at("offset").get<std::int64_t>()});
             });
}

Result<std::vector<FlatEntry>> MegatronImplementation::retarget(std::string_view pattern,
                                                                const std::vector<FlatEntry>& entries) {
  json::Json encoded = json::entries_to_json(entries);
  // The codec leaves a factory's own data out; Megatron's retargeting wraps it (LNP(factory.data))
  // for fresh layers, so it travels with the factory entry.
  for (std::size_t i = 0; i < entries.size() && i < encoded.size(); ++i)
    if (const auto* f = std::get_if<ShardedTensorFactory>(&entries[i].entry); f && f->data)
      encoded[i]["entry"]["data"] = data_json(*f->data);
  IH_TRY_ASSIGN(out, ask("retarget", {{"pattern", std::string(pattern)}, {"entries", encoded}},
                         [](const json::Json& result) { return json::entries_from_json(result.at("entries")); }));
  // A factory that stays a factory keeps its recipe (when it has one) for load_state.
  for (std::size_t i = 0; i < entries.size() && i < out.size() && i < encoded.size(); ++i) {
    const auto* before = std::get_if<ShardedTensorFactory>(&entries[i].entry);
    auto* after = std::get_if<ShardedTensorFactory>(&out[i].entry);
    if (!before || !after || !encoded[i]["entry"].contains("factory")) continue;
    IH_TRY_ASSIGN(built, after->build());
    after->builder = std::make_shared<RetargetedFactory>(std::move(built), std::string(pattern), encoded[i]["entry"]);
  }
  return out;
}

Result<std::optional<std::string>> MegatronImplementation::fsdp_key(
    std::string_view pattern, std::string_view key, const std::optional<std::vector<std::string>>& keys) {
  return ask(
      "fsdp_key",
      {{"pattern", std::string(pattern)}, {"key", std::string(key)}, {"checkpoint_keys", keys_or_null(keys)}},
      [](const json::Json& result) {
        const json::Json& key = result.at("key");
        return Result<std::optional<std::string>>(key.is_null() ? std::nullopt : std::optional(key.get<std::string>()));
      });
}

Result<StateNode> MegatronImplementation::fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                                        const std::optional<std::vector<std::string>>& keys,
                                                        std::string_view prefix) {
  return ask("fsdp_retarget",
             {{"pattern", std::string(pattern)},
              {"tree", json::tree_to_json(tree)},
              {"checkpoint_keys", keys_or_null(keys)},
              {"prefix", std::string(prefix)}},
             [](const json::Json& result) { return Result<StateNode>(json::tree_from_json(result.at("tree"))); });
}

Result<std::vector<ShardedTensor>> MegatronImplementation::split_chunks(const ShardedTensor& orig,
                                                                        const SplitLayout& layout) {
  if (orig.local_shape.empty() || !orig.axis_fragmentations || orig.prepend_axis_num < 0 || orig.prepend_axis_num > 1)
    return make_error(ErrorKind::invalid_argument,
                      "split_chunks needs a regular TP-sharded tensor with at most one prepended (layer) axis");
  const auto row_axis = static_cast<std::size_t>(orig.prepend_axis_num);
  const std::int64_t rows = orig.local_shape[0];
  json::Json request{{"key", orig.key},
                     {"local_rows", rows},
                     {"tp_rank", rows ? orig.global_offset[row_axis] / rows : 0},
                     {"tp_size", (*orig.axis_fragmentations)[row_axis]},
                     {"sections", layout.sections},
                     {"names", layout.names},
                     {"dtype", orig.dtype}};
  if (row_axis == 1) request["layer"] = {orig.global_offset[0], (*orig.axis_fragmentations)[0]};
  // A default replica travels as none, so Megatron's from_rank_offsets default is judged by the chunks it gives.
  if (orig.replica_id != ReplicaId{}) request["replica_id"] = json::leaf_to_json(orig)["replica_id"];
  if (orig.local_shape.size() > 1) request["cols"] = orig.local_shape[1];
  return ask("split_chunks", std::move(request), [&](const json::Json& result) -> Result<std::vector<ShardedTensor>> {
    std::vector<ShardedTensor> out;
    for (json::Json chunk : result.at("chunks")) {
      chunk["kind"] = "tensor";
      if (orig.dtype != "float32") chunk["dtype"] = orig.dtype;
      IH_TRY_ASSIGN(leaf, json::leaf_from_json(chunk));
      if (!std::holds_alternative<ShardedTensor>(leaf))
        return protocol_error("a chunk is not a tensor", json::dump(chunk));
      out.push_back(std::get<ShardedTensor>(std::move(leaf)));
    }
    return out;
  });
}

Result<MegatronValidation> MegatronImplementation::megatron_validation(const GlobalMetadata& metadata) {
  json::Json entries = json::Json::array();
  for (const RankedTensor& t : metadata.tensors) {
    json::Json entry = json::leaf_to_json(t.tensor);
    // A main replica 0 travels as none: ShardedTensor's own default is then what validation judges.
    if (t.tensor.replica_id == ReplicaId{}) entry.erase("replica_id");
    entries.push_back({{"rank", t.rank}, {"entry", std::move(entry)}});
  }
  for (const RankedObject& o : metadata.objects)
    entries.push_back({{"rank", o.rank}, {"entry", json::leaf_to_json(o.object)}});
  json::Json request{{"entries", std::move(entries)}, {"world_size", metadata.world_size}};
  return ask("integrity", std::move(request), [](const json::Json& result) {
    MegatronValidation out;
    // PyTorch DCP's save planning of the same entries (torch's own _validate_global_plan), when this torch has it.
    if (result.contains("dcp_plan_errors"))
      out.dcp_plan_errors = result.at("dcp_plan_errors").get<std::vector<std::string>>();
    if (result.contains("verdict")) out.entry_accepted = result.at("verdict").at("ok").get<bool>();
    for (const json::Json& detail : result.at("details")) {
      const std::string kind = detail.at("kind").get<std::string>();
      const std::string message = detail.at("key").get<std::string>() + ": " + detail.at("message").get<std::string>();
      if (kind == "assertion" || kind == "exception") {
        if (!out.assertion) out.assertion = message, out.crashed = kind == "exception";
      } else {
        out.errors.push_back(message);
      }
    }
    return Result<MegatronValidation>(std::move(out));
  });
}

Result<IntegrityReport> MegatronImplementation::integrity(
    const GlobalMetadata& metadata, const std::optional<std::vector<std::string>>& reference_keys) {
  json::Json entries = json::Json::array();
  for (const RankedTensor& t : metadata.tensors)
    entries.push_back({{"rank", t.rank}, {"entry", json::leaf_to_json(t.tensor)}});
  for (const RankedObject& o : metadata.objects)
    entries.push_back({{"rank", o.rank}, {"entry", json::leaf_to_json(o.object)}});
  json::Json request{{"entries", std::move(entries)}};
  if (reference_keys) request["reference_keys"] = *reference_keys;
  return ask("integrity_report", std::move(request), [](const json::Json& result) -> Result<IntegrityReport> {
    IntegrityReport out;
    for (const json::Json& p : result.at("problems")) {
      const std::string kind = p.at("kind").get<std::string>();
      std::optional<ProblemKind> parsed;
      for (int k = 0; k <= static_cast<int>(ProblemKind::missing_object); ++k)
        if (to_string(static_cast<ProblemKind>(k)) == kind) parsed = static_cast<ProblemKind>(k);
      if (!parsed) return protocol_error("unknown problem kind '" + kind + "'", json::dump(p));
      IntegrityProblem problem{
          *parsed, p.at("key").get<std::string>(), std::nullopt, {}, p.at("message").get<std::string>()};
      for (const json::Json& r : p.at("ranks")) problem.ranks.push_back(r.get<std::int64_t>());
      out.problems.push_back(std::move(problem));
    }
    return out;
  });
}

Result<std::vector<FlatEntry>> MegatronImplementation::model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) {
  IH_TRY_STATUS(validate_model_dump(spec, rank));
  return ask("model_dump", json::model_dump_spec_to_json(spec, rank),
             [](const json::Json& result) { return json::entries_from_json(result.at("entries")); });
}

}  // namespace ih
