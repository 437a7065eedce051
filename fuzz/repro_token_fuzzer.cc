// Fuzzes the repro-token and pinned-case parsers (seam/repro_token.h): any bytes give a typed error
// or a token whose text parses back to the same token (one case, one token).
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "properties/invariants.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size > 4096) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  IH_FUZZ_INVARIANT(ih::invariants::repro_token_round_trip(text));
  if (const auto pinned = ih::parse_pinned(text); pinned.ok()) {
    const auto again = ih::parse_pinned(ih::format_pinned(*pinned));
    IH_FUZZ_CHECK(again.ok() && again->token == pinned->token && again->reason == pinned->reason,
                  "a pinned case round-trips through its text");
  }
  return 0;
}
