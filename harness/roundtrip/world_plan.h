// Round trips across world sizes (docs/roundtrip.md, "Worlds"): named scenarios that save a GPT
// model's state from A ranks and load the retargeted hybrid state on B ranks, each world launched
// with Open MPI. This file is the C++ side that owns the plan and the element-provenance oracle:
// every rank's state dict comes from the reference model (models/synthetic_model), the expected
// source of every loaded element from the reference retarget (models/retarget) and the reference
// factory builds; the Python workers only fill, save, load and dump what they loaded.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "codec/json_codec.h"
#include "harness/roundtrip/oracle_encoding.h"
#include "harness/roundtrip/scenario_table.h"
#include "harness/roundtrip/seeded_scenarios.h"
#include "harness/roundtrip/world_scenario.h"
#include "models/flat_state.h"

namespace ih {

/// One rank's sharded state dict of a real model, as the Megatron target describes it (its
/// `model_state_dict` seam operation): the plan of a real scenario is computed from these.
using RealModelEntries = std::function<Result<std::vector<FlatEntry>>(const ModelDumpSpec&, std::int64_t rank)>;

/// What write_world_scenario computed.
struct WorldPlanStats {
  std::int64_t gpt_keys = 0;            // tensor keys the save world writes
  std::int64_t saved_elements = 0;      // distinct global elements of those keys
  std::int64_t expected_elements = 0;   // elements the load ranks will hold, summed over ranks
  std::int64_t expected_writers = 0;    // (key, chunk) pairs with exactly one main replica
  std::int64_t uncovered_elements = 0;  // saved elements no load rank reads (must be 0)
};

/// The folder of a scenario under the work folder: "s_<name>".
std::string scenario_dir(const std::string& name);

/// The run's plan.json for the workers: the device and one object per scenario (name, kind, dir, pattern,
/// load_order, load_path, save and load layouts in words). Each scenario's oracle encoding is in its
/// catalogue.json (write_world_scenario). With `describe` (a real scenario planned in its worlds,
/// world_handshake.h) a scenario also names the models each side builds: "describe": {"save": ..., "load": ...},
/// each its model request for rank 0.
Result<json::Json> world_plan_json(const std::vector<const WorldScenario*>& scenarios, Device device,
                                   bool describe = false);

/// Writes the scenario's plan into `dir`: save_rank_<r>.json and load_rank_<r>.json (entries in
/// the flat entry JSON plus fill/prefill segments and object strings), oracle_rank_<r>.json (the
/// verifier's expectation per loaded path), catalogue.json (the oracle's encoding, oracle_encoding.h: its
/// key shift and dtype; key ids, shapes, fresh keys and a distributed optimizer's `param` aliases, expected
/// writers).
/// Real scenarios need `real_entries` (else harness_error): the entries Megatron's models give, whose
/// paths the workers fill and dump, and the reference retarget of the real hybrid entries as the oracle.
Result<WorldPlanStats> write_world_scenario(const WorldScenario& scenario, const std::filesystem::path& dir,
                                            const RealModelEntries& real_entries = {});

}  // namespace ih
