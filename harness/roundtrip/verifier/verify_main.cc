// ih_roundtrip_verifier: reads what every load rank of one round-trip scenario loaded (torch.save
// files, read with LibTorch's C++ pickle_load from the venv's own torch wheel) and checks every
// element against the element-provenance oracle the C++ reference computed (world_plan.cc):
//
//   ih_roundtrip_verifier --dir SCENARIO_DIR --ranks B [--save-result FILE --scenario NAME] [--show N]
//
// Prints one JSON object: ok, elements_verified (compared and right), wrong_elements, counts per
// kind (misplaced, duplicated, dropped, nonzero_pad, fresh_changed, garbage, missing, shape,
// uncovered), the first N wrong elements named by key, rank and global index, object/plain/writer
// checks and the checker's own speed. Exit 0 all right, 1 something wrong, 3 cannot verify (a
// missing or unreadable file: never counted as verified).
//
// The only translation unit with torch headers: it includes just the pickle loader.
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "harness/roundtrip/writer_check.h"

namespace {

using Json = nlohmann::json;
constexpr std::int64_t kSentinel = -1;

struct KeyInfo {
  std::string key;
  std::vector<std::int64_t> shape;
  bool fresh = false;
};

struct Wrong {
  std::string kind;
  int rank = 0;
  std::string path;
  std::int64_t expected = 0, got = 0;
  std::vector<std::int64_t> local;
};

class CannotVerify : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

Json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw CannotVerify("cannot open " + path);
  try {
    return Json::parse(in);
  } catch (const std::exception& e) {
    throw CannotVerify("cannot parse " + path + ": " + e.what());
  }
}

std::vector<std::int64_t> unravel(std::int64_t index, const std::vector<std::int64_t>& shape) {
  std::vector<std::int64_t> out(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    out[d] = shape[d] ? index % shape[d] : 0;
    index = shape[d] ? index / shape[d] : 0;
  }
  return out;
}

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
  return s + "]";
}

class Verifier {
 public:
  /// The catalogue's keys and its "oracle": {"key_shift": N} (oracle_encoding.h: element g of key id k holds
  /// (k << N) + ravel(g)).
  explicit Verifier(const Json& catalogue) : key_shift_(catalogue.at("oracle").at("key_shift").get<int>()) {
    if (key_shift_ < 1 || key_shift_ > 62) throw CannotVerify("catalogue.json: oracle key_shift out of range");
    for (const auto& k : catalogue.at("keys"))
      keys_[k.at("id").get<std::int64_t>()] = {k.at("key"), k.at("global_shape").get<std::vector<std::int64_t>>(),
                                               false};
    for (const auto& k : catalogue.at("fresh_keys"))
      keys_[k.at("id").get<std::int64_t>()] = {k.at("key"), k.at("global_shape").get<std::vector<std::int64_t>>(),
                                               true};
  }

  std::string describe(std::int64_t v) const {
    if (v == kSentinel) return "-1 (never written by the load)";
    if (v == 0) return "0 (padding)";
    const auto it = keys_.find(v >> key_shift_);
    if (v < 0 || it == keys_.end()) return std::to_string(v) + " (no oracle value: corrupt data)";
    return it->second.key + list_text(unravel(v & ((std::int64_t{1} << key_shift_) - 1), it->second.shape)) +
           (it->second.fresh ? " (a fresh entry's value)" : "");
  }
  bool is_oracle_value(std::int64_t v) const { return v > 0 && keys_.count(v >> key_shift_) > 0; }
  bool is_fresh_value(std::int64_t v) const {
    const auto it = keys_.find(v >> key_shift_);
    return it != keys_.end() && it->second.fresh;
  }

