// coverage.py's JSON report (`coverage json --show-contexts`) of a gate run, read as which checks ran
// which lines of a Megatron tree: the contexts are the gate checks' names (gate/<group>/<name>).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "seam/error_kinds.h"

namespace ih::coverage {

/// File (relative to the tree's root, '/'-separated) -> executed line -> the checks whose context ran it.
/// A line run only outside any check (the empty context: module import, process start) has an empty set.
using LineContexts = std::map<std::string, std::map<std::int64_t, std::set<std::string>>>;

/// Reads `path`; files outside `tree_root` are left out (a key already relative is taken as relative to
/// it). A file that cannot be read, is not JSON or lacks the per-line contexts is invalid_argument.
Result<LineContexts> read_coverage_json(const std::string& path, const std::string& tree_root);

}  // namespace ih::coverage
