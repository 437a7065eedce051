// The processes around a coverage run (gate --coverage, docs/coverage.md): coverage.py's own combine and JSON
// report of what every Megatron process recorded, and the change's lines (git diff --no-index of two trees).
#pragma once

#include <chrono>
#include <string>

#include "harness/coverage/coverage_findings.h"
#include "seam/error_kinds.h"

namespace ih::coverage {

/// Whether any process wrote a data file (`.coverage.<suffix>`) into `data_dir`: none when no Megatron process
/// started, or the adapter that served the run collects nothing (a stand-in).
bool has_data_files(const std::string& data_dir);

/// `python -m coverage combine` of every process's data file in `data_dir` into `data_dir`/.coverage, then
/// `coverage json --show-contexts` into `data_dir`/coverage.json, run in `tree_root` so its file names are the
/// tree's. No data file at all, or a coverage.py that fails, is a harness_error with its stderr.
Status combine_and_report(const std::string& python, const std::string& data_dir, const std::string& tree_root,
                          std::chrono::milliseconds timeout);

/// The lines of NEW's files under megatron/ added or modified relative to BASE (`git diff --no-index -U0`).
/// A tree without megatron/ is invalid_argument; git missing or failing is a harness_error.
Result<ChangedLines> changed_lines(const std::string& base_root, const std::string& new_root,
                                   std::chrono::milliseconds timeout);

}  // namespace ih::coverage
