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
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <variant>
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

/// The command line: --dir SCENARIO_DIR --ranks B [--save-result FILE --scenario NAME] [--show N].
struct Args {
  std::string dir, save_result, scenario;
  int ranks = 0;
  std::size_t show = 10;
};

/// The arguments, or the exit code of a bad command line (2, the message printed).
std::variant<Args, int> parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag != "--dir" && flag != "--ranks" && flag != "--save-result" && flag != "--scenario" && flag != "--show") {
      std::cerr << "ERROR: invalid_argument: unknown flag " << flag << "\n";
      return 2;
    }
    if (i + 1 >= argc) {
      std::cerr << "ERROR: invalid_argument: " << flag << " needs a value\n";
      return 2;
    }
    const std::string value = argv[++i];
    if (flag == "--dir") a.dir = value;
    if (flag == "--ranks") a.ranks = std::stoi(value);
    if (flag == "--save-result") a.save_result = value;
    if (flag == "--scenario") a.scenario = value;
    if (flag == "--show") a.show = static_cast<std::size_t>(std::stoul(value));
  }
  if (a.dir.empty() || a.ranks < 1) {
    std::cerr << "usage: ih_roundtrip_verifier --dir SCENARIO_DIR --ranks B [--save-result FILE --scenario NAME]\n";
    return 2;
  }
  return a;
}

/// One loaded tensor, kept so duplicates can be told from misplaced elements afterwards.
struct Held {
  int rank;
  std::vector<std::int64_t> expected;
  at::Tensor got;
};

/// What the checks found: counts per kind of wrong element, the wrong elements in order, what was compared.
struct Findings {
  std::map<std::string, std::int64_t> counts;
  std::vector<Wrong> wrong;
  std::int64_t compared = 0, objects = 0, plain = 0, tensors = 0;
  std::int64_t after_load_state_dict = 0;  // of `compared`: a DistributedOptimizer's own states after its load
  double compare_seconds = 0;              // the element comparisons alone (no file reading)
  std::vector<std::string> notes;
  std::vector<Held> held;
  /// Wrong elements by the path's first component (a model chunk, "optimizer"): a real round trip's
  /// optimizer moments are told apart from its weights at a glance.
  std::map<std::string, std::int64_t> by_part;

  void count(const std::string& kind, const std::string& path, std::int64_t n = 1) {
    counts[kind] += n;
    by_part[path.substr(0, path.find('.'))] += n;
  }
};

/// The kind of a wrong element: a pad that is not zero, a sentinel never overwritten, a fresh entry changed, an
/// element of the oracle in the wrong place (duplicated: decided once all is read), or no oracle value at all.
std::string wrong_kind(const Verifier& v, std::int64_t want, std::int64_t got, bool fresh) {
  if (want == 0) return "nonzero_pad";
  if (got == kSentinel) return "dropped";
  if (fresh) return "fresh_changed";
  if (v.is_oracle_value(got)) return "misplaced";
  return "garbage";
}

/// Compares one loaded tensor of rank r with its oracle entry `t`, element by element.
void check_tensor(const Verifier& v, int r, const Json& t, const std::map<std::string, torch::jit::IValue>& by_path,
                  Findings& f) {
  const std::string path = t.at("path");
  const auto local = t.at("local_shape").get<std::vector<std::int64_t>>();
  const bool fresh = t.at("fresh");
  std::vector<std::int64_t> want = v.expected(local, t.at("segments"));
  const auto n = static_cast<std::int64_t>(want.size());
  ++f.tensors;
  const auto it = by_path.find(path);
  if (it == by_path.end() || !it->second.isTensor()) {
    f.count("missing", path, n), f.compared += n;
    f.wrong.push_back({"missing", r, path, want.empty() ? 0 : want[0], 0, {}});
    return;
  }
  at::Tensor got = it->second.toTensor().contiguous();
  if (got.scalar_type() != at::kLong || got.sizes().vec() != local) {
    f.count("shape", path, n), f.compared += n;
    f.wrong.push_back({"shape", r, path, 0, 0, got.sizes().vec()});
    return;
  }
  const std::int64_t* g = got.data_ptr<std::int64_t>();
  const auto compare_started = std::chrono::steady_clock::now();
  for (std::size_t i = 0; i < want.size(); ++i) {
    ++f.compared;
    if (g[i] == want[i]) continue;
    const std::string kind = wrong_kind(v, want[i], g[i], fresh);
    f.count(kind, path);
    std::vector<std::int64_t> idx(local.size());
    std::int64_t rem = static_cast<std::int64_t>(i);
    for (std::size_t d = local.size(); d-- > 0;) idx[d] = rem % local[d], rem /= local[d];
    f.wrong.push_back({kind, r, path, want[i], g[i], idx});
  }
  f.compare_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - compare_started).count();
  f.held.push_back({r, std::move(want), got});
}

