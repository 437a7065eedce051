#include "seam/reference_implementation.h"

#include "models/retarget.h"

namespace ih {

Result<pattern::ParsedPattern> ReferenceImplementation::parse_pattern(std::optional<std::string_view> text) {
  return pattern::parse(text);
}

Result<GptCompatLayerMaps> ReferenceImplementation::layer_maps(std::optional<std::string_view> text) {
  return gpt_compatible_layer_maps(text);
}

Result<pattern::SegmentSelection> ReferenceImplementation::select_segment(std::string_view main,
                                                                          const pattern::SegmentRequest& request) {
  return pattern::select_segment(main, request);
}

Result<std::vector<FlatEntry>> ReferenceImplementation::retarget(std::string_view pattern,
                                                                 const std::vector<FlatEntry>& entries) {
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(pattern));
  IH_TRY_ASSIGN(tree, unflatten(entries));
  IH_TRY_STATUS(retarget_sharded_state_dict(tree, maps));
  return flatten(tree);
}

Result<std::optional<std::string>> ReferenceImplementation::fsdp_key(
    std::string_view pattern, std::string_view key, const std::optional<std::vector<std::string>>& checkpoint_keys) {
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(pattern));
  IH_TRY_ASSIGN(translated,
                retarget_fsdp_key(DictKey(std::string(key)), maps, checkpoint_keys ? &*checkpoint_keys : nullptr));
  if (!translated) return std::optional<std::string>();
  return std::optional<std::string>(to_string(*translated));
}

Result<StateNode> ReferenceImplementation::fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                                         const std::optional<std::vector<std::string>>& checkpoint_keys,
                                                         std::string_view prefix) {
  IH_TRY_ASSIGN(maps, gpt_compatible_layer_maps(pattern));
  return retarget_fsdp_state_dict(tree, maps, checkpoint_keys, prefix);
}

}  // namespace ih
