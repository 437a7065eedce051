// The round trip's writer check, shared by the LibTorch verifier and its unit tests (no torch here):
// every chunk the plan expects has exactly one writer in the checkpoint's DCP metadata, no chunk is written that
// no rank holds as its main replica, and a fully parallel save spread its writes beyond the main replicas.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ih {

struct WriterCheck {
  std::int64_t checked = 0;  // chunks the plan expects
  std::int64_t wrong = 0;    // chunks with no, several or an unexpected writer, or written unexpectedly
  std::int64_t moved = 0;    // chunks written by another holder than their main replica's rank
  std::vector<std::string> notes;
};

/// `expected`: the plan's [key, chunk offset, main replica's rank(, holders)]; the fourth element
/// lists the chunk's holders where the save hands a replica to any one of them (training's fully parallel
/// save). `written`: the save's [key, chunk offset, file "__<rank>_..."], only keys in `keys` counted.
/// `spread`: the save is fully parallel over data-parallel groups of several ranks, whose point is to hand
/// replicated chunks to the group's ranks: a save that wrote every chunk from its main replica's rank (what a
/// plain save does) is wrong once.
inline WriterCheck check_writers(const nlohmann::json& expected, const nlohmann::json& written,
                                 const std::set<std::string>& keys, bool spread = false, std::size_t max_notes = 50) {
  const auto text = [](const std::vector<std::int64_t>& v) {
    std::string s = "[";
    for (std::size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return s + "]";
  };
  std::map<std::pair<std::string, std::vector<std::int64_t>>, std::vector<std::int64_t>> actual;
  for (const auto& w : written) {
    const std::string key = w[0], file = w[2];
    if (!keys.count(key)) continue;
    const std::int64_t writer = file.rfind("__", 0) == 0 ? std::atoll(file.c_str() + 2) : -1;
    actual[{key, w[1].get<std::vector<std::int64_t>>()}].push_back(writer);
  }
  WriterCheck out;
  const auto note = [&](std::string line) {
    if (out.notes.size() < max_notes) out.notes.push_back(std::move(line));
  };
  for (const auto& w : expected) {
    ++out.checked;
    const auto chunk = std::make_pair(w[0].get<std::string>(), w[1].get<std::vector<std::int64_t>>());
    const std::int64_t main = w[2];
    const std::vector<std::int64_t> any_of =
        w.size() > 3 ? w[3].get<std::vector<std::int64_t>>() : std::vector<std::int64_t>{main};
    const auto it = actual.find(chunk);
    if (it == actual.end() || it->second.size() != 1 ||
        std::find(any_of.begin(), any_of.end(), it->second[0]) == any_of.end()) {
      ++out.wrong;
      std::string got = "no writer";
      if (it != actual.end()) {
        got = "writers";
        for (std::int64_t x : it->second) got += " " + std::to_string(x);
      }
      note("chunk " + chunk.first + text(chunk.second) + ": expected exactly one writer, " +
           (w.size() > 3 ? "one of ranks " + text(any_of) : "rank " + std::to_string(main)) + "; checkpoint has " +
           got);
    }
    if (it != actual.end() && it->second.size() == 1 && it->second[0] != main) ++out.moved;
    if (it != actual.end()) actual.erase(it);
  }
  if (spread && out.checked > 0 && out.moved == 0) {
    ++out.wrong;
    note("the fully parallel save wrote each of its " + std::to_string(out.checked) +
         " chunks from its main replica's rank: it handed no replicated chunk to another rank of the data-parallel "
         "group");
  }
  for (const auto& [chunk, unused] : actual) {
    ++out.wrong;
    note("chunk " + chunk.first + text(chunk.second) + " written but no rank holds its main replica");
  }
  return out;
}

}  // namespace ih
