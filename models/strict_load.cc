#include "models/strict_load.h"

namespace ih {
namespace {

constexpr std::pair<StrictHandling, const char*> kModes[] = {
    {StrictHandling::assume_ok_unexpected, "assume_ok_unexpected"},
    {StrictHandling::log_unexpected, "log_unexpected"},
    {StrictHandling::log_all, "log_all"},
    {StrictHandling::raise_unexpected, "raise_unexpected"},
    {StrictHandling::raise_all, "raise_all"},
    {StrictHandling::return_unexpected, "return_unexpected"},
    {StrictHandling::return_all, "return_all"},
    {StrictHandling::ignore_all, "ignore_all"},
};

bool is_all_mode(StrictHandling m) {
  return m == StrictHandling::log_all || m == StrictHandling::raise_all || m == StrictHandling::return_all ||
         m == StrictHandling::ignore_all;
}

std::string key_of(const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return t->key;
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return o->key;
  if (const auto* f = std::get_if<ShardedTensorFactory>(&leaf)) return f->key;
  return "";
}

std::string joined(const std::set<std::string>& keys) {
  std::string out;
  for (const std::string& k : keys) out += (out.empty() ? "" : ", ") + k;
  return "{" + out + "}";
}

std::string report(const std::set<std::string>& missing, const std::set<std::string>& unexpected) {
  std::string out;
  if (!missing.empty()) out += "keys in the checkpoint missing from the request: " + joined(missing);
  if (!unexpected.empty())
    out += (out.empty() ? "" : "; ") + std::string("requested keys not in the checkpoint: ") + joined(unexpected);
  return out;
}

}  // namespace

Result<StrictHandling> parse_strict_handling(const std::string& text) {
  for (const auto& [mode, name] : kModes)
    if (text == name) return mode;
  return make_error(ErrorKind::invalid_argument, "Invalid strict flag: '" + text + "' is not a valid StrictHandling");
}

std::string to_string(StrictHandling mode) {
  for (const auto& [m, name] : kModes)
    if (m == mode) return name;
  return "unknown";
}

std::set<std::string> checkpoint_keys(const Checkpoint& checkpoint) {
  std::set<std::string> out;
  for (const auto& [key_shape, chunks] : checkpoint.index.chunks) out.insert(key_shape.first);
  for (const auto& [unique_key, data] : checkpoint.objects) out.insert(unique_key.substr(0, unique_key.rfind('/')));
  return out;
}

Result<StrictOutcome> apply_strict_handling(const Checkpoint& checkpoint, const StateNode& sharded_request,
                                            StrictHandling mode,
                                            const std::optional<std::set<std::string>>& all_requested) {
  StrictOutcome out;
  out.request = sharded_request;
  if (mode == StrictHandling::assume_ok_unexpected) return out;  // no disk access, no check
  const std::set<std::string> stored = checkpoint_keys(checkpoint);
  visit_leaves(sharded_request, [&](const std::string&, const Leaf& leaf) {
    const std::string key = key_of(leaf);
    if (is_sharded_base(leaf) && !stored.count(key)) out.unexpected.insert(key);
  });
  if (is_all_mode(mode)) {
    if (!all_requested)
      return make_error(ErrorKind::invalid_argument,
                        "strict " + to_string(mode) + " needs every rank's requested keys");
    for (const std::string& key : stored)
      if (!all_requested->count(key)) out.missing.insert(key);
  }
  // adjust_non_strict_load: the unexpected keys' entries leave the request.
  out.request = extract_matching_values(sharded_request, [&](const Leaf& leaf) {
                  return is_sharded_base(leaf) && out.unexpected.count(key_of(leaf)) > 0;
                }).second;
  switch (mode) {
    case StrictHandling::ignore_all: out.missing.clear(), out.unexpected.clear(); break;
    case StrictHandling::raise_unexpected:
    case StrictHandling::raise_all:
      if (!out.missing.empty() || !out.unexpected.empty())
        return make_error(ErrorKind::strict_load_keys, report(out.missing, out.unexpected));
      break;
    case StrictHandling::log_unexpected:
    case StrictHandling::log_all:
      if (!out.missing.empty() || !out.unexpected.empty()) out.warnings.push_back(report(out.missing, out.unexpected));
      break;
    case StrictHandling::return_unexpected:
    case StrictHandling::return_all: out.returned = true; break;
    case StrictHandling::assume_ok_unexpected: break;
  }
  return out;
}

}  // namespace ih
