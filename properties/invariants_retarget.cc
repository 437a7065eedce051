// Retargeting invariants (invariants.h). One translation unit per surface, so a fuzz target links only its own.
#include "properties/invariants.h"

#include "models/retarget.h"
#include "models/text.h"

namespace ih::invariants {
namespace {

const std::string* sharded_key(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return &t->key;
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return &o->key;
  if (const auto* f = std::get_if<ShardedTensorFactory>(&leaf)) return &f->key;
  return nullptr;
}

std::string show_entry(const FlatEntry& e) {
  const std::string* key = sharded_key(e.entry);
  std::string out = e.path + (key ? " (key " + *key + ")" : std::string(" (not sharded)"));
  if (const auto* t = std::get_if<ShardedTensor>(&e.entry))
    out += " global (" + join_ints(t->global_shape, ",") + ") offset (" + join_ints(t->global_offset, ",") +
           ") local (" + join_ints(t->local_shape, ",") + ") prepend " + std::to_string(t->prepend_axis_num);
  if (const auto* o = std::get_if<ShardedObject>(&e.entry))
    out += " global (" + join_ints(o->global_shape, ",") + ") offset (" + join_ints(o->global_offset, ",") + ")";
  return out;
}

}  // namespace

bool is_model_key(std::string_view key) {
  // One pass of the key rewrite (spec 2.4): the first layer index removed, or else the first
  // decoder.final_norm. renamed. A model key is one that rewrite leaves with nothing to rewrite.
  std::string once(key);
  if (const auto match = find_decoder_layer(key))
    once = std::string(key.substr(0, match->begin)) + "decoder.layers." + std::string(key.substr(match->end));
  else if (const std::size_t pos = key.find(kHybridFinalNorm); pos != std::string_view::npos)
    once.replace(pos, kHybridFinalNorm.size(), kGptFinalNorm);
  return !find_decoder_layer(once) && once.find(kHybridFinalNorm) == std::string::npos;
}

bool only_model_keys(const std::vector<FlatEntry>& entries) {
  for (const FlatEntry& e : entries)
    if (const std::string* key = sharded_key(e.entry); key && !is_model_key(*key)) return false;
  return true;
}

Broken retarget_keeps_paths(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after) {
  if (before.size() != after.size())
    return "retargeting changed the entry count: " + std::to_string(before.size()) + " -> " +
           std::to_string(after.size());
  for (std::size_t i = 0; i < before.size(); ++i)
    if (before[i].path != after[i].path) return "path " + before[i].path + " became " + after[i].path;
  return "";
}

Broken retarget_no_index_fresh_local(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after,
                                     const GptCompatLayerMaps& maps) {
  if (Broken b = retarget_keeps_paths(before, after); !b.empty()) return b;
  for (std::size_t i = 0; i < before.size(); ++i) {
    const std::string* was = sharded_key(before[i].entry);
    if (!was || !is_model_key(*was)) continue;
    if (const std::string* now = sharded_key(after[i].entry); now && find_decoder_layer(*now))
      return "still carries a hybrid index: " + show_entry(after[i]);
    const auto match = find_decoder_layer(*was);
    const bool fresh = match && match->index && maps.is_fresh(*match->index);
    const bool omitted =
        was->size() >= kOmittedLocalKeySuffix.size() &&
        std::string_view(*was).substr(was->size() - kOmittedLocalKeySuffix.size()) == kOmittedLocalKeySuffix;
    if ((fresh || omitted) && is_sharded_base(after[i].entry))
      return "entry " + before[i].path + " should be local, is still sharded: " + show_entry(after[i]);
  }
  return "";
}

Broken retarget_idempotent(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& once,
                           const std::vector<FlatEntry>& twice) {
  if (once.size() != twice.size() || before.size() != once.size()) return "a second pass changed the entry count";
  for (std::size_t i = 0; i < once.size(); ++i) {
    const std::string* key = sharded_key(before[i].entry);
    if (key && !is_model_key(*key)) continue;
    if (!(once[i] == twice[i])) return "a second pass changed " + show_entry(once[i]) + " -> " + show_entry(twice[i]);
  }
  return "";
}

Broken fsdp_prefix_recovery(Implementation& impl, std::string_view pattern, std::string_view key,
                            const std::vector<std::string>& checkpoint_keys, const std::vector<std::string>& captures) {
  const auto plain = impl.fsdp_key(pattern, key, std::nullopt);
  if (!plain.ok() || !*plain)
    return "fsdp_key('" + std::string(key) + "') without checkpoint keys failed or dropped the key";
  const auto got = impl.fsdp_key(pattern, key, checkpoint_keys);
  const std::string want = captures.size() == 1 ? captures[0] : **plain;
  if (got.ok() && *got && **got == want) return "";
  return "fsdp_key('" + std::string(key) + "') with " + std::to_string(captures.size()) +
         " distinct captures should become '" + want + "', got " +
         (got.ok() ? (*got ? "'" + **got + "'" : std::string("None")) : got.error().message);
}

}  // namespace ih::invariants
