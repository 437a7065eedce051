#include "models/hybrid_pattern.h"

#include <algorithm>
#include <array>
#include <tuple>

#include "models/checked_math.h"
#include "models/text.h"

namespace ih::pattern {
namespace {

// Python prints the set; its order is hash-dependent, so we print the class-definition order.
constexpr std::string_view kValidSymbolsText = "{'M', 'G', '*', 'D', '+', '-', 'E'}";
constexpr std::string_view kValidSymbolsWithPipeText = "{'M', 'G', '*', 'D', '+', '-', 'E', '|'}";

bool mixes_attention_and_mla(std::string_view text) {
  return text.find(kAttention) != std::string_view::npos &&
         (text.find(kDsAttention) != std::string_view::npos || text.find(kMla) != std::string_view::npos);
}

Error attention_with_mla_error() {
  return make_error(ErrorKind::attention_with_mla_dsa, "Not supported to have both Attention and MLA/DSA in one model");
}

/// _validate_pattern: first invalid char wins, then the attention + MLA/DSA rule.
Status validate_pattern(std::string_view text, std::string_view name, bool allow_pipe) {
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (is_layer_symbol(c) || (allow_pipe && c == kPipe)) continue;
    return make_error(ErrorKind::invalid_symbol,
                      "In " + std::string(name) + " pattern, '" + utf8_char_at(text, i) +
                          "' is not a valid layer symbol. Valid symbols are: " +
                          std::string(allow_pipe ? kValidSymbolsWithPipeText : kValidSymbolsText));
  }
  if (mixes_attention_and_mla(text)) return attention_with_mla_error();
  return Ok{};
}

/// validate_segment_layers: layer symbols only (pipe and '/' rejected), then the MLA rule.
Status validate_segment(std::string_view segment) {
  for (std::size_t i = 0; i < segment.size(); ++i) {
    if (is_layer_symbol(segment[i])) continue;
    return make_error(ErrorKind::invalid_symbol, "In hybrid layer pattern segment, '" + utf8_char_at(segment, i) +
                                                     "' is not one of " + std::string(kValidSymbolsText));
  }
  if (mixes_attention_and_mla(segment)) return attention_with_mla_error();
  return Ok{};
}

std::string_view before_first_mtp_separator(std::string_view pattern) {
  return pattern.substr(0, pattern.find(kMtpSeparator));
}

/// Python's text[start:stop] for possibly negative or out-of-range bounds.
std::string py_slice(std::string_view text, std::int64_t start, std::int64_t stop) {
  const auto n = static_cast<std::int64_t>(text.size());
  const auto clamp = [n](std::int64_t i) { return i < 0 ? std::max<std::int64_t>(0, i + n) : std::min(i, n); };
  const std::int64_t lo = clamp(start), hi = clamp(stop);
  return lo < hi ? std::string(text.substr(lo, hi - lo)) : std::string();
}

Result<SegmentSelection> select_legacy(std::string_view pattern, const SegmentRequest& r) {
  if (r.vp_stage)
    return make_error(ErrorKind::vpp_without_pipes,
                      "Virtual pipeline parallelism (vp_stage != None) is not supported when hybrid_layer_pattern "
                      "has no pipe ('|') separators. Add '|' separators to define explicit pipeline/virtual-pipeline "
                      "stage boundaries.");
  IH_TRY_STATUS(validate_segment(pattern));
  const auto num_layers = static_cast<std::int64_t>(pattern.size());
  std::int64_t offset = 0, count = 0;
  if (r.first_stage_layers || r.last_stage_layers) {
    const std::int64_t first = r.first_stage_layers.value_or(0), last = r.last_stage_layers.value_or(0);
    IH_TRY_ASSIGN(first_and_last, checked_add(first, last, "first + last stage layers"));
    IH_TRY_ASSIGN(middle_layers, checked_add(num_layers, -first_and_last, "middle layers"));
    const std::int64_t middle_stages = r.pp_size - (r.first_stage_layers ? 1 : 0) - (r.last_stage_layers ? 1 : 0);
    std::int64_t per_middle = 0;
    if (middle_stages > 0) {
      if (floor_mod(middle_layers, middle_stages) != 0)
        return make_error(ErrorKind::middle_not_divisible,
                          "Middle layers (" + std::to_string(middle_layers) +
                              ") must be evenly divisible by middle pipeline stages (" + std::to_string(middle_stages) +
                              ").");
      per_middle = floor_div(middle_layers, middle_stages);
    }
    if (r.first_stage_layers && r.pp_rank == 0) {
      count = first;
    } else if (r.last_stage_layers && r.pp_rank == r.pp_size - 1) {
      offset = num_layers - last;
      count = last;
    } else {
      const std::int64_t middle_rank = r.first_stage_layers ? r.pp_rank - 1 : r.pp_rank;
      IH_TRY_ASSIGN(scaled, checked_mul(middle_rank, per_middle, "middle stage offset"));
      IH_TRY_ASSIGN(shifted, checked_add(scaled, first, "middle stage offset"));
      offset = shifted;
      count = per_middle;
    }
  } else {
    if (num_layers % r.pp_size != 0)
      return make_error(ErrorKind::layers_not_divisible_by_pp,
                        "Number of layers (" + std::to_string(num_layers) +
                            ") must be evenly divisible by pipeline-model-parallel-size (" + std::to_string(r.pp_size) +
                            ") when no pipe separators are specified in the pattern.");
    count = num_layers / r.pp_size;
    offset = r.pp_rank * count;
  }
  IH_TRY_ASSIGN(stop, checked_add(offset, count, "segment end"));
  return SegmentSelection{py_slice(pattern, offset, stop), offset};
}

}  // namespace

