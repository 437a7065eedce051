// Fuzzes the pattern grammar and GPT layer maps with arbitrary bytes. Beyond "no crash" it checks
// spec invariants: maps are consistent, pipes and a trailing '/' never change them (spec 2.9),
// and segment selection never reads outside the pattern.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "models/gpt_layer_maps.h"
#include "models/hybrid_pattern.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 512) return 0;
  const std::string text(reinterpret_cast<const char*>(data), size);
  const auto parsed = ih::pattern::parse(std::string_view(text));
  const auto maps = ih::gpt_compatible_layer_maps(std::string_view(text));
  if (maps.ok()) {
    IH_FUZZ_CHECK(parsed.ok(), "layer maps exist only for parseable patterns");
    IH_FUZZ_CHECK(maps->attention_to_gpt.size() == static_cast<std::size_t>(maps->num_gpt_layers), "one attention per GPT layer");
    IH_FUZZ_CHECK(maps->mlp_to_gpt.size() == maps->attention_to_gpt.size(), "one MLP per GPT layer");
    const std::string main = ih::pattern::strip_pipes(parsed->main.value_or(""));
    const auto total = maps->attention_to_gpt.size() + maps->mlp_to_gpt.size() + maps->fresh_init.size();
    IH_FUZZ_CHECK(total == main.size(), "every layer is attention, MLP or fresh");
    const auto stripped = ih::gpt_compatible_layer_maps(std::string_view(main));
    IH_FUZZ_CHECK(stripped.ok() && *stripped == *maps, "maps invariant under pipe removal");
    const auto trailing = ih::gpt_compatible_layer_maps(std::string_view(text + "/"));
    IH_FUZZ_CHECK(trailing.ok() && *trailing == *maps, "maps invariant under a trailing '/'");
  }
  if (parsed.ok()) {
    const std::string main = parsed->main.value_or("");
    for (std::int64_t pp = 1; pp <= 4; ++pp)
      for (std::int64_t rank = 0; rank < pp; ++rank) {
        const auto stage = ih::pattern::select_segment(main, {rank, pp, std::nullopt, std::nullopt, std::nullopt});
        if (stage.ok())
          IH_FUZZ_CHECK(stage->offset >= 0 && stage->layers.size() <= ih::pattern::strip_pipes(main).size(),
                        "a stage's layers lie inside the pattern");
      }
  }
  return 0;
}
