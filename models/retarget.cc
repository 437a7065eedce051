#include "models/retarget.h"

#include <algorithm>
#include <unordered_set>

#include "models/text.h"

namespace ih {
namespace {

constexpr std::string_view kLayerPrefix = "decoder.layers.";
constexpr std::string_view kModulePrefix = "module.";

bool is_ascii_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word_char(char c) { return is_ascii_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

/// Replaces the first occurrence of decoder.final_norm. (spec 2.4 rule 3).
std::string map_final_norm(std::string key) {
  const std::size_t pos = key.find(kHybridFinalNorm);
  if (pos != std::string::npos) key.replace(pos, kHybridFinalNorm.size(), kGptFinalNorm);
  return key;
}

const std::string& key_of(const Leaf& leaf) {
  if (const auto* tensor = std::get_if<ShardedTensor>(&leaf)) return tensor->key;
  if (const auto* object = std::get_if<ShardedObject>(&leaf)) return object->key;
  return std::get<ShardedTensorFactory>(leaf).key;
}

void set_key(Leaf& leaf, std::string key) {
  if (auto* tensor = std::get_if<ShardedTensor>(&leaf))
    tensor->key = std::move(key);
  else if (auto* object = std::get_if<ShardedObject>(&leaf))
    object->key = std::move(key);
  else
    std::get<ShardedTensorFactory>(leaf).key = std::move(key);
}

/// LocalNonpersistentObject(entry.data): for a factory its original tensor, for an SO its object.
LocalNonpersistent keep_local(const Leaf& leaf) {
  if (const auto* tensor = std::get_if<ShardedTensor>(&leaf))
    return {tensor->data ? Payload(*tensor->data) : Payload()};
  if (const auto* object = std::get_if<ShardedObject>(&leaf))
    return {object->data ? payload_of(*object->data) : Payload()};
  const auto& factory = std::get<ShardedTensorFactory>(leaf);
  return {factory.data ? Payload(*factory.data) : Payload()};
}

Error unknown_layer(std::string_view what, std::string_view key, const LayerKeyMatch& match) {
  return make_error(
      ErrorKind::unknown_hybrid_layer,
      std::string(what) + " " + py_repr(key) + " refers to hybrid layer " + match.digits +
          ", which is not part of the hybrid layer pattern used to derive the GPT layer maps." +
          (what == "Sharded state dict entry" ? " The pattern and the instantiated model do not match." : ""));
}

Status retarget_entry(Leaf& leaf, const GptCompatLayerMaps& maps) {
  if (!is_sharded_base(leaf)) return Ok{};
  const std::string& key = key_of(leaf);
  if (ends_with(key, kOmittedLocalKeySuffix)) {
    leaf = keep_local(leaf);
    return Ok{};
  }
  if (const auto match = find_decoder_layer(key)) {
    if (match->index && maps.is_fresh(*match->index)) {
      leaf = keep_local(leaf);
      return Ok{};
    }
    const auto gpt_layer = match->index ? maps.gpt_layer_of(*match->index) : std::nullopt;
    if (!gpt_layer) return unknown_layer("Sharded state dict entry", key, *match);
    std::string new_key = key.substr(0, match->begin) + std::string(kLayerPrefix) + key.substr(match->end);
    set_key(leaf, std::move(new_key));
    return prepend_gpt_layer_axis(leaf, {*gpt_layer, maps.num_gpt_layers});
  }
  set_key(leaf, map_final_norm(key));
  return Ok{};
}

std::string strip_leading_modules(std::string_view key) {
  while (key.substr(0, kModulePrefix.size()) == kModulePrefix) key.remove_prefix(kModulePrefix.size());
  return std::string(key);
}

/// Python's `(?:\.|$)` at pos: a dot, the end, or a final newline.
bool at_dot_or_end(std::string_view text, std::size_t pos) {
  return pos == text.size() || text[pos] == '.' || (pos + 1 == text.size() && text[pos] == '\n');
}

/// re.search of (?<![A-Za-z0-9_])((?:module\.)*BARE)(?:\.|$) in `text`: the captured group or nullopt.
std::optional<std::string> search_module_prefixed(std::string_view text, std::string_view bare) {
  for (std::size_t start = 0; start <= text.size(); ++start) {
    if (start > 0 && is_word_char(text[start - 1])) continue;
    std::size_t reps = 0;
    while (text.substr(start + reps * kModulePrefix.size(), kModulePrefix.size()) == kModulePrefix) ++reps;
    for (std::size_t k = reps + 1; k-- > 0;) {  // greedy first, then backtrack
      const std::size_t at = start + k * kModulePrefix.size();
      if (text.substr(at, bare.size()) == bare && at_dot_or_end(text, at + bare.size()))
        return std::string(text.substr(start, at + bare.size() - start));
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<LayerKeyMatch> find_decoder_layer(std::string_view key) {
  for (std::size_t pos = key.find(kLayerPrefix); pos != std::string_view::npos; pos = key.find(kLayerPrefix, pos + 1)) {
    std::size_t digits_end = pos + kLayerPrefix.size();
    while (digits_end < key.size() && is_ascii_digit(key[digits_end])) ++digits_end;
    const std::size_t digits_begin = pos + kLayerPrefix.size();
    if (digits_end == digits_begin || digits_end >= key.size() || key[digits_end] != '.') continue;
    LayerKeyMatch match{pos, digits_end + 1, std::string(key.substr(digits_begin, digits_end - digits_begin)), {}};
    if (auto value = parse_int(match.digits); value.ok()) match.index = *value;
    return match;
  }
  return std::nullopt;
}

Status retarget_sharded_state_dict(StateNode& tree, const GptCompatLayerMaps& maps) {
  return map_leaves_inplace(tree, [&](Leaf& leaf) { return retarget_entry(leaf, maps); });
}

Result<std::optional<DictKey>> retarget_fsdp_key(const DictKey& dict_key, const GptCompatLayerMaps& maps,
                                                 const std::vector<std::string>* checkpoint_keys) {
  const auto* text = std::get_if<std::string>(&dict_key);
  if (!text) return std::optional<DictKey>(dict_key);
  std::string key = *text;
  if (ends_with(key, kOmittedLocalKeySuffix)) return std::optional<DictKey>();
  if (const auto match = find_decoder_layer(key)) {
    if (match->index && maps.is_fresh(*match->index)) return std::optional<DictKey>();
    const auto gpt_layer = match->index ? maps.gpt_layer_of(*match->index) : std::nullopt;
    if (!gpt_layer) return unknown_layer("FSDP state dict entry", key, *match);
    key = key.substr(0, match->begin) + std::string(kLayerPrefix) + std::to_string(*gpt_layer) + "." +
          key.substr(match->end);
  }
  key = map_final_norm(std::move(key));
  if (checkpoint_keys) {
    const std::string bare = strip_leading_modules(key);
    std::vector<std::string> captures;
    for (const std::string& candidate : *checkpoint_keys) {
      auto capture = search_module_prefixed(candidate, bare);
      if (capture && std::find(captures.begin(), captures.end(), *capture) == captures.end())
        captures.push_back(std::move(*capture));
      if (captures.size() > 1) break;
    }
    if (captures.size() == 1) key = captures.front();
  }
  return std::optional<DictKey>(std::move(key));
}

namespace {

struct FsdpRetargeter {
  const GptCompatLayerMaps& maps;
  const std::vector<std::string>* checkpoint_keys;
  std::unordered_set<std::string> checkpoint_key_set;

  Result<StateNode> run(const StateNode& value, const std::string& path) const {
    if (value.is_dict()) return run_dict(value.dict(), path);
    if (value.is_list()) {
      StateList out;
      for (std::size_t i = 0; i < value.list().size(); ++i) {
        IH_TRY_ASSIGN(child, run(value.list()[i], path + "." + std::to_string(i)));
        out.push_back(std::move(child));
      }
      return StateNode(std::move(out));
    }
    return value;
  }

  Result<StateNode> run_dict(const StateDict& dict, const std::string& path) const {
    StateNode out{StateDict{}};
    for (const DictItem& item : dict) {
      IH_TRY_ASSIGN(translated, retarget_fsdp_key(item.key, maps, checkpoint_keys));
      if (!translated) continue;
      const std::string child_path = path.empty() ? to_string(*translated) : path + "." + to_string(*translated);
      IH_TRY_ASSIGN(child, run(item.value, child_path));
      const bool keep = !checkpoint_keys || !item.value.is_leaf() || checkpoint_key_set.count(child_path) > 0;
      if (!keep) continue;
      if (StateNode* existing = out.find(*translated))
        *existing = std::move(child);  // Python dict overwrite
      else
        out.dict().push_back({*translated, std::move(child)});
    }
    return out;
  }
};

}  // namespace

Result<StateNode> retarget_fsdp_state_dict(const StateNode& state_dict, const GptCompatLayerMaps& maps,
                                           const std::optional<std::vector<std::string>>& checkpoint_keys,
                                           std::string_view checkpoint_prefix) {
  FsdpRetargeter retargeter{maps, checkpoint_keys ? &*checkpoint_keys : nullptr, {}};
  if (checkpoint_keys) retargeter.checkpoint_key_set.insert(checkpoint_keys->begin(), checkpoint_keys->end());
  return retargeter.run(state_dict, std::string(checkpoint_prefix));
}

}  // namespace ih
