#include "models/gpt_layer_maps.h"

#include <algorithm>
#include <set>
#include <utility>

#include "models/text.h"

namespace ih {
namespace {

std::optional<std::int64_t> lookup(const pattern::IndexMap& map, std::int64_t key) {
  const auto it = std::lower_bound(map.begin(), map.end(), std::make_pair(key, std::int64_t{0}),
                                   [](const auto& a, const auto& b) { return a.first < b.first; });
  if (it != map.end() && it->first == key) return it->second;
  return std::nullopt;
}

/// Python's repr of a sorted list of one-char strings, e.g. ['D', 'G'].
std::string py_list_repr(const std::set<char>& chars) {
  std::string out = "[";
  for (const char c : chars) out += (out.size() > 1 ? ", " : "") + py_repr(std::string(1, c));
  return out + "]";
}

}  // namespace

std::optional<std::int64_t> GptCompatLayerMaps::gpt_layer_of(std::int64_t hybrid_index) const {
  if (auto gpt = lookup(attention_to_gpt, hybrid_index)) return gpt;
  return lookup(mlp_to_gpt, hybrid_index);
}

bool GptCompatLayerMaps::is_fresh(std::int64_t hybrid_index) const {
  return std::binary_search(fresh_init.begin(), fresh_init.end(), hybrid_index);
}

Result<GptCompatLayerMaps> gpt_compatible_layer_maps(std::optional<std::string_view> pattern) {
  using namespace pattern;
  IH_TRY_ASSIGN(parsed, parse(pattern));
  // The repr is built only for an error message: most fuzzed and generated patterns are valid.
  const auto shown = [&pattern] { return pattern ? py_repr(*pattern) : std::string("None"); };
  if (parsed.mtp_depth > 0)
    return make_error(ErrorKind::mtp_present,
                      "Hybrid layer pattern " + shown() + " contains MTP layers ('/" + parsed.mtp.value_or("") +
                          "'), which have no source weights in a GPT checkpoint. Remove the MTP part of the pattern "
                          "to load a GPT checkpoint.");
  const std::string main = strip_pipes(parsed.main.value_or(""));
  if (main.empty())
    return make_error(ErrorKind::empty_pattern, "Hybrid layer pattern is empty; set --hybrid-layer-pattern.");
  std::set<char> untranslatable;
  for (const char c : main)
    if (c != kAttention && c != kMlp && c != kMoe && c != kMamba) untranslatable.insert(c);
  if (!untranslatable.empty())
    return make_error(ErrorKind::untranslatable_layer_types,
                      "Hybrid layer pattern " + shown() + " contains layer types " + py_list_repr(untranslatable) +
                          " that cannot be translated from a GPT checkpoint. Supported: ['*', '-', 'E', 'M'] ('M' "
                          "layers keep their fresh initialization).");
  IH_TRY_ASSIGN(maps, layer_maps_from_types(main));
  const IndexMap& dense = maps[symbol_index(kMlp)];
  const IndexMap& moe = maps[symbol_index(kMoe)];
  if (!dense.empty() && !moe.empty())
    return make_error(
        ErrorKind::mixed_mlp_kinds,
        "Hybrid layer pattern " + shown() +
            " mixes dense ('-') and MoE ('E') MLP positions. GPT "
            "checkpoints have one MLP kind on every layer, so the pattern must use only one of '-' or 'E'.");
  const IndexMap& mlp = moe.empty() ? dense : moe;
  const IndexMap& attention = maps[symbol_index(kAttention)];
  if (attention.size() != mlp.size() || attention.empty())
    return make_error(ErrorKind::unbalanced_attention_mlp,
                      "Hybrid layer pattern " + shown() + " has " + std::to_string(attention.size()) +
                          " attention ('*') and " + std::to_string(mlp.size()) +
                          " MLP ('-'/'E') positions. Each GPT layer provides exactly one attention and one MLP "
                          "sub-module, so the pattern needs an equal, nonzero number of each.");
  GptCompatLayerMaps out;
  const IndexMap& mamba = maps[symbol_index(kMamba)];
  out.fresh_init.reserve(mamba.size());
  for (const auto& [hybrid, ordinal] : mamba) out.fresh_init.push_back(hybrid);
  out.num_gpt_layers = static_cast<std::int64_t>(attention.size());
  out.attention_to_gpt = std::move(maps[symbol_index(kAttention)]);
  out.mlp_to_gpt = std::move(moe.empty() ? maps[symbol_index(kMlp)] : maps[symbol_index(kMoe)]);
  return out;
}

}  // namespace ih
