// Pattern-level properties: layer maps (spec 2.2, 2.9), error parity (spec 1.3, 2.2), pipeline
// segments (spec 1.6) and FSDP prefix recovery (spec 2.7).
#include "properties/suite.h"

#include "properties/invariants.h"

#include "models/text.h"

namespace ih::props {
namespace {

using invariants::describe;

// The bodies live in properties/invariants.h, shared with the fuzz targets and the replays.
Verdict maps_match_layers(Implementation& impl, const PatternCase& c) {
  return invariants::maps_match_layers(impl.layer_maps(c.pattern), c.pattern, c.layers);
}

Verdict maps_invariant_under_separators(Implementation& impl, const PatternCase& c) {
  return invariants::maps_invariant_under_separators(impl, impl.layer_maps(c.pattern), c.pattern, c.layers);
}

bool is_parse_kind(ErrorKind kind) {
  return kind == ErrorKind::invalid_symbol || kind == ErrorKind::mtp_not_identical ||
         kind == ErrorKind::attention_with_mla_dsa;
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
  return invariants::segments_follow_vp_major_order(impl, c.segments, c.pp);
}

Verdict fsdp_prefix_recovery(Implementation& impl, const FsdpCase& c) {
  return invariants::fsdp_prefix_recovery(impl, c.pattern, c.key, c.checkpoint_keys, c.captures);
}

PatternCase spec_example(std::string layers, std::string pattern) { return PatternCase{layers, pattern, 2}; }

}  // namespace

std::vector<Property> pattern_properties() {
  return {
      make_property<PatternCase>("maps_match_layers", "pattern",
                                 "layer maps pair the i-th '*' and i-th MLP with GPT layer i, 'M' fresh (2.2)",
                                 genAnyHybridPattern(12), maps_match_layers,
                                 {{"spec_2_2", spec_example("M*-M*-*-M*-*-", "M*-M*-|*-|M*-|*-")}}),
      make_property<PatternCase>("maps_separator_invariant", "pattern",
                                 "maps unchanged by removing pipes or adding a trailing '/' (2.9, 6.13, 6.14)",
                                 genAnyHybridPattern(12), maps_invariant_under_separators),
      make_property<NearValidCase>(
          "error_parity", "pattern",
          "every near-valid pattern fails with its intended error kind (1.3, 2.2, 6.12, 6.14)", genNearValidPattern(),
          error_parity,
          {{"mixed_before_counts", NearValidCase{"M*-M*E", "spec 2.2 example", ErrorKind::mixed_mlp_kinds}},
           {"identical_before_symbol", NearValidCase{"M*M*/MM/Ma", "spec 1.3 table", ErrorKind::mtp_not_identical}}}),
      make_property<SegmentCase>("segments_vp_major", "pattern",
                                 "stage (r, vp) builds segment vp*P + r at the summed offset (1.6, 6.24)",
                                 genSegmentCase(), segments_follow_vp_major_order,
                                 {{"spec_1_6", SegmentCase{{"M*-M*-", "*-", "M*-", "*-"}, 2}}}),
      make_property<FsdpCase>("fsdp_prefix_recovery", "retarget",
                              "an FSDP key takes a module. capture only when exactly one distinct exists (2.7, 6.23)",
                              genFsdpCase(), fsdp_prefix_recovery),
  };
}

}  // namespace ih::props
