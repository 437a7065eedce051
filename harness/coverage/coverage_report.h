// coverage.py's own JSON report of a Megatron tree (`coverage json --show-contexts`, written by
// coverage_collect.h), read into what the gate reports from it: which lines of which file ran, under which gate
// checks, and the functions coverage.py found those lines in.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "seam/error_kinds.h"

namespace ih::coverage {

/// File (relative to the tree root, e.g. "megatron/core/dist_checkpointing/serialization.py") -> executed line ->
/// the gate checks that ran it (a line run outside any check, e.g. at import, has an empty set).
using LineContexts = std::map<std::string, std::map<std::int64_t, std::set<std::string>>>;

/// The executed lines of coverage.json at `path` with their contexts. Files outside `tree_root` are left out;
/// coverage.py's relative names are relative to the tree root (coverage_collect.h writes the report there).
/// A file that is not coverage.py's JSON report with contexts is invalid_argument naming what is wrong.
Result<LineContexts> read_coverage_json(const std::string& path, const std::string& tree_root);

/// One function as coverage.py's report names it ("Class.method", "outer.inner"; module level is "").
struct FunctionLines {
  std::string name;
  std::int64_t start_line = 0;
  std::set<std::int64_t> executed, missing;  // its statements, run and not run
};

/// One file's statements (coverage.py's analysis: executable lines only) and its functions.
struct FileCoverage {
  std::set<std::int64_t> executed, missing;
  std::vector<FunctionLines> functions;
  /// The function `line` is a statement of ("" at module level or for a line of no function).
  std::string function_of(std::int64_t line) const;
};
using CoverageFiles = std::map<std::string, FileCoverage>;

/// Every file of the report under `tree_root` (as read_coverage_json names them) with its statements.
Result<CoverageFiles> read_coverage_files(const std::string& path, const std::string& tree_root);

}  // namespace ih::coverage
