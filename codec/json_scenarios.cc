#include "codec/json_scenarios.h"

#include <algorithm>

namespace ih::json {
namespace {

Error protocol(const std::string& what, const Json& reply) {
  return make_error(seam_kind::harness_error, "adapter protocol: " + what + " in reply " + dump(reply));
}

Json side_json(const GtpSide& s) { return Json{{"tp", s.tp}, {"gtp", s.gtp}, {"pad_for_alignment", s.pad}}; }

/// A Megatron error text with the frame it was raised in, when the reply names one.
std::string with_frame(std::string message, const Json& object, const char* frame_field) {
  if (object.contains(frame_field) && object[frame_field].is_string())
    message += " (at " + object[frame_field].get<std::string>() + ")";
  return message;
}

std::optional<Shape> shape_of(const Json& value) {
  if (!value.is_array()) return std::nullopt;
  Shape out;
  for (const Json& d : value) {
    if (!d.is_number_integer()) return std::nullopt;
    out.push_back(d.get<std::int64_t>());
  }
  return out;
}

std::optional<std::array<std::int64_t, 2>> pair_of(const Json& value) {
  if (!value.is_array() || value.size() != 2 || !value[0].is_number_integer() || !value[1].is_number_integer())
    return std::nullopt;
  return std::array<std::int64_t, 2>{value[0].get<std::int64_t>(), value[1].get<std::int64_t>()};
}

/// {"ok": true, "rows": [[rank, row] | null], "keys": [...], "malformed"?} or {"ok": false, "error", "frame"?}.
Result<OrderedLoad> ordered_load(const Json& x, const std::string& step, const Json& reply) {
  OrderedLoad out;
  if (!x.is_object()) return protocol("a rank's load is not an object", reply);
  if (!x.value("ok", false)) {
    out.refused = Refusal{step, std::nullopt, with_frame(x.value("error", std::string("?")), x, "frame")};
    return out;
  }
  if (!x.contains("rows") || !x["rows"].is_array() || !x.contains("keys") || !x["keys"].is_array())
    return protocol("a loaded rank without \"rows\" and \"keys\"", reply);
  for (const Json& row : x["rows"]) {
    if (row.is_null()) {
      out.rows.emplace_back();
    } else if (const auto pair = pair_of(row)) {
      out.rows.emplace_back(*pair);
    } else {
      return protocol("a loaded row that is neither [rank, row] nor null", reply);
    }
  }
  for (const Json& key : x["keys"]) {
    if (!key.is_string()) return protocol("a loaded key that is not a string", reply);
    out.keys.push_back(key.get<std::string>());
  }
  if (x.contains("malformed") && x["malformed"].is_string()) out.malformed = x["malformed"].get<std::string>();
  return out;
}

Result<std::vector<Json>> ranks_of(const Json& reply) {
  if (!reply.is_object() || !reply.contains("ranks") || !reply["ranks"].is_array())
    return protocol("no \"ranks\" list", reply);
  return std::vector<Json>(reply["ranks"].begin(), reply["ranks"].end());
}

/// A loaded row: [TP rank, row] of the saved row its values came from, null for zeros, or a string
/// naming values that no saved row held.
Result<LoadedRow> loaded_row(const Json& row, const Json& reply) {
  if (row.is_null()) return LoadedRow{};
  if (row.is_string() && !row.get<std::string>().empty()) return LoadedRow{std::nullopt, row.get<std::string>()};
  if (const auto pair = pair_of(row)) return LoadedRow{TpRow{(*pair)[0], (*pair)[1]}, ""};
  return protocol("a loaded row that is neither [TP rank, row], null nor a value's text", reply);
}

/// {"tp", "gtp", "first_row", "weight": [row, ...], "exp_avg": [row, ...]}: one load rank's rows.
Result<ResumedRank> resumed_rank(const Json& rank, const Json& reply) {
  if (!rank.is_object()) return protocol("a rank that is not an object", reply);
  ResumedRank out;
  for (auto [field, value] :
       {std::pair{"tp", &out.tp_rank}, std::pair{"gtp", &out.gtp_rank}, std::pair{"first_row", &out.first_row}}) {
    if (!rank.contains(field) || !rank[field].is_number_integer())
      return protocol(std::string("a rank without an integer \"") + field + "\"", reply);
    *value = rank[field].get<std::int64_t>();
  }
  for (const char* tensor : {"weight", "exp_avg"}) {
    if (!rank.contains(tensor) || !rank[tensor].is_array())
      return protocol(std::string("a rank without its \"") + tensor + "\" rows", reply);
    LoadedRows rows{tensor, {}};
    for (const Json& row : rank[tensor]) {
      IH_TRY_ASSIGN(loaded, loaded_row(row, reply));
      rows.rows.push_back(std::move(loaded));
    }
    out.tensors.push_back(std::move(rows));
  }
  return out;
}

}  // namespace

Json optimizer_resume_request(const OptimizerResumeCase& c) {
  return Json{{"module", to_string(c.module)}, {"sections", c.in_proj.sections},
              {"names", c.in_proj.names},      {"cols", c.cols},
              {"save", side_json(c.save)},     {"load", side_json(c.load)}};
}

Result<OptimizerResumeAnswer> optimizer_resume_from_json(const Json& r) {
  if (!r.is_object()) return protocol("not an object", r);
  OptimizerResumeAnswer out;
  for (auto [field, keys] :
       {std::pair{"saved_keys", &out.saved_keys}, std::pair{"requested_keys", &out.requested_keys}}) {
    if (!r.contains(field) || !r[field].is_array()) return protocol(std::string("no \"") + field + "\" list", r);
    for (const Json& k : r[field]) {
      if (!k.is_string()) return protocol(std::string("a key in \"") + field + "\" that is not a string", r);
      keys->push_back(k.get<std::string>());
    }
    std::sort(keys->begin(), keys->end());
  }
  out.key = compact_keys(out.requested_keys);
  if (r.contains("load_error") && r["load_error"].is_string()) {
    out.refused =
        Refusal{"the load", std::nullopt, with_frame(r["load_error"].get<std::string>(), r, "megatron_frame")};
    return out;
  }
  IH_TRY_ASSIGN(ranks, ranks_of(r));
  for (const Json& rank : ranks) {
    IH_TRY_ASSIGN(resumed, resumed_rank(rank, r));
    out.ranks.push_back(std::move(resumed));
  }
  if (r.contains("unexplained") && r["unexplained"].is_string()) out.unexplained = r["unexplained"].get<std::string>();
  return out;
}

Json fresh_retarget_request(const FreshRetargetCase& c) {
  return Json{
      {"sections", c.in_proj.sections}, {"names", c.in_proj.names}, {"cols", c.cols}, {"tp", c.tp}, {"gtp", c.gtp},
      {"pad_for_alignment", c.pad},     {"pattern", c.pattern}};
}

Result<FreshRetargetAnswer> fresh_retarget_from_json(const Json& reply) {
  IH_TRY_ASSIGN(ranks, ranks_of(reply));
  FreshRetargetAnswer out;
  for (const Json& rank : ranks) {
    if (!rank.is_object()) return protocol("a rank that is not an object", reply);
    FreshRetargetRank r;
    r.rank = "(t=" + dump(rank.value("tp", Json())) + ", g=" + dump(rank.value("gtp", Json())) + ")";
    r.entry_type = rank.value("entry_type", std::string("?"));
    r.loaded_shape = shape_of(rank.value("loaded_shape", Json()));
    r.param_shape = shape_of(rank.value("param_shape", Json()));
    if (r.entry_type == kLocalObjectType) {
      const std::string copied = rank.value("copy_into_param", std::string("?"));
      if (copied != "ok") r.copy_error = copied;
    }
    out.ranks.push_back(std::move(r));
  }
  return out;
}

Json all_padding_request(const AllPaddingCase& c) {
  return Json{{"rows", c.rows}, {"gtp_size", c.gtp}, {"shard_rows", c.shard_rows}, {"cols", c.cols}};
}

Result<LoadOrderingsAnswer> load_orderings_from_json(const Json& reply) {
  IH_TRY_ASSIGN(ranks, ranks_of(reply));
  LoadOrderingsAnswer out;
  for (const Json& rank : ranks) {
    if (!rank.is_object()) return protocol("a rank that is not an object", reply);
    OrderingsRank r;
    IH_TRY_ASSIGN(a, ordered_load(rank.value("serialization_load", Json()), "serialization.load", reply));
    IH_TRY_ASSIGN(b, ordered_load(rank.value("to_state_dict", Json()), "to_state_dict", reply));
    r.serialization_load = std::move(a), r.to_state_dict = std::move(b);
    out.ranks.push_back(std::move(r));
  }
  return out;
}

Result<AllPaddingLoadAnswer> all_padding_load_from_json(const Json& reply) {
  IH_TRY_ASSIGN(ranks, ranks_of(reply));
  AllPaddingLoadAnswer out;
  for (const Json& rank : ranks) {
    IH_TRY_ASSIGN(loaded, ordered_load(rank, "serialization.load", reply));
    out.ranks.push_back(std::move(loaded));
  }
  return out;
}

Json single_expert_request(const SingleExpertCase& c) { return Json{{"experts", c.experts}, {"pattern", c.pattern}}; }

Result<SingleExpertAnswer> single_expert_from_json(const Json& r) {
  if (!r.is_object()) return protocol("not an object", r);
  SingleExpertAnswer out;
  out.loads_objects = true;
  if (r.contains("save_error")) {
    out.refused = Refusal{"the GPT save", std::nullopt, dump(r["save_error"])};
    return out;
  }
  if (r.contains("load_error")) {
    out.refused =
        Refusal{"the GPT->Hybrid load", std::nullopt,
                r.value("load_error", std::string()) + " (requested " + dump(r.value("requested", Json::object())) +
                    "; saved " + dump(r.value("saved", Json::array())) + ")"};
    return out;
  }
  const Json loaded = r.value("load", Json::object());
  if (!loaded.is_object()) return protocol("\"load\" is not an object", r);
  for (const auto& [key, value] : loaded.items()) {
    ExpertObject object{key, "", true, std::nullopt};
    if (value.is_object() && value.contains("layer") && value.contains("expert"))
      object.loaded = pair_of(Json::array({value["layer"], value["expert"]}));
    out.objects.push_back(std::move(object));
  }
  return out;
}

std::string rows_text(const std::vector<std::optional<std::array<std::int64_t, 2>>>& rows) {
  Json out = Json::array();
  for (const auto& row : rows) out.push_back(row ? Json::array({(*row)[0], (*row)[1]}) : Json(nullptr));
  return dump(out);
}

}  // namespace ih::json
