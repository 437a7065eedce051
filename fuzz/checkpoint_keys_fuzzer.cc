// Fuzzes checkpoint-key retargeting on both paths: the sharded path (spec 2.4-2.6; each key as a
// ShardedObject and a ShardedTensor) and the FSDP explicit-key path (spec 2.7). Input: one byte
// choosing the hybrid pattern, then keys separated by '\n'. The invariants are the properties'
// own bodies (properties/invariants.h): no layer index or fresh layer survives, a second pass is a
// no-op for model keys, and an FSDP key takes the checkpoint's module. prefix exactly when one
// distinct capture exists.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "models/text.h"
#include "properties/invariants.h"
#include "seam/reference_implementation.h"

namespace {

constexpr const char* kPatterns[] = {"M*-M*-", "*E*E", "MM*-|M*-", "*-*-*-*-*-*-*-*-*-*-*-*-"};

std::string strip_leading_modules(std::string key) {
  while (key.rfind("module.", 0) == 0) key.erase(0, 7);
  return key;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 1 || size > 4096) return 0;
  static ih::ReferenceImplementation reference;
  const std::string pattern = kPatterns[data[0] % 4];
  const auto maps = reference.layer_maps(std::string_view(pattern));
  IH_FUZZ_CHECK(maps.ok(), "the fixed patterns have maps");
  const std::vector<std::string> keys =
      ih::split(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1), '\n');
  if (keys.size() > 32) return 0;

  std::vector<ih::FlatEntry> entries;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    entries.push_back({"o" + std::to_string(i), ih::ShardedObject{keys[i], std::nullopt, {1}, {0}, ih::ReplicaId{}}});
    ih::ShardedTensor t;
    t.key = keys[i];
    t.global_shape = {4};
    t.global_offset = {0};
    t.local_shape = {4};
    t.axis_fragmentations = ih::Shape{1};
    entries.push_back({"t" + std::to_string(i), std::move(t)});
  }
  if (const auto once = reference.retarget(pattern, entries); once.ok()) {
    IH_FUZZ_INVARIANT(ih::invariants::retarget_no_index_fresh_local(entries, *once, *maps));
    const auto twice = reference.retarget(pattern, *once);
    if (!twice.ok())  // only a key naming a second layer can refer to one the pattern lacks
      IH_FUZZ_CHECK(!ih::invariants::only_model_keys(entries), "a second retarget pass of model keys succeeds");
    else
      IH_FUZZ_INVARIANT(ih::invariants::retarget_idempotent(entries, *once, *twice));
  }

  for (const std::string& key : keys) {
    const auto plain = reference.fsdp_key(pattern, key, std::nullopt);
    if (!plain.ok() || !*plain) continue;  // unknown layer (typed error) or dropped (fresh, omitted)
    const std::string bare = strip_leading_modules(**plain);
    // "x" + bare never matches: the capture must not follow a word character (spec 2.7).
    const std::string one = "module." + bare, two = "module.module." + bare;
    IH_FUZZ_INVARIANT(ih::invariants::fsdp_prefix_recovery(reference, pattern, key, {one, "x" + bare}, {one}));
    IH_FUZZ_INVARIANT(ih::invariants::fsdp_prefix_recovery(reference, pattern, key, {one, two}, {one, two}));
  }
  return 0;
}