bool is_layer_symbol(char c) { return symbol_index(c) >= 0; }

int symbol_index(char c) {
  // A table rather than a search: every character of every pattern passes here.
  static constexpr std::array<std::int8_t, 256> kIndexOfByte = [] {
    std::array<std::int8_t, 256> table{};
    table.fill(-1);
    for (std::size_t i = 0; i < kNameSortedSymbols.size(); ++i)
      table[static_cast<unsigned char>(kNameSortedSymbols[i])] = static_cast<std::int8_t>(i);
    return table;
  }();
  return kIndexOfByte[static_cast<unsigned char>(c)];
}

Result<ParsedPattern> parse(std::optional<std::string_view> pattern) {
  if (!pattern) return ParsedPattern{};
  if (pattern->find(kMtpSeparator) == std::string_view::npos) {  // no MTP part: nothing to split
    IH_TRY_STATUS(validate_pattern(*pattern, "main", true));
    return ParsedPattern{std::string(*pattern), std::nullopt, 0};
  }
  const std::vector<std::string_view> parts = split_views(*pattern, kMtpSeparator);
  const std::string_view main = parts[0];
  if (!main.empty()) IH_TRY_STATUS(validate_pattern(main, "main", true));
  const std::optional<std::string> main_or_none = main.empty() ? std::nullopt : std::optional<std::string>(main);
  const bool all_empty = std::all_of(parts.begin() + 1, parts.end(), [](std::string_view p) { return p.empty(); });
  if (all_empty) return ParsedPattern{main_or_none, std::nullopt, 0};
  const std::string_view first = parts[1];
  for (std::size_t i = 2; i < parts.size(); ++i) {
    if (parts[i] != first)
      return make_error(ErrorKind::mtp_not_identical, "All MTP patterns must be identical. Pattern 1 is '" +
                                                          std::string(first) + "', but pattern " + std::to_string(i) +
                                                          " is '" + std::string(parts[i]) + "'. Full pattern: '" +
                                                          std::string(*pattern) + "'");
  }
  IH_TRY_STATUS(validate_pattern(first, "MTP", false));
  return ParsedPattern{main_or_none, std::string(first), static_cast<std::int64_t>(parts.size() - 1)};
}

std::string strip_pipes(std::string_view main) {
  std::string out;
  out.reserve(main.size());
  for (const char c : main)
    if (c != kPipe) out += c;
  return out;
}

Result<std::int64_t> total_layer_count(std::string_view pattern) {
  const std::string_view main = before_first_mtp_separator(pattern);
  IH_TRY_STATUS(validate_pattern(main, "main", true));
  return static_cast<std::int64_t>(strip_pipes(main).size());
}

