// Pattern-level properties: layer maps (spec 2.2, 2.9), error parity (spec 1.3, 2.2), pipeline
// segments (spec 1.6) and FSDP prefix recovery (spec 2.7).
#include "properties/suite.h"

#include "models/text.h"

namespace ih::props {
namespace {

std::string describe(const Result<GptCompatLayerMaps>& maps) {
  if (!maps.ok()) return std::string(to_string(maps.error().kind)) + ": " + maps.error().message;
  std::string out = "L=" + std::to_string(maps->num_gpt_layers) + " attention {";
  for (const auto& [h, i] : maps->attention_to_gpt) out += std::to_string(h) + ":" + std::to_string(i) + " ";
  out += "} mlp {";
  for (const auto& [h, i] : maps->mlp_to_gpt) out += std::to_string(h) + ":" + std::to_string(i) + " ";
  return out + "} fresh [" + join_ints(maps->fresh_init, " ") + "]";
}

/// The maps spec 2.2 derives from main' (pairing by occurrence, not adjacency).
GptCompatLayerMaps expected_maps(const std::string& layers) {
  GptCompatLayerMaps m;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const auto h = static_cast<std::int64_t>(i);
    if (layers[i] == '*') m.attention_to_gpt.push_back({h, static_cast<std::int64_t>(m.attention_to_gpt.size())});
    else if (layers[i] == 'M') m.fresh_init.push_back(h);
    else m.mlp_to_gpt.push_back({h, static_cast<std::int64_t>(m.mlp_to_gpt.size())});
  }
  m.num_gpt_layers = static_cast<std::int64_t>(m.attention_to_gpt.size());
  return m;
}

Verdict maps_match_layers(Implementation& impl, const PatternCase& c) {
  const auto got = impl.layer_maps(std::string_view(c.pattern));
  if (got.ok() && *got == expected_maps(c.layers)) return "";
  return "maps of '" + c.pattern + "': got " + describe(got) + ", spec 2.2 gives " + describe(expected_maps(c.layers));
}

Verdict maps_invariant_under_separators(Implementation& impl, const PatternCase& c) {
  const auto piped = impl.layer_maps(std::string_view(c.pattern));
  for (const std::string& variant : {c.layers, c.pattern + "/", c.pattern + "//", c.layers + "/"}) {
    const auto other = impl.layer_maps(std::string_view(variant));
    if (piped.ok() != other.ok() || (piped.ok() && *piped != *other))
      return "maps('" + c.pattern + "') = " + describe(piped) + " but maps('" + variant + "') = " + describe(other);
  }
  return "";
}

bool is_parse_kind(ErrorKind kind) {
  return kind == ErrorKind::invalid_symbol || kind == ErrorKind::mtp_not_identical || kind == ErrorKind::attention_with_mla_dsa;
}

Verdict error_parity(Implementation& impl, const NearValidCase& c) {
  if (is_parse_kind(c.expected)) {  // the parser itself must fail first, with the same kind (spec 1.3)
    const auto parsed = impl.parse_pattern(std::string_view(c.pattern));
    if (parsed.ok() || parsed.error().kind != c.expected)
      return "parse('" + c.pattern + "') [" + c.mutation + "] should fail with " + std::string(to_string(c.expected)) +
             ", got " + (parsed.ok() ? std::string("a parse") : std::string(to_string(parsed.error().kind)));
  }
  const auto got = impl.layer_maps(std::string_view(c.pattern));
  if (!got.ok() && got.error().kind == c.expected) return "";
  return "maps('" + c.pattern + "') [" + c.mutation + "] should fail with " + std::string(to_string(c.expected)) +
         ", got " + describe(got);
}

Verdict segments_follow_vp_major_order(Implementation& impl, const SegmentCase& c) {
  std::string main;
  for (std::size_t i = 0; i < c.segments.size(); ++i) main += (i ? "|" : "") + c.segments[i];
  const auto n = static_cast<std::int64_t>(c.segments.size());
  std::vector<std::int64_t> offsets{0};
  for (const std::string& s : c.segments) offsets.push_back(offsets.back() + static_cast<std::int64_t>(s.size()));
  for (std::int64_t vp = 0; vp < n / c.pp; ++vp)
    for (std::int64_t r = 0; r < c.pp; ++r) {
      const std::int64_t idx = vp * c.pp + r;
      const auto vp_stage = n > 1 ? std::optional<std::int64_t>(vp) : std::nullopt;
      const auto got = impl.select_segment(main, {r, c.pp, vp_stage, std::nullopt, std::nullopt});
      const pattern::SegmentSelection want{c.segments[idx], offsets[idx]};
      if (!got.ok() || *got != want)
        return "stage (pp_rank " + std::to_string(r) + ", vp " + std::to_string(vp) + ") should get segment " +
               std::to_string(idx) + " '" + want.layers + "' at offset " + std::to_string(want.offset) + ", got " +
               (got.ok() ? "'" + got->layers + "' at " + std::to_string(got->offset) : got.error().message);
    }
  return "";
}

Verdict fsdp_prefix_recovery(Implementation& impl, const FsdpCase& c) {
  const auto plain = impl.fsdp_key(c.pattern, c.key, std::nullopt);
  if (!plain.ok() || !*plain) return "fsdp_key('" + c.key + "') without checkpoint keys failed or dropped the key";
  const auto got = impl.fsdp_key(c.pattern, c.key, c.checkpoint_keys);
  const std::string want = c.captures.size() == 1 ? c.captures[0] : **plain;
  if (got.ok() && *got && **got == want) return "";
  return "with " + std::to_string(c.captures.size()) + " distinct captures the key should become '" + want + "', got " +
         (got.ok() ? (*got ? "'" + **got + "'" : std::string("None")) : got.error().message);
}

PatternCase spec_example(std::string layers, std::string pattern) { return PatternCase{layers, pattern, 2}; }

}  // namespace

std::vector<Property> pattern_properties() {
  return {
      make_property<PatternCase>("maps_match_layers", "pattern", "layer maps pair the i-th '*' and i-th MLP with GPT layer i, 'M' fresh (2.2)",
                                 genAnyHybridPattern(12), maps_match_layers,
                                 {{"spec_2_2", spec_example("M*-M*-*-M*-*-", "M*-M*-|*-|M*-|*-")}}),
      make_property<PatternCase>("maps_separator_invariant", "pattern", "maps unchanged by removing pipes or adding a trailing '/' (2.9, 6.13, 6.14)",
                                 genAnyHybridPattern(12), maps_invariant_under_separators),
      make_property<NearValidCase>("error_parity", "pattern", "every near-valid pattern fails with its intended error kind (1.3, 2.2, 6.12, 6.14)",
                                   genNearValidPattern(), error_parity,
                                   {{"mixed_before_counts", NearValidCase{"M*-M*E", "spec 2.2 example", ErrorKind::mixed_mlp_kinds}},
                                    {"identical_before_symbol", NearValidCase{"M*M*/MM/Ma", "spec 1.3 table", ErrorKind::mtp_not_identical}}}),
      make_property<SegmentCase>("segments_vp_major", "pattern", "stage (r, vp) builds segment vp*P + r at the summed offset (1.6, 6.24)",
                                 genSegmentCase(), segments_follow_vp_major_order,
                                 {{"spec_1_6", SegmentCase{{"M*-M*-", "*-", "M*-", "*-"}, 2}}}),
      make_property<FsdpCase>("fsdp_prefix_recovery", "retarget", "an FSDP key takes a module. capture only when exactly one distinct exists (2.7, 6.23)",
                              genFsdpCase(), fsdp_prefix_recovery),
  };
}

}  // namespace ih::props
