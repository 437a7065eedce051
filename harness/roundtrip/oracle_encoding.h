// The provenance oracle's encoding, defined once: the plan writer (world_plan.cc) numbers keys with
// it, the LibTorch verifier decodes loaded values with it, and the Python workers read it from the
// plan's "oracle" field (world_plan_json). Element g of the key with id k holds
// (k << kOracleKeyShift) + ravel(g): a value names its key and its row-major global index.
#pragma once

#include <cstdint>

namespace ih {

/// Bits of the global index: tensors stay below 2^40 elements, key ids below 2^23.
inline constexpr int kOracleKeyShift = 40;
/// GPT keys have ids from 1; fresh (never loaded) hybrid keys from here, so a value says which it is.
inline constexpr std::int64_t kOracleFreshIdBase = std::int64_t{1} << 20;

}  // namespace ih
