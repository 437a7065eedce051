// Hybrid layer pattern grammar (spec 1): symbols, parsing, counting, pipeline segments, type maps.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/result.h"

namespace ih::pattern {

inline constexpr char kMamba = 'M';
inline constexpr char kGdn = 'G';
inline constexpr char kAttention = '*';
inline constexpr char kDsAttention = 'D';
inline constexpr char kMla = '+';
inline constexpr char kMlp = '-';
inline constexpr char kMoe = 'E';
inline constexpr char kPipe = '|';
inline constexpr char kMtpSeparator = '/';

/// The valid layer symbols ordered by Megatron's attribute names (spec 1.1): * D G M + - E.
inline constexpr std::array<char, 7> kNameSortedSymbols = {kAttention, kDsAttention, kGdn, kMamba, kMla, kMlp, kMoe};

/// True for the seven layer symbols (separators are never layers).
bool is_layer_symbol(char c);
/// Position of a layer symbol in kNameSortedSymbols, or -1.
int symbol_index(char c);

/// parse_hybrid_pattern's result (spec 1.3). `main` and `mtp` are None where Python returns None.
struct ParsedPattern {
  std::optional<std::string> main;
  std::optional<std::string> mtp;
  std::int64_t mtp_depth = 0;
  bool operator==(const ParsedPattern&) const = default;
};

/// spec 1.3; nullopt input means Python None.
Result<ParsedPattern> parse(std::optional<std::string_view> pattern);

/// The main pattern with every pipe removed.
std::string strip_pipes(std::string_view main);

/// get_hybrid_total_layer_count (spec 1.4): validates the text before the first '/'.
Result<std::int64_t> total_layer_count(std::string_view pattern);
/// get_hybrid_total_pipeline_segment_count (spec 1.4): pipes before the first '/' plus one.
std::int64_t pipeline_segment_count(std::string_view pattern);

/// Per-symbol counts in name-sorted order (index with symbol_index).
using LayerCounts = std::array<std::int64_t, 7>;
/// get_hybrid_layer_counts (spec 1.4): main (pipes ignored) plus MTP times depth.
Result<LayerCounts> layer_counts(std::string_view pattern);

/// What select_pipeline_segment is asked (spec 1.6).
struct SegmentRequest {
  std::int64_t pp_rank = 0;
  std::int64_t pp_size = 1;
  std::optional<std::int64_t> vp_stage;
  std::optional<std::int64_t> first_stage_layers;
  std::optional<std::int64_t> last_stage_layers;
};

/// The layers one pipeline stage builds and the global index of its first layer.
struct SegmentSelection {
  std::string layers;
  std::int64_t offset = 0;
  bool operator==(const SegmentSelection&) const = default;
};

/// select_pipeline_segment (spec 1.6), including the legacy path's unchecked corners.
Result<SegmentSelection> select_segment(std::string_view main, const SegmentRequest& request);

/// (global index, ordinal within its type) pairs, ascending by global index.
using IndexMap = std::vector<std::pair<std::int64_t, std::int64_t>>;
/// One IndexMap per symbol, name-sorted order (index with symbol_index).
using LayerTypeMaps = std::array<IndexMap, 7>;
/// get_layer_maps_from_layer_type_list (spec 1.7); a non-layer char is an unknown_layer_symbol error.
Result<LayerTypeMaps> layer_maps_from_types(std::string_view layer_chars);

}  // namespace ih::pattern