  /// The expected values of one loaded path, from its segments; rows no segment covers are 0.
  std::vector<std::int64_t> expected(const std::vector<std::int64_t>& local, const Json& segments) const {
    std::int64_t n = 1;
    for (std::int64_t d : local) n *= d;
    std::vector<std::int64_t> out(static_cast<std::size_t>(n), 0);
    std::int64_t inner = 1;
    for (std::size_t d = 1; d < local.size(); ++d) inner *= local[d];
    for (const auto& seg : segments) {
      const std::int64_t begin = seg[0], rows = seg[1], key_id = seg[2];
      const auto gshape = seg[3].get<std::vector<std::int64_t>>();
      const auto goff = seg[4].get<std::vector<std::int64_t>>();
      const std::size_t p = seg[5].get<std::size_t>();
      std::vector<std::int64_t> stride(gshape.size(), 1);
      for (std::size_t a = gshape.size(); a-- > 1;) stride[a - 1] = stride[a] * gshape[a];
      std::int64_t base = key_id << key_shift_;
      for (std::size_t a = 0; a < p; ++a) base += goff[a] * stride[a];
      if (local.empty()) {
        if (!out.empty()) out[0] = base;
        continue;
      }
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t row_base = base + (goff[p] + r) * stride[p];
        for (std::int64_t k = 0; k < inner; ++k) {
          std::int64_t rem = k, v = row_base;
          for (std::size_t d = local.size(); d-- > 1;) {
            v += (goff[p + d] + rem % local[d]) * stride[p + d];
            rem /= local[d];
          }
          out[static_cast<std::size_t>((begin + r) * inner + k)] = v;
        }
      }
    }
    return out;
  }

 private:
  int key_shift_;
  std::map<std::int64_t, KeyInfo> keys_;
};

