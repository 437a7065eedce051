// Fuzzes the sharded-state-dict JSON codec and retargeting: any bytes must give a typed error or a
// retargeted state dict that keeps its paths, drops every layer index of a model key, keeps fresh
// layers local, and that a second pass leaves alone (spec 2.9). The invariants are the properties'
// own bodies (properties/invariants.h); only the JSON round trip is the codec's, checked here.
// Keys no model produces (two layer indices, or decoder.final_norm. after a layer key) are outside
// the idempotence invariant: Megatron's retarget renames them again on a second pass as well
// (corpus/state_dict_fuzzer/final_norm_after_layer_key, docs/guides/adding-a-fuzz-target.md).
#include <cstddef>
#include <cstdint>
#include <string>

#include "codec/json_codec.h"
#include "fuzz/fuzz_check.h"
#include "properties/invariants.h"
#include "seam/reference_implementation.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto document = ih::json::parse(text);
  if (!document.ok()) return 0;
  const auto entries = ih::json::entries_from_json(*document);
  if (!entries.ok()) return 0;
  static ih::ReferenceImplementation reference;
  for (const char* pattern : {"M*-M*-", "*E*E", "MM*-|M*-"}) {
    const auto once = reference.retarget(pattern, *entries);
    if (!once.ok()) continue;
    const auto maps = reference.layer_maps(std::string_view(pattern));
    IH_FUZZ_CHECK(maps.ok(), "the fixed patterns have maps");
    IH_FUZZ_INVARIANT(ih::invariants::retarget_no_index_fresh_local(*entries, *once, *maps));
    const auto twice = reference.retarget(pattern, *once);
    if (!twice.ok()) {  // only a key naming a second layer can refer to one the pattern lacks
      IH_FUZZ_CHECK(!ih::invariants::only_model_keys(*entries), "a second retarget pass of model keys succeeds");
      continue;
    }
    IH_FUZZ_INVARIANT(ih::invariants::retarget_idempotent(*entries, *once, *twice));
    const auto round = ih::json::entries_from_json(ih::json::entries_to_json(*once));
    IH_FUZZ_CHECK(round.ok() && *round == *once, "the JSON form round-trips");
  }
  return 0;
}