/// The value dumped at `path` as JSON ("json:<text>"), or nullopt where nothing or something else is there.
std::optional<Json> dumped_json(const std::map<std::string, torch::jit::IValue>& by_path, const std::string& path) {
  const auto it = by_path.find(path);
  if (it == by_path.end() || !it->second.isString() || !it->second.toStringRef().starts_with("json:"))
    return std::nullopt;
  Json value = Json::parse(it->second.toStringRef().substr(5), nullptr, false);
  if (value.is_discarded()) return std::nullopt;
  return value;
}

/// What an object's oracle entry wants and what rank r holds there, or nullopt where they agree: an oracle
/// string, or (a "carried" object: Megatron's own value) the value the save world's object of its key carried.
std::optional<std::pair<std::string, std::string>> object_mismatch(
    const Json& o, const std::map<std::string, torch::jit::IValue>& by_path) {
  const std::string path = o.at("path");
  const auto it = by_path.find(path);
  if (o.value("carried", false)) {
    const std::optional<Json> got = dumped_json(by_path, path);
    if (o.contains("expected") && got == o.at("expected")) return std::nullopt;
    return std::pair{o.contains("expected")
                         ? o.at("expected").dump()
                         : "what the save world saved under " + o.value("key", std::string("its key")) +
                               ", but no save rank saved that",
                     got ? got->dump() : "nothing"};
  }
  const std::string want = o.at("expected");
  if (it != by_path.end() && it->second.isString() && it->second.toStringRef() == want) return std::nullopt;
  return std::pair{want, it == by_path.end()     ? "nothing"
                         : it->second.isString() ? it->second.toStringRef()
                                                 : "a non-string"};
}

/// Rank r's loaded objects against their oracle.
void check_objects(int r, const Json& oracle, const std::map<std::string, torch::jit::IValue>& by_path, Findings& f) {
  for (const auto& o : oracle.at("objects")) {
    ++f.objects;
    const auto mismatch = object_mismatch(o, by_path);
    if (!mismatch) continue;
    ++f.counts["object"];
    f.wrong.push_back({"object", r, o.at("path"), 0, 0, {}});
    f.notes.push_back("rank " + std::to_string(r) + ": object " + o.at("path").get<std::string>() + " should be " +
                      mismatch->first + ", holds " + mismatch->second);
  }
}

/// Rank r's loaded common values against what the save world wrote.
void check_plain(int r, const Json& oracle, const Json& catalogue,
                 const std::map<std::string, torch::jit::IValue>& by_path, Findings& f) {
  for (const auto& p : oracle.at("plain")) {
    const std::string path = p.at("path");
    if (!catalogue.at("saved_plain").contains(path)) continue;
    ++f.plain;
    const Json saved = Json::parse(catalogue.at("saved_plain").at(path).get<std::string>());
    if (dumped_json(by_path, path) == saved) continue;
    ++f.counts["plain"];
    f.notes.push_back("rank " + std::to_string(r) + ": common value " + path + " differs from the saved " +
                      saved.dump());
  }
}

/// The prefix of a dumped path that holds the live optimizer's param groups after load_checkpoint.
constexpr std::string_view kAfterLoadCheckpoint = "after_load_checkpoint/";

/// The live optimizer's param groups after load_checkpoint (the training path): a resumed run loses no field its
/// own optimizer builds. Each holds the checkpoint's value where the checkpoint has the field, else the run's own
/// (Megatron fills in what an older checkpoint lacks).
void check_param_groups_after_load_checkpoint(int r, const Json& oracle, const Json& catalogue,
                                              const std::map<std::string, torch::jit::IValue>& by_path, Findings& f) {
  const Json& saved = catalogue.at("saved_plain");
  for (const auto& p : oracle.at("plain")) {
    const std::string path = p.at("path");
    if (!path.starts_with("optimizer.param_groups.")) continue;
    ++f.plain;
    const bool in_checkpoint = saved.contains(path);
    const Json want = Json::parse((in_checkpoint ? saved.at(path) : p.at("expected")).get<std::string>());
    const std::optional<Json> got = dumped_json(by_path, std::string(kAfterLoadCheckpoint) + path);
    if (got == want) continue;
    ++f.counts["plain"];
    f.notes.push_back("rank " + std::to_string(r) + ": after load_checkpoint the optimizer's " + path + " holds " +
                      (got ? got->dump() : "nothing") + "; " +
                      (in_checkpoint ? "the checkpoint's value" : "the run's own (the checkpoint has none)") + " is " +
                      want.dump());
  }
}

/// The prefix of a dumped path that holds the DistributedOptimizer's own state after its load_state_dict.
constexpr std::string_view kAfterLoadStateDict = "after_load_state_dict/";

