// Fuzzes the sharded-state-dict JSON codec and retargeting: any bytes must give a typed error or a
// retargeted state dict with the same paths, no layer index left in a sharded key, and a second
// pass that changes nothing (spec 2.9).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "codec/json_codec.h"
#include "seam/reference_implementation.h"
#include "models/retarget.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 64 * 1024) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto document = ih::json::parse(text);
  if (!document.ok()) return 0;
  const auto entries = ih::json::entries_from_json(*document);
  if (!entries.ok()) return 0;
  ih::ReferenceImplementation reference;
  for (const char* pattern : {"M*-M*-", "*E*E", "MM*-|M*-"}) {
    const auto once = reference.retarget(pattern, *entries);
    if (!once.ok()) continue;
    IH_FUZZ_CHECK(once->size() == entries->size(), "retargeting keeps every path");
    for (std::size_t i = 0; i < once->size(); ++i) {
      IH_FUZZ_CHECK((*once)[i].path == (*entries)[i].path, "paths are never renamed");
      if (const auto* t = std::get_if<ih::ShardedTensor>(&(*once)[i].entry)) {
        IH_FUZZ_CHECK(!ih::find_decoder_layer(t->key), "no hybrid layer index survives");
        IH_FUZZ_CHECK(t->global_shape.size() == t->global_offset.size(), "shape and offset ranks agree");
      }
    }
    const auto twice = reference.retarget(pattern, *once);
    IH_FUZZ_CHECK(twice.ok() && *twice == *once, "a second retarget pass changes nothing");
    const auto round = ih::json::entries_from_json(ih::json::entries_to_json(*once));
    IH_FUZZ_CHECK(round.ok() && *round == *once, "the JSON form round-trips");
  }
  return 0;
}
