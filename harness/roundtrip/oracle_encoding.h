// The provenance oracle's encoding, defined once: the plan writer (world_plan.cc) chooses it for each
// scenario and writes it into the scenario's catalogue.json ("oracle": {"key_shift", "dtype"}), the
// Python workers fill and the LibTorch verifier decodes with what it says. Element g of the key with id
// k holds (k << key_shift) + ravel(g): a value names its key and its row-major global index.
#pragma once

#include <bit>
#include <cstdint>
#include <string>
#include <string_view>

#include "models/result.h"
#include "seam/error_kinds.h"

namespace ih {

/// Bits of the global index in a float64 scenario: the plan refuses a key of 2^24 elements or more (the
/// worlds' small models stay far below). Key ids stay below 2^21, so every value is below 2^45: a float64
/// parameter of a real Megatron model (`roundtrip --real`) holds it exactly, as int64 storage does.
inline constexpr int kOracleKeyShift = 24;
static_assert(kOracleKeyShift + 21 <= 53, "oracle values must stay exact in float64");

/// The number type a scenario's parameters hold the oracle's values in. float32 is the distributed
/// optimizer's: it takes fp32 parameters only, and an fp32 holds every integer up to 2^24 exactly.
enum class OracleDtype { float64, float32 };

inline std::string_view to_string(OracleDtype dtype) { return dtype == OracleDtype::float32 ? "float32" : "float64"; }

/// Bits of an integer the dtype holds exactly (its significand and the hidden bit).
inline int exact_integer_bits(OracleDtype dtype) { return dtype == OracleDtype::float32 ? 24 : 53; }

struct OracleEncoding {
  int key_shift = kOracleKeyShift;
  OracleDtype dtype = OracleDtype::float64;
};

/// The encoding of a scenario whose largest key has `max_numel` elements and whose key ids go up to
/// `max_key_id`: float64 keeps kOracleKeyShift; float32 takes the fewest index bits that name every element of
/// the largest key. unsupported when a value would not be exact in the dtype (never rounded: a rounded value
/// would name another element).
inline Result<OracleEncoding> oracle_encoding(OracleDtype dtype, std::int64_t max_numel, std::int64_t max_key_id) {
  OracleEncoding e{kOracleKeyShift, dtype};
  if (dtype == OracleDtype::float32)
    e.key_shift = std::max(
        1, static_cast<int>(std::bit_width(static_cast<std::uint64_t>(std::max<std::int64_t>(max_numel, 1) - 1))));
  const int bits = exact_integer_bits(dtype);
  const bool fits = max_numel <= (std::int64_t{1} << e.key_shift) && e.key_shift < bits &&
                    max_key_id < (std::int64_t{1} << (bits - e.key_shift));  // (max_key_id + 1) << shift <= 2^bits
  if (!fits)
    return make_error(seam_kind::unsupported, "the oracle cannot name " + std::to_string(max_key_id) +
                                                  " keys of up to " + std::to_string(max_numel) + " elements in " +
                                                  std::string(to_string(dtype)) + " (its integers are exact below 2^" +
                                                  std::to_string(bits) + ")");
  return e;
}

}  // namespace ih
