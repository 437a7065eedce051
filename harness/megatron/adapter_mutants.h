// The names the adapter's --mutant accepts, read from its mutant table without starting it (no torch, no
// Megatron: `adapter.py --mutant-names`), so an unknown Megatron mutant is refused before any work.
#pragma once

#include <string>
#include <vector>

#include "harness/megatron/megatron_implementation.h"

namespace ih {

/// The adapter-side mutant names, in the table's order, from the adapter and Python of `options` (their
/// defaults when empty). harness_error when that Python or script is missing, or the listing fails or names none.
Result<std::vector<std::string>> adapter_mutant_names(const MegatronOptions& options);

}  // namespace ih
