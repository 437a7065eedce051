// Which gate check is running, for the line coverage of a Megatron tree (gate --coverage, docs/coverage.md). Once
// enabled, every process the harness starts inherits the collection through its environment
// (harness/megatron/adapter/megatron_adapter/coverage_run.py), and each request to an adapter names the check it
// serves ("coverage_context"), so coverage.py records every line under the check that ran it.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace ih::coverage {

/// Where the processes write their data files, and the only code they measure.
struct Collection {
  std::filesystem::path data_dir;  // each process's .coverage.<host>.<pid>.<random>
  std::filesystem::path source;    // the Megatron tree's megatron/ folder
};

/// Turns collection on for every process started from now on (this process's environment).
void enable(const Collection& collection);
/// Turns collection off for processes started from now on.
void disable();
/// The collection enabled in this run, if any.
const std::optional<Collection>& collection();
/// The check running from now on ("gate/<group>/<name>"); processes started after this call start under it.
void set_context(const std::string& check);
/// The check running ("" before the first).
const std::string& context();
/// "NAME=VALUE" of every coverage variable a round-trip world's ranks need, their context `context_template`
/// (a check name with "{scenario}" for the scenario each rank runs); empty when collection is off.
std::vector<std::string> rank_environment(const std::string& context_template);

}  // namespace ih::coverage