/// A DistributedOptimizer's own states after its load_state_dict (read back in model space, dumped under
/// kAfterLoadStateDict + path) against the same oracle as what Megatron's load returned into its request.
void check_after_load_state_dict(const Verifier& v, int r, const Json& oracle,
                                 const std::map<std::string, torch::jit::IValue>& by_path, Findings& f) {
  for (const auto& t : oracle.at("tensors")) {
    const std::string path = t.at("path");
    if (!path.starts_with("optimizer.")) continue;
    Json own = t;
    own["path"] = std::string(kAfterLoadStateDict) + path;
    const std::int64_t before = f.compared;
    check_tensor(v, r, own, by_path, f);
    f.after_load_state_dict += f.compared - before;
  }
}

/// Everything load rank r loaded (loaded_rank_<r>.pt) against its oracle (oracle_rank_<r>.json).
void check_rank(const Verifier& v, const Json& catalogue, const std::string& dir, int r, Findings& f) {
  const Json oracle = read_json(dir + "/oracle_rank_" + std::to_string(r) + ".json");
  const std::string pt = dir + "/loaded_rank_" + std::to_string(r) + ".pt";
  const torch::jit::IValue loaded = load_pt(pt);
  if (!loaded.isGenericDict()) throw CannotVerify(pt + " does not hold a dict");
  std::map<std::string, torch::jit::IValue> by_path;
  for (const auto& item : loaded.toGenericDict()) by_path.emplace(item.key().toStringRef(), item.value());
  for (const auto& t : oracle.at("tensors")) check_tensor(v, r, t, by_path, f);
  if (oracle.value("optimizer_after_load_state_dict", false)) check_after_load_state_dict(v, r, oracle, by_path, f);
  check_objects(r, oracle, by_path, f);
  check_plain(r, oracle, catalogue, by_path, f);
  if (oracle.value("param_groups_after_load_checkpoint", false))
    check_param_groups_after_load_checkpoint(r, oracle, catalogue, by_path, f);
}

/// A wrong element holding an oracle value that is also held correctly somewhere is a duplicate.
void tell_duplicates(Findings& f) {
  if (f.counts["misplaced"] == 0) return;
  std::unordered_set<std::int64_t> right;
  for (const Held& h : f.held) {
    const std::int64_t* g = h.got.data_ptr<std::int64_t>();
    for (std::size_t i = 0; i < h.expected.size(); ++i)
      if (g[i] == h.expected[i] && g[i] > 0) right.insert(g[i]);
  }
  for (Wrong& w : f.wrong)
    if (w.kind == "misplaced" && right.count(w.got))
      w.kind = "duplicated", --f.counts["misplaced"], ++f.counts["duplicated"];
}

/// Exactly one writer per chunk: the DCP metadata against the main replicas of the plan, or against the chunk's
/// holders where the plan lists them (a fully parallel save hands a replica to any one of them). Returns how
/// many chunks it checked.
std::int64_t check_chunk_writers(const Args& a, const Json& catalogue, Findings& f) {
  if (a.save_result.empty()) return 0;
  const Json saved = read_json(a.save_result);
  const Json* listed = nullptr;
  for (const auto& s : saved.at("scenarios"))
    if (s.value("name", "") == a.scenario && s.contains("writers")) listed = &s.at("writers");
  if (!listed) throw CannotVerify(a.save_result + " lists no writers for scenario " + a.scenario);
  std::set<std::string> catalogue_keys;
  for (const char* list : {"keys", "aliases"})
    for (const auto& k : catalogue.at(list)) catalogue_keys.insert(k.at("key").get<std::string>());
  const ih::WriterCheck writers =
      ih::check_writers(catalogue.at("writers"), *listed, catalogue_keys, catalogue.value("spread_writes", false));
  if (writers.wrong) f.counts["writer"] += writers.wrong;
  for (const std::string& line : writers.notes)
    if (f.notes.size() < 50) f.notes.push_back(line);
  return writers.checked;
}

/// One line naming a wrong element by key, rank and global index.
std::string wrong_line(const Verifier& v, const Wrong& w) {
  const std::string rank = "rank " + std::to_string(w.rank) + ": ";
  if (w.kind == "missing") return rank + w.path + " was not loaded (should hold " + v.describe(w.expected) + " ...)";
  if (w.kind == "shape") return rank + w.path + " loaded with shape " + list_text(w.local) + " or a non-int64 dtype";
  const std::string where = w.kind == "nonzero_pad" ? "pad element (local " + list_text(w.local) + ")"
                                                    : v.describe(w.expected) + " (local " + list_text(w.local) + ")";
  return w.kind + ": " + rank + w.path + ": " + where + " holds " + v.describe(w.got);
}