std::int64_t pipeline_segment_count(std::string_view pattern) {
  const std::string_view main = before_first_mtp_separator(pattern);
  return static_cast<std::int64_t>(std::count(main.begin(), main.end(), kPipe)) + 1;
}

Result<LayerCounts> layer_counts(std::string_view pattern) {
  IH_TRY_ASSIGN(parsed, parse(pattern));
  LayerCounts counts{};
  for (const char c : parsed.main.value_or(""))
    if (const int i = symbol_index(c); i >= 0) ++counts[i];
  for (const char c : parsed.mtp.value_or(""))
    if (const int i = symbol_index(c); i >= 0) counts[i] += parsed.mtp_depth;
  return counts;
}

Result<SegmentSelection> select_segment(std::string_view main, const SegmentRequest& r) {
  if (r.pp_size < 1 || r.pp_rank < 0 || r.pp_rank >= r.pp_size || (r.vp_stage && *r.vp_stage < 0))
    return make_error(ErrorKind::invalid_argument, "pp_rank " + std::to_string(r.pp_rank) + " / pp_size " +
                                                       std::to_string(r.pp_size) + " / vp_stage " +
                                                       (r.vp_stage ? std::to_string(*r.vp_stage) : "None") +
                                                       " is not a pipeline position");
  const std::vector<std::string> segments = split(main, kPipe);  // "" gives one empty segment
  const auto n = static_cast<std::int64_t>(segments.size());
  if (n > 1 && (r.first_stage_layers || r.last_stage_layers))
    return make_error(ErrorKind::pipe_with_first_last,
                      "Cannot specify num_layers_in_first_pipeline_stage or num_layers_in_last_pipeline_stage when "
                      "hybrid_layer_pattern contains pipe ('|') separators. The pipeline layout is already explicitly "
                      "defined by the pipe separators.");
  if (n == 1 && r.pp_size > 1) return select_legacy(segments[0], r);
  if (n > 1 && n % r.pp_size != 0)
    return make_error(ErrorKind::segments_not_divisible_by_pp,
                      "The number of pipe-delimited segments (" + std::to_string(n) +
                          ") in hybrid_layer_pattern must be evenly divisible by pipeline_model_parallel_size (" +
                          std::to_string(r.pp_size) + ").");
  const std::int64_t vp = r.vp_stage.value_or(0);
  IH_TRY_ASSIGN(scaled, checked_mul(vp, r.pp_size, "segment index"));
  const std::int64_t index = scaled + r.pp_rank;
  if (index >= n)
    return make_error(ErrorKind::segment_out_of_range,
                      "Pipeline segment index " + std::to_string(index) + " (pp_rank=" + std::to_string(r.pp_rank) +
                          ", vp_stage=" + std::to_string(vp) + ") is out of range for " + std::to_string(n) +
                          " segments. The pattern does not define enough pipe-delimited segments for the current "
                          "PP/VPP configuration.");
  std::int64_t offset = 0;
  for (std::int64_t i = 0; i < index; ++i) offset += static_cast<std::int64_t>(segments[i].size());
  IH_TRY_STATUS(validate_segment(segments[index]));
  return SegmentSelection{segments[index], offset};
}

Result<LayerTypeMaps> layer_maps_from_types(std::string_view layer_chars) {
  LayerTypeMaps maps;
  std::array<std::size_t, std::tuple_size_v<LayerTypeMaps>> counts{};  // one allocation per map, not a growth chain
  for (const char c : layer_chars)
    if (const int type = symbol_index(c); type >= 0) ++counts[type];
  for (std::size_t type = 0; type < counts.size(); ++type) maps[type].reserve(counts[type]);
  for (std::size_t global = 0; global < layer_chars.size(); ++global) {
    const int type = symbol_index(layer_chars[global]);
    if (type < 0)
      return make_error(ErrorKind::unknown_layer_symbol,
                        "KeyError: " + py_repr(utf8_char_at(layer_chars, global)) + " is not a layer type");
    IndexMap& map = maps[type];
    map.emplace_back(static_cast<std::int64_t>(global), static_cast<std::int64_t>(map.size()));
  }
  return maps;
}

}  // namespace ih::pattern