torch::jit::IValue load_pt(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CannotVerify("loaded file " + path + " is missing (the load rank did not finish)");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return torch::jit::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    throw CannotVerify("LibTorch cannot read " + path + ": " + what.substr(0, what.find('\n')));
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir, save_result, scenario;
  int ranks = 0;
  std::size_t show = 10;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::cerr << "ERROR: invalid_argument: " << a << " needs a value\n";
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--dir")
      dir = next();
    else if (a == "--ranks")
      ranks = std::stoi(next());
    else if (a == "--save-result")
      save_result = next();
    else if (a == "--scenario")
      scenario = next();
    else if (a == "--show")
      show = static_cast<std::size_t>(std::stoul(next()));
    else {
      std::cerr << "ERROR: invalid_argument: unknown flag " << a << "\n";
      return 2;
    }
  }
  if (dir.empty() || ranks < 1) {
    std::cerr << "usage: ih_roundtrip_verifier --dir SCENARIO_DIR --ranks B [--save-result FILE --scenario NAME]\n";
    return 2;
  }
  const auto started = std::chrono::steady_clock::now();
  Json out{{"ok", false}, {"elements_verified", 0}, {"wrong_elements", 0}};
  try {
    const Json catalogue = read_json(dir + "/catalogue.json");
    Verifier v(catalogue);
    std::map<std::string, std::int64_t> counts;
    std::vector<Wrong> wrong;
    std::int64_t compared = 0, objects = 0, plain = 0, tensors = 0;
    double compare_seconds = 0;  // the element comparisons alone (no file reading)
    std::vector<std::string> notes;
    // Loaded data is kept so duplicates can be told from misplaced elements afterwards.
    struct Held {
      int rank;
      std::vector<std::int64_t> expected;
      at::Tensor got;
    };
    std::vector<Held> held;
    // Wrong elements by the path's first component (a model chunk, "optimizer"): a real round trip's
    // optimizer moments are told apart from its weights at a glance.
    std::map<std::string, std::int64_t> by_part;
    const auto part_of = [](const std::string& path) { return path.substr(0, path.find('.')); };
    for (int r = 0; r < ranks; ++r) {
      const Json oracle = read_json(dir + "/oracle_rank_" + std::to_string(r) + ".json");
      const std::string pt = dir + "/loaded_rank_" + std::to_string(r) + ".pt";
      const torch::jit::IValue loaded = load_pt(pt);
      if (!loaded.isGenericDict()) throw CannotVerify(pt + " does not hold a dict");
      std::map<std::string, torch::jit::IValue> by_path;
      for (const auto& item : loaded.toGenericDict()) by_path.emplace(item.key().toStringRef(), item.value());
      for (const auto& t : oracle.at("tensors")) {
        const std::string path = t.at("path");
        const auto local = t.at("local_shape").get<std::vector<std::int64_t>>();
        const bool fresh = t.at("fresh");
        std::vector<std::int64_t> want = v.expected(local, t.at("segments"));
        ++tensors;
        const auto it = by_path.find(path);
        if (it == by_path.end() || !it->second.isTensor()) {
          counts["missing"] += static_cast<std::int64_t>(want.size());
          by_part[part_of(path)] += static_cast<std::int64_t>(want.size());
          compared += static_cast<std::int64_t>(want.size());
          wrong.push_back({"missing", r, path, want.empty() ? 0 : want[0], 0, {}});
          continue;
        }
        at::Tensor got = it->second.toTensor().contiguous();
        if (got.scalar_type() != at::kLong || got.sizes().vec() != local) {
          counts["shape"] += static_cast<std::int64_t>(want.size());
          by_part[part_of(path)] += static_cast<std::int64_t>(want.size());
          compared += static_cast<std::int64_t>(want.size());
          wrong.push_back({"shape", r, path, 0, 0, got.sizes().vec()});
          continue;
        }
        const std::int64_t* g = got.data_ptr<std::int64_t>();
        const auto compare_started = std::chrono::steady_clock::now();
        for (std::size_t i = 0; i < want.size(); ++i) {
          ++compared;
          if (g[i] == want[i]) continue;
          std::string kind;
          if (want[i] == 0)
            kind = "nonzero_pad";
          else if (g[i] == kSentinel)
            kind = "dropped";
          else if (fresh)
            kind = "fresh_changed";
          else if (v.is_oracle_value(g[i]))
            kind = "misplaced";  // duplicated: decided below
          else
            kind = "garbage";
          ++counts[kind];
          ++by_part[part_of(path)];
          std::vector<std::int64_t> idx;
          std::int64_t rem = static_cast<std::int64_t>(i);
          idx.resize(local.size());
          for (std::size_t d = local.size(); d-- > 0;) idx[d] = rem % local[d], rem /= local[d];
          wrong.push_back({kind, r, path, want[i], g[i], idx});
        }
        compare_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - compare_started).count();
        held.push_back({r, std::move(want), got});
      }
      for (const auto& o : oracle.at("objects")) {
        ++objects;
        const auto it = by_path.find(o.at("path").get<std::string>());
        const std::string want = o.at("expected");
        if (it == by_path.end() || !it->second.isString() || it->second.toStringRef() != want) {
          ++counts["object"];
          wrong.push_back({"object", r, o.at("path"), 0, 0, {}});
          notes.push_back("rank " + std::to_string(r) + ": object " + o.at("path").get<std::string>() + " should be " +
                          want + ", holds " +
                          (it == by_path.end()     ? "nothing"
                           : it->second.isString() ? it->second.toStringRef()
                                                   : "a non-string"));
        }
      }
      for (const auto& p : oracle.at("plain")) {
        const std::string path = p.at("path");
        if (!catalogue.at("saved_plain").contains(path)) continue;
        ++plain;
        const auto it = by_path.find(path);
        const Json saved = Json::parse(catalogue.at("saved_plain").at(path).get<std::string>());
        bool same = false;
        if (it != by_path.end() && it->second.isString() && it->second.toStringRef().rfind("json:", 0) == 0)
          same = Json::parse(it->second.toStringRef().substr(5), nullptr, false) == saved;
        if (!same) {
          ++counts["plain"];
          notes.push_back("rank " + std::to_string(r) + ": common value " + path + " differs from the saved " +
                          saved.dump());
        }
      }
    }
    // A wrong element holding an oracle value that is also held correctly somewhere is a duplicate.
    if (counts["misplaced"] > 0) {
      std::unordered_set<std::int64_t> right;
      for (const Held& h : held) {
        const std::int64_t* g = h.got.data_ptr<std::int64_t>();
        for (std::size_t i = 0; i < h.expected.size(); ++i)
          if (g[i] == h.expected[i] && g[i] > 0) right.insert(g[i]);
      }
      for (Wrong& w : wrong)
        if (w.kind == "misplaced" && right.count(w.got))
          w.kind = "duplicated", --counts["misplaced"], ++counts["duplicated"];
    }
    const std::int64_t uncovered = catalogue.value("uncovered_elements", std::int64_t{0});
    if (uncovered > 0) {
      counts["uncovered"] += uncovered;
      notes.push_back(std::to_string(uncovered) + " saved elements are read by no load rank");
    }
    // Exactly one writer per chunk: the DCP metadata against the main replicas of the plan, or against the
    // chunk's holders where the plan lists them (a fully parallel save hands a replica to any one of them).
    std::int64_t writers_checked = 0;
    if (!save_result.empty()) {
      const Json saved = read_json(save_result);
      const Json* listed = nullptr;
      for (const auto& s : saved.at("scenarios"))
        if (s.value("name", "") == scenario && s.contains("writers")) listed = &s.at("writers");
      if (!listed) throw CannotVerify(save_result + " lists no writers for scenario " + scenario);
      std::set<std::string> catalogue_keys;
      for (const char* list : {"keys", "aliases"})
        for (const auto& k : catalogue.at(list)) catalogue_keys.insert(k.at("key").get<std::string>());
      const ih::WriterCheck writers = ih::check_writers(catalogue.at("writers"), *listed, catalogue_keys);
      writers_checked = writers.checked;
      if (writers.wrong) counts["writer"] += writers.wrong;
      for (const std::string& line : writers.notes)
        if (notes.size() < 50) notes.push_back(line);
    }
    std::int64_t wrong_elements = 0;
    for (const auto& [kind, n] : counts)
      if (kind != "object" && kind != "plain" && kind != "writer") wrong_elements += n;
    Json first = Json::array();
    std::map<std::string, int> shown_per_path;  // at most two per loaded tensor, so several show
    for (const Wrong& w : wrong) {
      if (first.size() >= show) break;
      if (++shown_per_path[std::to_string(w.rank) + w.path] > 2) continue;
      if (w.kind == "missing") {
        first.push_back("rank " + std::to_string(w.rank) + ": " + w.path + " was not loaded (should hold " +
                        v.describe(w.expected) + " ...)");
      } else if (w.kind == "shape") {
        first.push_back("rank " + std::to_string(w.rank) + ": " + w.path + " loaded with shape " + list_text(w.local) +
                        " or a non-int64 dtype");
      } else if (w.kind != "object") {
        const std::string where = w.kind == "nonzero_pad"
                                      ? "pad element (local " + list_text(w.local) + ")"
                                      : v.describe(w.expected) + " (local " + list_text(w.local) + ")";
        first.push_back(w.kind + ": rank " + std::to_string(w.rank) + ": " + w.path + ": " + where + " holds " +
                        v.describe(w.got));
      }
    }
    for (const auto& n : notes)
      if (first.size() < show + 10) first.push_back(n);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::int64_t problems = wrong_elements;
    for (const char* k : {"object", "plain", "writer"}) problems += counts.count(k) ? counts[k] : 0;
    out["ok"] = problems == 0 && compared > 0;
    out["elements_verified"] = compared - (wrong_elements - counts["uncovered"]);
    out["elements_compared"] = compared;
    out["wrong_elements"] = wrong_elements;
    Json nonzero = Json::object();
    for (const auto& [kind, n] : counts)
      if (n != 0) nonzero[kind] = n;
    out["counts"] = nonzero;
    out["wrong_by_part"] = by_part;
    out["first"] = first;
    out["tensors_checked"] = tensors;
    out["objects_checked"] = objects;
    out["plain_checked"] = plain;
    out["writers_checked"] = writers_checked;
    out["seconds"] = seconds;
    out["elements_per_second"] = seconds > 0 ? static_cast<double>(compared) / seconds : 0.0;
    // The baseline of the same run: a memcpy of the same loaded bytes (best of three), against the
    // comparisons alone; the ratio says how far the checker is from reading the bytes once.
    double copy_seconds = 0;
    {
      std::int64_t total = 0;
      for (const Held& h : held) total += h.got.numel();
      std::vector<std::int64_t> buffer(static_cast<std::size_t>(total));
      for (int round = 0; round < 3; ++round) {
        const auto copy_started = std::chrono::steady_clock::now();
        std::int64_t* to = buffer.data();
        for (const Held& h : held) {
          std::memcpy(to, h.got.data_ptr<std::int64_t>(),
                      static_cast<std::size_t>(h.got.numel()) * sizeof(std::int64_t));
          to += h.got.numel();
        }
        const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_started).count();
        copy_seconds = round == 0 ? took : std::min(copy_seconds, took);
      }
    }
    out["compare_seconds"] = compare_seconds;
    out["memcpy_seconds"] = copy_seconds;
    out["compare_vs_memcpy"] = compare_seconds > 0 ? copy_seconds / compare_seconds : 0.0;
    std::cout << out.dump() << "\n";
    return out["ok"].get<bool>() ? 0 : 1;
  } catch (const CannotVerify& e) {
    out["error"] = {{"kind", "cannot_verify"}, {"message", e.what()}};
    std::cout << out.dump() << "\n";
    return 3;
  } catch (const std::exception& e) {
    out["error"] = {{"kind", "harness_error"}, {"message", e.what()}};
    std::cout << out.dump() << "\n";
    return 3;
  }
}