/// The first `show` wrong elements (at most two per loaded tensor, so several show), then the notes.
Json first_wrong(const Verifier& v, const Findings& f, std::size_t show) {
  Json first = Json::array();
  std::map<std::string, int> shown_per_path;
  for (const Wrong& w : f.wrong) {
    if (first.size() >= show) break;
    if (++shown_per_path[std::to_string(w.rank) + w.path] > 2) continue;
    if (w.kind != "object") first.push_back(wrong_line(v, w));
  }
  for (const auto& n : f.notes)
    if (first.size() < show + 10) first.push_back(n);
  return first;
}

/// The baseline of the same run: a memcpy of the same loaded bytes (best of three), against the comparisons
/// alone; the ratio says how far the checker is from reading the bytes once.
double memcpy_seconds(const std::vector<Held>& held) {
  std::int64_t total = 0;
  for (const Held& h : held) total += h.got.numel();
  std::vector<std::int64_t> buffer(static_cast<std::size_t>(total));
  double best = 0;
  for (int round = 0; round < 3; ++round) {
    const auto copy_started = std::chrono::steady_clock::now();
    std::int64_t* to = buffer.data();
    for (const Held& h : held) {
      std::memcpy(to, h.got.data_ptr<std::int64_t>(), static_cast<std::size_t>(h.got.numel()) * sizeof(std::int64_t));
      to += h.got.numel();
    }
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - copy_started).count();
    best = round == 0 ? took : std::min(best, took);
  }
  return best;
}

/// The verdict: ok, the counts, the first wrong elements, what was checked and the checker's own speed.
Json verdict(const Verifier& v, Findings& f, std::int64_t writers_checked, std::size_t show, double seconds) {
  std::int64_t wrong_elements = 0;
  for (const auto& [kind, n] : f.counts)
    if (kind != "object" && kind != "plain" && kind != "writer") wrong_elements += n;
  std::int64_t problems = wrong_elements;
  for (const char* k : {"object", "plain", "writer"}) problems += f.counts.count(k) ? f.counts[k] : 0;
  Json nonzero = Json::object();
  for (const auto& [kind, n] : f.counts)
    if (n != 0) nonzero[kind] = n;
  const double copy_seconds = memcpy_seconds(f.held);
  return Json{{"ok", problems == 0 && f.compared > 0},
              {"elements_verified", f.compared - (wrong_elements - f.counts["uncovered"])},
              {"elements_compared", f.compared},
              {"after_load_state_dict_compared", f.after_load_state_dict},
              {"wrong_elements", wrong_elements},
              {"counts", nonzero},
              {"wrong_by_part", f.by_part},
              {"first", first_wrong(v, f, show)},
              {"tensors_checked", f.tensors},
              {"objects_checked", f.objects},
              {"plain_checked", f.plain},
              {"writers_checked", writers_checked},
              {"seconds", seconds},
              {"elements_per_second", seconds > 0 ? static_cast<double>(f.compared) / seconds : 0.0},
              {"compare_seconds", f.compare_seconds},
              {"memcpy_seconds", copy_seconds},
              {"compare_vs_memcpy", f.compare_seconds > 0 ? copy_seconds / f.compare_seconds : 0.0}};
}

/// Checks the scenario in `a.dir`; throws CannotVerify where a file is missing or unreadable.
Json verify(const Args& a) {
  const auto started = std::chrono::steady_clock::now();
  const Json catalogue = read_json(a.dir + "/catalogue.json");
  const Verifier v(catalogue);
  Findings f;
  for (int r = 0; r < a.ranks; ++r) check_rank(v, catalogue, a.dir, r, f);
  tell_duplicates(f);
  if (const std::int64_t uncovered = catalogue.value("uncovered_elements", std::int64_t{0}); uncovered > 0) {
    f.counts["uncovered"] += uncovered;
    f.notes.push_back(std::to_string(uncovered) + " saved elements are read by no load rank");
  }
  const std::int64_t writers_checked = check_chunk_writers(a, catalogue, f);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return verdict(v, f, writers_checked, a.show, seconds);
}

}  // namespace

int main(int argc, char** argv) {
  const auto parsed = parse_args(argc, argv);
  if (const int* code = std::get_if<int>(&parsed)) return *code;
  Json out{{"ok", false}, {"elements_verified", 0}, {"wrong_elements", 0}};
  try {
    out = verify(std::get<Args>(parsed));
    std::cout << out.dump() << "\n";
    return out["ok"].get<bool>() ? 0 : 1;
  } catch (const CannotVerify& e) {
    out["error"] = {{"kind", "cannot_verify"}, {"message", e.what()}};
  } catch (const std::exception& e) {
    out["error"] = {{"kind", "harness_error"}, {"message", e.what()}};
  }
  std::cout << out.dump() << "\n";
  return 3;
}
