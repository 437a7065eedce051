// The retarget rules of spec 2.4 applied key by key: omitted suffix, layer index (fresh, sourced,
// unknown, any prefix), final norm (first occurrence, any prefix), everything else unchanged.
#include "models/retarget.h"
#include "properties/suite.h"

namespace ih::props {
namespace {

Leaf entry_for(const std::string& key, std::uint64_t id) {
  if (key.ends_with("_extra_state")) return ShardedObject{key, ObjectRef{id}, {1}, {0}, ReplicaId::tuple({0, 0, 0})};
  return ShardedTensor::from_rank_offsets(key, {4}, {}, ReplicaId::tuple({0, 0, 0}), 0,
                                          TensorValue::of_storage(id, {4}))
      .value();
}

Payload payload_of(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return *t->data;
  return ih::payload_of(*std::get<ShardedObject>(leaf).data);
}

/// The key, shape and offset spec 2.4 gives one entry; nullopt: it becomes LNP(original data).
struct Expected {
  std::optional<std::string> key;
  Shape shape, offset;
};

Expected expected_for(const std::string& key, const GptCompatLayerMaps& maps, bool object) {
  if (key.ends_with(kOmittedLocalKeySuffix)) return {};
  const Shape inner = object ? Shape{} : Shape{4}, zero = object ? Shape{} : Shape{0};
  if (const auto m = find_decoder_layer(key)) {
    if (maps.is_fresh(*m->index)) return {};
    const std::int64_t gi = *maps.gpt_layer_of(*m->index);
    Shape shape{maps.num_gpt_layers}, offset{gi};
    shape.insert(shape.end(), inner.begin(), inner.end());
    offset.insert(offset.end(), zero.begin(), zero.end());
    return {key.substr(0, m->begin) + "decoder.layers." + key.substr(m->end), shape, offset};
  }
  std::string out = key;
  if (const std::size_t at = out.find(kHybridFinalNorm); at != std::string::npos)
    out.replace(at, kHybridFinalNorm.size(), kGptFinalNorm);
  return {out, object ? Shape{1} : inner, object ? Shape{0} : zero};
}

Verdict check_entry(const Leaf& in, const Leaf& out, const Expected& want) {
  const std::string& key =
      std::holds_alternative<ShardedTensor>(in) ? std::get<ShardedTensor>(in).key : std::get<ShardedObject>(in).key;
  if (!want.key) {
    const auto* lnp = std::get_if<LocalNonpersistent>(&out);
    return lnp && lnp->payload == payload_of(in) ? "" : "'" + key + "' should become LNP(original data)";
  }
  if (const auto* t = std::get_if<ShardedTensor>(&out);
      t && t->key == *want.key && t->global_shape == want.shape && t->global_offset == want.offset)
    return "";
  if (const auto* o = std::get_if<ShardedObject>(&out);
      o && o->key == *want.key && o->global_shape == want.shape && o->global_offset == want.offset)
    return "";
  return "'" + key + "' should become '" + *want.key + "' with the spec 2.4/2.5 shape and offset";
}

Verdict key_rules(Implementation& impl, const KeyRulesCase& c) {
  IH_VERDICT_ASSIGN(maps, gpt_compatible_layer_maps(std::string_view(c.pattern)));
  std::vector<FlatEntry> entries;
  bool unknown = false;
  for (std::size_t i = 0; i < c.keys.size(); ++i) {
    entries.push_back({"e" + std::to_string(i), entry_for(c.keys[i], i + 1)});
    const auto m = find_decoder_layer(c.keys[i]);
    unknown |=
        m && !c.keys[i].ends_with(kOmittedLocalKeySuffix) && !maps.is_fresh(*m->index) && !maps.gpt_layer_of(*m->index);
  }
  const auto got = impl.retarget(c.pattern, entries);
  if (unknown)
    return !got.ok() && got.error().kind == ErrorKind::unknown_hybrid_layer
               ? ""
               : "an unknown hybrid layer index must raise unknown_hybrid_layer";
  if (!got.ok()) return std::string(to_string(got.error().kind)) + ": " + got.error().message;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const bool object = std::holds_alternative<ShardedObject>(entries[i].entry);
    if (Verdict v = check_entry(entries[i].entry, (*got)[i].entry, expected_for(c.keys[i], maps, object)); !v.empty())
      return v;
  }
  return "";
}

KeyRulesCase spec_keys() {
  return {"M*-M*-",
          {"decoder.final_norm.weight", "optimizer.state.fp32_param.decoder.final_norm.weight",
           "optimizer.state.exp_avg.decoder.layers.1.self_attention.linear_qkv.weight",
           "decoder.layers.5.mlp.linear_fc2._extra_state", "module.output_layer._extra_state", "output_layer.weight",
           "decoder.layers.0.mixer.in_proj.weight"}};
}

}  // namespace

Property key_rules_property() {
  return make_property<KeyRulesCase>("retarget_key_rules", "retarget",
                                     "each key follows spec 2.4: suffix omission, layer index, final norm, unknown "
                                     "index raises (6.15, 6.16, 6.21, 6.22)",
                                     genKeyRulesCase(), key_rules, {{"spec_2_5", spec_keys()}});
}

}  // namespace ih::props
