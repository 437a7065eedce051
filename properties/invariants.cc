// Pattern invariants (invariants.h). One translation unit per surface, so a fuzz target links only its own.
#include "properties/invariants.h"

#include "models/text.h"

namespace ih::invariants {

std::string describe(const Result<GptCompatLayerMaps>& maps) {
  if (!maps.ok()) return std::string(to_string(maps.error().kind)) + ": " + maps.error().message;
  std::string out = "L=" + std::to_string(maps->num_gpt_layers) + " attention {";
  for (const auto& [h, i] : maps->attention_to_gpt) out += std::to_string(h) + ":" + std::to_string(i) + " ";
  out += "} mlp {";
  for (const auto& [h, i] : maps->mlp_to_gpt) out += std::to_string(h) + ":" + std::to_string(i) + " ";
  return out + "} fresh [" + join_ints(maps->fresh_init, " ") + "]";
}

GptCompatLayerMaps expected_maps(std::string_view layers) {
  GptCompatLayerMaps m;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto h = static_cast<std::int64_t>(i);
    if (layers[i] == '*')
      m.attention_to_gpt.push_back({h, static_cast<std::int64_t>(m.attention_to_gpt.size())});
    else if (layers[i] == 'M')
      m.fresh_init.push_back(h);
    else
      m.mlp_to_gpt.push_back({h, static_cast<std::int64_t>(m.mlp_to_gpt.size())});
  }
  m.num_gpt_layers = static_cast<std::int64_t>(m.attention_to_gpt.size());
  return m;
}

Broken maps_match_layers(const Result<GptCompatLayerMaps>& got, std::string_view pattern, std::string_view layers) {
  if (got.ok() && *got == expected_maps(layers)) return "";
  return "maps of '" + std::string(pattern) + "': got " + describe(got) + ", spec 2.2 gives " +
         describe(expected_maps(layers));
}

Broken maps_invariant_under_separators(Implementation& impl, const Result<GptCompatLayerMaps>& got,
                                       std::string_view pattern, std::string_view layers) {
  const std::string p(pattern), l(layers);
  for (const std::string& variant : {l, p + "/", p + "//", l + "/"}) {
    const auto other = impl.layer_maps(std::string_view(variant));
    const bool same = got.ok() ? other.ok() && *got == *other : !other.ok() && other.error().kind == got.error().kind;
    if (!same) return "maps('" + p + "') = " + describe(got) + " but maps('" + variant + "') = " + describe(other);
  }
  return "";
}

Broken segments_follow_vp_major_order(Implementation& impl, const std::vector<std::string>& segments, std::int64_t pp) {
  std::string main;
  for (std::size_t i = 0; i < segments.size(); ++i) main += (i ? "|" : "") + segments[i];
  const auto n = static_cast<std::int64_t>(segments.size());
  std::vector<std::int64_t> offsets{0};
  for (const std::string& s : segments) offsets.push_back(offsets.back() + static_cast<std::int64_t>(s.size()));
  for (std::int64_t vp = 0; vp < n / pp; ++vp)
    for (std::int64_t r = 0; r < pp; ++r) {
      const std::int64_t idx = vp * pp + r;
      const auto vp_stage = n > 1 ? std::optional<std::int64_t>(vp) : std::nullopt;
      const auto got = impl.select_segment(main, {r, pp, vp_stage, std::nullopt, std::nullopt});
      const pattern::SegmentSelection want{segments[idx], offsets[idx]};
      if (!got.ok() || *got != want)
        return "stage (pp_rank " + std::to_string(r) + ", vp " + std::to_string(vp) + ") of '" + main +
               "' should get segment " + std::to_string(idx) + " '" + want.layers + "' at offset " +
               std::to_string(want.offset) + ", got " +
               (got.ok() ? "'" + got->layers + "' at " + std::to_string(got->offset) : got.error().message);
    }
  return "";
}

}  // namespace ih::invariants
