// Retarget mutants (spec 6.15-6.22): the reference's answer, perturbed entry by entry. Input and
// output are flat dicts with the same paths in the same order, so entry i of one is entry i of the other.
#include "models/retarget.h"
#include "mutants/mutant_implementation.h"

namespace ih {
namespace {

const std::string* key_of(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return &t->key;
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return &o->key;
  if (const auto* f = std::get_if<ShardedTensorFactory>(&leaf)) return &f->key;
  return nullptr;
}

std::string* mutable_key(Leaf& leaf) { return const_cast<std::string*>(key_of(leaf)); }

bool is_placeholder(const Leaf& leaf) {
  const auto* o = std::get_if<ShardedObject>(&leaf);
  return o && o->global_shape == Shape{1} && o->global_offset == Shape{0};
}

/// Entries whose layer index the maps do not know; the rest are retargeted by the reference.
bool is_unknown_layer(const FlatEntry& e, const GptCompatLayerMaps& maps) {
  const std::string* key = key_of(e.entry);
  const auto match = key ? find_decoder_layer(*key) : std::nullopt;
  return match && (!match->index || (!maps.is_fresh(*match->index) && !maps.gpt_layer_of(*match->index)));
}

/// One entry of the mutant's answer from the input entry and the reference's answer.
void perturb(Mutant mutant, const FlatEntry& in, FlatEntry& out, const GptCompatLayerMaps& maps) {
  const std::string* in_key = key_of(in.entry);
  if (!in_key) return;
  const auto match = find_decoder_layer(*in_key);
  const bool fresh = match && match->index && maps.is_fresh(*match->index);
  const std::size_t norm = in_key->find(kHybridFinalNorm);
  std::string* out_key = mutable_key(out.entry);
  if (mutant == Mutant::retarget_final_layer_norm && !match && norm != std::string::npos && out_key)
    out_key->replace(norm, kGptFinalNorm.size(), "decoder.final_layer_norm.");
  if (mutant == Mutant::retarget_final_norm_anchored && !match && norm != std::string::npos && norm > 0) out = in;
  if (mutant == Mutant::retarget_anchored_layer_regex && match && match->begin > 0) out = in;
  if (mutant == Mutant::retarget_drop_optimizer_prefix && match && match->begin > 0 && !fresh && out_key)
    out_key->erase(0, match->begin);
  if (mutant == Mutant::retarget_index_renumbered && match && !fresh && out_key && match->index) {
    const auto gi = maps.gpt_layer_of(*match->index);  // FSDP-style renumbering on the sharded path
    if (gi) out_key->insert(match->begin + 15, std::to_string(*gi) + ".");
  }
  if (mutant == Mutant::retarget_omitted_by_equality && in_key->ends_with(kOmittedLocalKeySuffix) &&
      *in_key != kOmittedLocalKeySuffix)
    out = in;
  if (!match || fresh) {
    if (mutant == Mutant::retarget_fresh_left_sharded && fresh && !std::holds_alternative<ShardedTensor>(in.entry))
      out = in;
    return;
  }
  if (auto* o = std::get_if<ShardedObject>(&out.entry);
      o && mutant == Mutant::retarget_so_placeholder_prepended && is_placeholder(in.entry)) {
    o->global_shape.push_back(1);
    o->global_offset.push_back(0);
  }
  if (auto* t = std::get_if<ShardedTensor>(&out.entry); t && mutant == Mutant::retarget_prepend_axis_not_incremented)
    t->prepend_axis_num -= 1;
  if (auto* f = std::get_if<ShardedTensorFactory>(&out.entry);
      f && mutant == Mutant::retarget_factory_wrapped_twice && !f->build_wrappers.empty())
    f->build_wrappers.push_back(f->build_wrappers.back());
}

}  // namespace

Result<std::vector<FlatEntry>> MutantImplementation::retarget(std::string_view pattern,
                                                              const std::vector<FlatEntry>& entries) {
  if (!is(Mutant::retarget_unknown_layer_skipped)) {
    IH_TRY_ASSIGN(out, ReferenceImplementation::retarget(pattern, entries));
    return perturb_retarget(pattern, entries, std::move(out));
  }
  IH_TRY_ASSIGN(maps, ReferenceImplementation::layer_maps(pattern));
  std::vector<FlatEntry> known;
  for (const FlatEntry& e : entries)
    if (!is_unknown_layer(e, maps)) known.push_back(e);
  IH_TRY_ASSIGN(done, ReferenceImplementation::retarget(pattern, known));
  std::vector<FlatEntry> out;
  std::size_t next = 0;
  for (const FlatEntry& e : entries) out.push_back(is_unknown_layer(e, maps) ? e : done[next++]);  // skipped silently
  return out;
}

Result<std::vector<FlatEntry>> MutantImplementation::perturb_retarget(std::string_view pattern,
                                                                      const std::vector<FlatEntry>& in,
                                                                      std::vector<FlatEntry> out) {
  if (out.size() != in.size()) return out;
  IH_TRY_ASSIGN(maps, ReferenceImplementation::layer_maps(pattern));
  for (std::size_t i = 0; i < in.size(); ++i) perturb(info_.id, in[i], out[i], maps);
  addendum_retarget(in, out);
  return out;
}

}  // namespace ih
