// Fuzzes the pattern grammar and GPT layer maps with arbitrary bytes. The invariants are the
// properties' own bodies (properties/invariants.h): maps pair the i-th '*' and MLP with GPT layer
// i, pipes and a trailing '/' never change them (spec 2.2, 2.9), and stage (r, vp) builds segment
// vp*P + r (spec 1.6). Invalid inputs only have to fail cleanly; they are most of what libFuzzer
// tries, so that path stays cheap (one parse, no copies).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz/fuzz_check.h"
#include "fuzz/pattern_reference.h"
#include "models/hybrid_pattern.h"
#include "models/text.h"
#include "properties/invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0 || size > 512) return 0;
  static ih::fuzz::PatternReference reference;  // the model's pattern operations, nothing else linked
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const auto parsed = reference.parse_pattern(text);
  if (!parsed.ok() || !parsed->main) return 0;
  const std::string& main = *parsed->main;
  if (parsed->mtp_depth == 0 && text.find('/') == std::string_view::npos) {
    const auto maps = reference.layer_maps(text);
    if (maps.ok()) {  // the properties' domain: GPT-compatible patterns
      const std::string layers = ih::pattern::strip_pipes(main);
      IH_FUZZ_INVARIANT(ih::invariants::maps_match_layers(maps, text, layers));
      IH_FUZZ_INVARIANT(ih::invariants::maps_invariant_under_separators(reference, maps, text, layers));
    }
  }
  // Segment selection re-splits the pattern for every stage it is asked about, so each input
  // checks one pipeline size (its last byte picks P in 1..4; libFuzzer's mutations reach the
  // others) on patterns of at most 12 segments, as many as the property's generator draws.
  // Everything else only has to select without crashing.
  const std::int64_t pp = 1 + data[size - 1] % 4;
  const std::vector<std::string_view> segments = ih::split_views(main, ih::pattern::kPipe);
  const auto n = static_cast<std::int64_t>(segments.size());
  if (n <= 12 && n % pp == 0)
    IH_FUZZ_INVARIANT(ih::invariants::segments_follow_vp_major_order(
        reference, std::vector<std::string>(segments.begin(), segments.end()), pp));
  else
    (void)reference.select_segment(main, {pp - 1, pp, std::nullopt, std::nullopt, std::nullopt});
  return 0;
}
