// The provenance oracle's encoding, defined once: the plan writer (world_plan.cc) numbers keys with
// it, the LibTorch verifier decodes loaded values with it, and the Python workers read it from the
// plan's "oracle" field (world_plan_json). Element g of the key with id k holds
// (k << kOracleKeyShift) + ravel(g): a value names its key and its row-major global index.
#pragma once

#include <cstdint>

namespace ih {

/// Bits of the global index: the plan refuses a key of 2^24 elements or more (the worlds' small models
/// stay far below). Key ids stay below 2^21, so every value is below 2^45: a float64 parameter of a
/// real Megatron model (`roundtrip --real`) holds it exactly, as int64 storage does.
inline constexpr int kOracleKeyShift = 24;
/// GPT keys have ids from 1; fresh (never loaded) hybrid keys from here, so a value says which it is.
inline constexpr std::int64_t kOracleFreshIdBase = std::int64_t{1} << 20;
/// Every oracle value is an integer a float64 holds exactly (53-bit significand).
static_assert(kOracleKeyShift + 21 <= 53, "oracle values must stay exact in float64");

}  // namespace ih
