// The round trip's named scenarios (docs/roundtrip.md, "Scenarios" and "Real models"): one table, each row a
// scenario's name, kind, load path, whether `--all` runs it, the finding it reproduces and its builder. Every
// list of names (`--all`, `--real --all`, the shard-split ones, the findings, the gate's real tier) is read off
// the table; a name means nothing beyond its row.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "harness/roundtrip/scenario_builders.h"
#include "harness/roundtrip/world_scenario.h"

namespace ih {

/// Whether `roundtrip --all` runs a scenario (`--real --all` for the real kinds).
enum class InAll {
  yes,
  /// Only with --candidate shard-split: the shard-split save design (spec 4.7) is not in the Megatron-LM
  /// snapshot, so without the candidate the scenario is reported as not run, never passed.
  with_candidate,
  /// A real scenario that reproduces a Megatron finding: only with --scenario, so `--real --all` stays a
  /// regression check that passes. The gate's real tier runs it beside the others, pinned by its finding
  /// (corpus/findings), so a Megatron that fixes it, or breaks it differently, shows.
  no,
};

/// One row of the scenario table.
struct ScenarioRow {
  std::string_view name;
  ScenarioKind kind;
  LoadPath load_path;  // the real kinds' entry points (the others call dist_checkpointing)
  InAll in_all;
  /// InAll::no: the findings of docs/megatron-findings.md the scenario reproduces, ", " between them (the
  /// letters its corpus/findings/<letter>-*.finding pins start with); empty for every other row.
  std::string_view finding;
  ScenarioBuilder build;
  std::string_view description;
};

/// Every named scenario, in the order the lists give them.
std::span<const ScenarioRow> scenario_table();
/// The row named `name`; nullptr for no row.
const ScenarioRow* find_scenario_row(std::string_view name);

/// The names `--all` runs, in order (kind gpt_hybrid).
std::vector<std::string> world_scenario_names();
/// Scenarios that run on the Megatron-LM snapshot with GDP + GTP (kind gdp_gtp), for `--all`.
std::vector<std::string> gtp_world_scenario_names();
/// Scenarios of the shard-split save design (spec 4.7), for `--all --candidate shard-split`: shard-split
/// on both sides, and cross-loads between it and the gather design in both directions.
std::vector<std::string> shard_split_world_scenario_names();
/// The real-model scenarios (`roundtrip --real --all`): Megatron's GPTModel and HybridModel built by the
/// workers on CPU, at layouts that fit the world sizes.
std::vector<std::string> real_world_scenario_names();
/// Real-model scenarios that reproduce a Megatron finding (InAll::no).
std::vector<std::string> real_finding_scenario_names();
/// What the gate's real tier runs: the real scenarios of `--real --all`, then the finding ones.
std::vector<std::string> gate_real_scenario_names();
/// Why a scenario of InAll::with_candidate is not run without --candidate shard-split.
inline constexpr std::string_view kNeedsCandidate =
    "the shard-split save design (spec 4.7) is not in the Megatron-LM snapshot: only the gather design runs "
    "(--candidate shard-split runs the harness's candidate of it)";
/// Without --candidate: the shard-split scenarios, reported as not run (never passed). name -> reason.
std::vector<std::pair<std::string, std::string>> world_scenarios_not_run();

/// The named scenario laid out on `save_ranks` and `load_ranks`. invalid_argument for an unknown
/// name; unsupported when the ranks cannot hold this scenario (e.g. PP 2 on an odd world).
Result<WorldScenario> make_world_scenario(const std::string& name, std::int64_t save_ranks, std::int64_t load_ranks);

}  // namespace ih
