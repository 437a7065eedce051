#include "models/result.h"

namespace ih {

std::string_view model_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::invalid_symbol: return "invalid_symbol";
    case ErrorKind::mtp_not_identical: return "mtp_not_identical";
    case ErrorKind::attention_with_mla_dsa: return "attention_with_mla_dsa";
    case ErrorKind::mtp_present: return "mtp_present";
    case ErrorKind::empty_pattern: return "empty_pattern";
    case ErrorKind::untranslatable_layer_types: return "untranslatable_layer_types";
    case ErrorKind::mixed_mlp_kinds: return "mixed_mlp_kinds";
    case ErrorKind::unbalanced_attention_mlp: return "unbalanced_attention_mlp";
    case ErrorKind::unknown_layer_symbol: return "unknown_layer_symbol";
    case ErrorKind::pipe_with_first_last: return "pipe_with_first_last";
    case ErrorKind::vpp_without_pipes: return "vpp_without_pipes";
    case ErrorKind::middle_not_divisible: return "middle_not_divisible";
    case ErrorKind::layers_not_divisible_by_pp: return "layers_not_divisible_by_pp";
    case ErrorKind::segments_not_divisible_by_pp: return "segments_not_divisible_by_pp";
    case ErrorKind::segment_out_of_range: return "segment_out_of_range";
    case ErrorKind::unknown_hybrid_layer: return "unknown_hybrid_layer";
    case ErrorKind::uneven_prepend: return "uneven_prepend";
    case ErrorKind::metadata_integrity: return "metadata_integrity";
    case ErrorKind::invalid_rank_offsets: return "invalid_rank_offsets";
    case ErrorKind::narrow_misaligned: return "narrow_misaligned";
    case ErrorKind::merge_key_mismatch: return "merge_key_mismatch";
    case ErrorKind::merge_list_length: return "merge_list_length";
    case ErrorKind::merge_duplicate_leaf: return "merge_duplicate_leaf";
    case ErrorKind::split_sections_mismatch: return "split_sections_mismatch";
    case ErrorKind::invalid_layout_parameter: return "invalid_layout_parameter";
    case ErrorKind::gtp_indivisible: return "gtp_indivisible";
    case ErrorKind::gtp_group_too_large: return "gtp_group_too_large";
    case ErrorKind::load_not_covered: return "load_not_covered";
    case ErrorKind::sharding_assertion: return "sharding_assertion";
    case ErrorKind::invalid_sharding_pattern: return "invalid_sharding_pattern";
    case ErrorKind::gtp_replica_group_unknown: return "gtp_replica_group_unknown";
    case ErrorKind::global_shape_mismatch: return "global_shape_mismatch";
    case ErrorKind::strict_load_keys: return "strict_load_keys";
    case ErrorKind::invalid_argument: return "invalid_argument";
    case ErrorKind::overflow: return "overflow";
    case ErrorKind::bad_json: return "bad_json";
    case ErrorKind::not_modelled: return "not_modelled";
  }
  return "";
}

}  // namespace ih
