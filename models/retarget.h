// GPT->Hybrid load-time retargeting (spec 2.4-2.7): the sharded path and the FSDP explicit-key path.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/gpt_layer_maps.h"
#include "models/state_tree.h"

namespace ih {

/// Where `decoder.layers.<n>.` first occurs in a key (unanchored search, spec 2.1).
struct LayerKeyMatch {
  std::size_t begin = 0;              // index of "decoder.layers."
  std::size_t end = 0;                // one past the dot after the digits
  std::string digits;                 // the index as written (leading zeros kept)
  std::optional<std::int64_t> index;  // int(digits); nullopt when it exceeds 64 bits
};
std::optional<LayerKeyMatch> find_decoder_layer(std::string_view key);

inline constexpr std::string_view kOmittedLocalKeySuffix = "output_layer._extra_state";
inline constexpr std::string_view kHybridFinalNorm = "decoder.final_norm.";
inline constexpr std::string_view kGptFinalNorm = "decoder.final_layernorm.";

/// retarget_sharded_state_dict_to_gpt_checkpoint (spec 2.4-2.6), in place. Stops at the first error.
Status retarget_sharded_state_dict(StateNode& tree, const GptCompatLayerMaps& maps);

/// _retarget_explicit_key_to_gpt_checkpoint (spec 2.7): nullopt drops the entry; int keys pass.
Result<std::optional<DictKey>> retarget_fsdp_key(const DictKey& key, const GptCompatLayerMaps& maps,
                                                 const std::vector<std::string>* checkpoint_keys);

/// retarget_fsdp_state_dict_to_gpt_checkpoint (spec 2.7): a new tree under GPT keys.
Result<StateNode> retarget_fsdp_state_dict(const StateNode& state_dict, const GptCompatLayerMaps& maps,
                                           const std::optional<std::vector<std::string>>& checkpoint_keys,
                                           std::string_view checkpoint_prefix);

}  // namespace ih
