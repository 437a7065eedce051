#include "harness/roundtrip/stored_layout.h"

#include <algorithm>
#include <cmath>

namespace ih {
namespace {

using json::Json;

std::int64_t ravel(const Shape& index, const Shape& shape) {
  std::int64_t out = 0;
  for (std::size_t i = 0; i < shape.size(); ++i) out = out * shape[i] + index[i];
  return out;
}

std::string index_text(const Shape& index) {
  std::string out = "[";
  for (std::size_t i = 0; i < index.size(); ++i) out += (i ? ", " : "") + std::to_string(index[i]);
  return out + "]";
}

Shape unravel(std::int64_t linear, const Shape& shape) {
  Shape out(shape.size());
  for (std::size_t i = shape.size(); i-- > 0;) out[i] = linear % shape[i], linear /= shape[i];
  return out;
}

/// The value element `index` of `key` must hold: its own, or a remap's source.
struct Expected {
  std::int64_t id;
  Shape shape, index;
};

/// The extent of `rows` rows on axis p: one along each prepended axis, the rows, then the row's own shape.
Shape row_extent(std::size_t p, std::int64_t rows, const Shape& row_tail) {
  Shape extent(p, 1);
  extent.push_back(rows);
  extent.insert(extent.end(), row_tail.begin(), row_tail.end());
  return extent;
}

Expected expected_at(const Shape& index, const std::pair<std::int64_t, Shape>& own,
                     const std::vector<const StoredRemap*>& remaps) {
  for (const StoredRemap* m : remaps) {
    bool inside = m->offset.size() == index.size();
    for (std::size_t a = 0; inside && a < index.size(); ++a)
      inside = index[a] >= m->offset[a] && index[a] < m->offset[a] + m->extent[a];
    if (!inside) continue;
    if (m->source_id == kNoElement) return {kNoElement, {}, {}};
    Shape source = m->source_offset;
    for (std::size_t a = 0; a < index.size(); ++a) source[a] += index[a] - m->offset[a];
    return {m->source_id, m->source_shape, source};
  }
  return {own.first, own.second, index};
}

/// "key K [i, j]" for an oracle value, or what it is when it names no element.
std::string held_text(double value, const StoredLayout& layout, const std::map<std::int64_t, std::string>& names) {
  if (value < 0 || std::floor(value) != value) return "the value " + std::to_string(value) + " (no oracle element)";
  const auto v = static_cast<std::int64_t>(value);
  const std::int64_t id = v >> layout.encoding.key_shift,
                     linear = v & ((std::int64_t{1} << layout.encoding.key_shift) - 1);
  const auto name = names.find(id);
  if (name == names.end()) return "the value " + std::to_string(v) + " (no key of the plan)";
  const Shape& shape = layout.keys.at(name->second).second;
  if (linear >= numel(shape)) return "the value " + std::to_string(v) + " (past " + name->second + ")";
  return name->second + index_text(unravel(linear, shape));
}

}  // namespace

StoredVerdict judge_stored_chunks(const std::vector<ReadBackChunk>& chunks, const StoredLayout& layout) {
  StoredVerdict out;
  std::map<std::int64_t, std::string> names;
  for (const auto& [key, id_shape] : layout.keys) names.emplace(id_shape.first, key);  // an alias names its source
  const auto note = [&out](std::string line, int& in_chunk) {
    if (in_chunk++ < 2 && out.first_wrong.size() < 8) out.first_wrong.push_back(std::move(line));
  };
  for (const ReadBackChunk& c : chunks) {
    ++out.chunks;
    int in_chunk = 0;
    const std::string where = c.key + " chunk at " + index_text(c.offset) + " of " + index_text(c.sizes);
    const auto own = layout.keys.find(c.key);
    if (own == layout.keys.end()) {  // judged, every element wrong: the wrong never outnumber the judged
      out.elements_checked += static_cast<std::int64_t>(c.values.size());
      out.wrong += static_cast<std::int64_t>(c.values.size());
      note(where + ": a key the plan does not save", in_chunk);
      continue;
    }
    std::vector<const StoredRemap*> remaps;
    for (const StoredRemap& m : layout.remaps)
      if (m.key == c.key) remaps.push_back(&m);
    for (std::size_t e = 0; e < c.values.size(); ++e) {
      Shape index = unravel(static_cast<std::int64_t>(e), c.sizes);
      for (std::size_t a = 0; a < index.size(); ++a) index[a] += c.offset[a];
      const Expected want = expected_at(index, own->second, remaps);
      ++out.elements_checked;
      if (want.id == kNoElement) {
        ++out.wrong;
        note(where + ": element " + index_text(index) + " holds " + held_text(c.values[e], layout, names) +
                 ", a row the reference's layout does not store (padding)",
             in_chunk);
        continue;
      }
      const double value = static_cast<double>((want.id << layout.encoding.key_shift) + ravel(want.index, want.shape));
      if (c.values[e] == value) continue;
      ++out.wrong;
      note(where + ": element " + index_text(index) + " holds " + held_text(c.values[e], layout, names) +
               ", the reference's layout puts " + names.at(want.id) + index_text(want.index) + " there",
           in_chunk);
    }
  }
  return out;
}

std::vector<StoredRemap> swiglu_reference_remaps(const std::vector<Segment>& fill, const Shape& row_tail,
                                                 const std::map<std::string, std::int64_t>& ids) {
  if (fill.size() != 2 || fill[0].key != fill[1].key || fill[0].prepend != fill[1].prepend ||
      fill[0].rows != fill[1].rows || fill[0].rows <= 0 || fill[1].begin != fill[0].rows || !ids.count(fill[0].key))
    return {};
  const auto p = static_cast<std::size_t>(fill[0].prepend);
  if (p >= fill[0].global_shape.size()) return {};
  const std::int64_t rows = fill[0].rows, fragments = fill[0].global_shape[p] / rows, t = fragments / 2;
  if (fragments * rows != fill[0].global_shape[p] || fragments % 2 != 0) return {};
  const std::int64_t w = (fill[0].global_offset[p] / rows) % t;
  std::vector<StoredRemap> out;
  for (std::size_t half = 0; half < 2; ++half) {
    const Segment& s = fill[half];
    Shape offset = s.global_offset;
    offset[p] = (w + static_cast<std::int64_t>(half) * t) * rows;
    if (offset == s.global_offset) continue;  // described where the reference puts it
    Shape extent(p, 1);
    extent.push_back(rows);
    extent.insert(extent.end(), row_tail.begin(), row_tail.end());
    out.push_back({s.key, offset, extent, ids.at(s.key), s.global_shape, s.global_offset});
  }
  return out;
}

Result<std::vector<StoredRemap>> reference_remaps(const std::vector<Segment>& fill,
                                                  const std::vector<Segment>& reference, const Shape& row_tail,
                                                  const std::map<std::string, std::int64_t>& ids) {
  std::vector<StoredRemap> out;
  for (const Segment& f : fill)
    for (const Segment& r : reference) {
      const std::int64_t first = std::max(f.begin, r.begin), end = std::min(f.begin + f.rows, r.begin + r.rows);
      if (first >= end) continue;
      const auto p = static_cast<std::size_t>(r.prepend);
      if (!ids.count(r.key) || !ids.count(f.key) || r.prepend != f.prepend ||
          r.global_offset.size() != f.global_offset.size() || p >= r.global_offset.size())
        return make_error(seam_kind::description_disagrees,
                          "the reference stores local rows [" + std::to_string(first) + ", " + std::to_string(end) +
                              ") as " + r.key + ", Megatron describes them as " + f.key +
                              (ids.count(r.key) ? " on other axes" : ", and " + r.key + " is not saved"));
      Shape described = f.global_offset, stored = r.global_offset;
      described[p] += first - f.begin;
      stored[p] += first - r.begin;
      if (r.key == f.key && stored == described) continue;  // described where the reference puts it
      out.push_back({r.key, stored, row_extent(p, end - first, row_tail), ids.at(f.key), f.global_shape, described});
    }
  for (const Segment& f : fill)  // described rows the reference stores nowhere (pad rows): no chunk may hold them
    for (std::int64_t row = f.begin; row < f.begin + f.rows;) {
      const Segment* holder = nullptr;
      std::int64_t next = f.begin + f.rows;
      for (const Segment& r : reference) {
        if (row >= r.begin && row < r.begin + r.rows) holder = &r;
        if (r.begin > row) next = std::min(next, r.begin);
      }
      if (holder) {
        row = holder->begin + holder->rows;
        continue;
      }
      const auto p = static_cast<std::size_t>(f.prepend);
      Shape offset = f.global_offset;
      if (p >= offset.size()) break;
      offset[p] += row - f.begin;
      out.push_back({f.key, offset, row_extent(p, next - row, row_tail), kNoElement, {}, {}});
      row = next;
    }
  return out;
}

Json remaps_json(const std::vector<StoredRemap>& remaps) {
  Json out = Json::array();
  for (const StoredRemap& m : remaps)
    out.push_back({{"key", m.key},
                   {"offset", m.offset},
                   {"extent", m.extent},
                   {"source_id", m.source_id},
                   {"source_shape", m.source_shape},
                   {"source_offset", m.source_offset}});
  return out;
}

Result<StoredLayout> stored_layout_from_json(const Json& catalogue, const Json& stored_layout) {
  try {
    StoredLayout out;
    out.encoding.key_shift = catalogue.at("oracle").at("key_shift").get<int>();
    for (const Json& k : catalogue.at("keys"))
      out.keys[k.at("key").get<std::string>()] = {k.at("id").get<std::int64_t>(), k.at("global_shape").get<Shape>()};
    for (const Json& a : catalogue.value("aliases", Json::array())) {
      const std::int64_t id = a.at("id").get<std::int64_t>();
      for (const auto& [key, own] : std::map(out.keys))
        if (own.first == id) out.keys[a.at("key").get<std::string>()] = own;
    }
    for (const Json& m : stored_layout.at("remaps"))
      out.remaps.push_back({m.at("key").get<std::string>(), m.at("offset").get<Shape>(), m.at("extent").get<Shape>(),
                            m.at("source_id").get<std::int64_t>(), m.at("source_shape").get<Shape>(),
                            m.at("source_offset").get<Shape>()});
    return out;
  } catch (const Json::exception& e) {
    return make_error(seam_kind::harness_error, std::string("the stored layout cannot be read: ") + e.what());
  }
}

Result<std::vector<ReadBackChunk>> stored_chunks_from_json(const Json& document) {
  try {
    std::vector<ReadBackChunk> out;
    for (const Json& c : document.at("chunks")) {
      ReadBackChunk chunk{c.at("key").get<std::string>(), c.at("offset").get<Shape>(), c.at("sizes").get<Shape>(),
                          c.at("values").get<std::vector<double>>()};
      if (chunk.offset.size() != chunk.sizes.size() ||
          numel(chunk.sizes) != static_cast<std::int64_t>(chunk.values.size()))
        return make_error(seam_kind::harness_error,
                          "stored chunk of " + chunk.key + ": its values do not fill its sizes");
      out.push_back(std::move(chunk));
    }
    return out;
  } catch (const Json::exception& e) {
    return make_error(seam_kind::harness_error, std::string("the stored chunks cannot be read: ") + e.what());
  }
}

}  // namespace ih
