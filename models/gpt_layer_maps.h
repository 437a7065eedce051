// GPT-compatible layer maps (spec 2.2): which hybrid layer reads which GPT layer.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "models/hybrid_pattern.h"
#include "models/result.h"

namespace ih {

/// GPTCompatLayerMaps: compares by value, like Megatron's frozen dataclass.
struct GptCompatLayerMaps {
  pattern::IndexMap attention_to_gpt;    // (hybrid index of the i-th '*', i), ascending
  pattern::IndexMap mlp_to_gpt;          // (hybrid index of the i-th '-' or 'E', i), ascending
  std::vector<std::int64_t> fresh_init;  // hybrid indices of 'M' positions, ascending
  std::int64_t num_gpt_layers = 0;

  /// attention_to_gpt.get(h), falling back to mlp_to_gpt.get(h) (spec 2.4 rule 2).
  std::optional<std::int64_t> gpt_layer_of(std::int64_t hybrid_index) const;
  bool is_fresh(std::int64_t hybrid_index) const;
  bool operator==(const GptCompatLayerMaps&) const = default;
};

/// gpt_compatible_layer_maps (spec 2.2), checks in Megatron's exact order; nullopt is Python None.
Result<GptCompatLayerMaps> gpt_compatible_layer_maps(std::optional<std::string_view> pattern);

}  // namespace ih
