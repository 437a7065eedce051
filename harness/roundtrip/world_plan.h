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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/json_codec.h"
#include "harness/roundtrip/oracle_encoding.h"
#include "models/checkpoint_model.h"
#include "models/gtp_layout.h"
#include "models/model_state_dict.h"
#include "models/result.h"
#include "models/synthetic_model.h"

namespace ih {

/// One world's layout: world rank r = ((dp_rank * pp + pp_rank) * ep + ep_rank) * tp + tp_rank.
/// Experts shard over ep with expert TP = tp; dense entries are replicated over ep x dp (their
/// replica id's DP coordinate is dp_rank * ep + ep_rank), experts over dp. gtp > 1 only for a real
/// model's world (kinds real_*), whose ranks the target's model decomposes (rank_layout does not).
struct WorldLayout {
  std::int64_t tp = 1, pp = 1, ep = 1, dp = 1, gtp = 1;
  std::int64_t ranks() const { return tp * gtp * pp * ep * dp; }
  std::string text() const;
  RankLayout rank_layout(std::int64_t world_rank) const;
};

/// The GDP in_proj under GTP (kind gdp_gtp): world rank r = t * G + g (DP = 1).
struct GtpWorld {
  std::int64_t tp = 1, gtp = 1, pad_alignment = 0;
  /// How this side saves (and builds the request it loads with): Megatron's gather, or the shard split
  /// (spec 4.7: the checkout's own factory, or with --candidate shard-split the harness's candidate).
  GtpSaveDesign design = GtpSaveDesign::gather;
};

/// What a scenario saves and loads.
enum class ScenarioKind {
  gpt_hybrid,  // a GPT model's state, loaded into the retargeted hybrid model
  gdp_gtp,     // the GDP mixer's in_proj under GTP, saved with the gather design
  /// Megatron's own GPTModel (saved) and HybridModel (loaded, retargeted), built by the workers
  /// (`roundtrip --real`): their state dicts are Megatron's, not the reference's synthetic ones.
  real_gpt_hybrid,
  real_hybrid_hybrid,  // Megatron's own HybridModel saved and loaded across world sizes (no retarget)
};
/// The plan's word for a kind: "gpt_hybrid", "gdp_gtp", "real_gpt_hybrid", "real_hybrid_hybrid".
std::string_view to_string(ScenarioKind kind);

/// Which of Megatron's entry points a real scenario's worlds call (the plan's "load_path").
enum class LoadPath {
  /// dist_checkpointing.save / load; the worker retargets with Megatron's layer maps and calls load_state_dict.
  dist_checkpointing,
  /// megatron.training.checkpointing.save_checkpoint / load_checkpoint under Megatron's parsed args: its own
  /// GPT -> hybrid setup (`_maybe_setup_gpt_to_hybrid_load`) retargets, and it loads the model itself.
  training,
};
/// The plan's word for a load path: "dist_checkpointing", "training".
std::string_view to_string(LoadPath path);

/// The plan's word for how the load world reads, which the workers act on: "serialization_load"
/// (Megatron's dist_checkpointing.load) or "to_state_dict" (each rank's local checkpoint merged by
/// Megatron's own to_state_dict, LoadOrder::to_state_dict_baseline). to_state_dict_fixed is a
/// reference-model ordering no Megatron worker runs: invalid_argument.
Result<std::string_view> plan_word(LoadOrder order);

struct WorldScenario {
  std::string name;
  ScenarioKind kind = ScenarioKind::gpt_hybrid;
  GtpWorld gtp_save, gtp_load;  // kind gdp_gtp only
  std::int64_t gdp_cols = 16;   // C of the in_proj (kind gdp_gtp)
  /// How the load world reads (kind gdp_gtp): Megatron's dist_checkpointing.load, or each rank's
  /// local checkpoint (its MCoreTensorAwareStateDict, written by the save rank of the same
  /// coordinates) merged into the request by Megatron's to_state_dict.
  LoadOrder load_order = LoadOrder::serialization_load;
  std::string description;
  std::string pattern = "M*-M*-";  // the hybrid model that loads
  bool gated = false;              // SwiGLU fc1 (a ShardedTensorFactory on both sides)
  bool optimizer = false;          // model-space optimizer states (real kinds: the FP32Optimizer's moments)
  ModelConfig config;
  WorldLayout save, load;
  /// The real models (kinds real_*): what each side's workers build, and what the plan asks the
  /// Megatron target to describe (its `model dump`); save and load mirror their sizes for the text.
  ModelDumpSpec real_save, real_load;
  LoadPath load_path = LoadPath::dist_checkpointing;  // kinds real_* (the others call dist_checkpointing)
  bool is_real() const { return kind == ScenarioKind::real_gpt_hybrid || kind == ScenarioKind::real_hybrid_hybrid; }
  /// Whether the real models keep Megatron's DistributedOptimizer. It takes fp32 parameters only (the oracle's
  /// values are then float32, OracleDtype::float32), and an fp32 parameter is its own main copy: the optimizer's
  /// `optimizer.state.param.<key>` entry holds the model's `<key>` itself, so the plan gives both one key id.
  bool distributed_optimizer() const;
  /// The save (or load) world's layout in words (TP/PP/EP/DP, or TP/GTP/p for gdp_gtp).
  std::string layout_text(bool save_side) const;
};

/// The names `--all` runs, in order.
std::vector<std::string> world_scenario_names();
/// Scenarios that run on the Megatron-LM snapshot with GDP + GTP (kind gdp_gtp), for `--all`.
std::vector<std::string> gtp_world_scenario_names();

/// Scenarios of the shard-split save design (spec 4.7), for `--all --candidate shard-split`: shard-split
/// on both sides, and cross-loads between it and the gather design in both directions.
std::vector<std::string> shard_split_world_scenario_names();

/// The real-model scenarios (`roundtrip --real --all`): Megatron's GPTModel and HybridModel built by the
/// workers on CPU, at layouts that fit the world sizes.
std::vector<std::string> real_world_scenario_names();

/// Real-model scenarios that reproduce a Megatron finding (only with --scenario, so `--real --all` stays a
/// regression check that passes): the gate's real tier runs them beside the others, pinned by their
/// findings (corpus/findings), so a Megatron that fixes one, or breaks it differently, shows.
std::vector<std::string> real_finding_scenario_names();

/// Without --candidate: the shard-split scenarios, reported as not run (never passed). name -> reason.
std::vector<std::pair<std::string, std::string>> world_scenarios_not_run();

/// The named scenario laid out on `save_ranks` and `load_ranks`. invalid_argument for an unknown
/// name; unsupported when the ranks cannot hold this scenario (e.g. PP 2 on an odd world).
Result<WorldScenario> make_world_scenario(const std::string& name, std::int64_t save_ranks, std::int64_t load_ranks);
/// The name of the scenario the command line lays out (custom_world_scenario).
inline constexpr const char* kCustomScenarioName = "gpt_hybrid_custom";
/// The scenario of `roundtrip --target megatron [--pattern P] [--save-tp ...]`: a GPT model saved at
/// `save` (TP x PP), the hybrid `pattern` retargeted and loaded at `load`. invalid_argument when the
/// pattern has no GPT layer maps or its GPT layers do not split over save.pp.
Result<WorldScenario> custom_world_scenario(const std::string& pattern, const WorldLayout& save,
                                            const WorldLayout& load, bool gated, bool optimizer);
/// A scenario drawn from `seed`: pattern, flags and factorizations of both worlds into TP x PP x EP
/// x DP, reproducible from the seed alone.
Result<WorldScenario> seeded_world_scenario(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks);

/// A real model scenario drawn from `seed` (`roundtrip --real --seed S`): pattern, gated/tied/norm and both
/// worlds' TP x PP x DP, reproducible from the seed alone.
Result<WorldScenario> seeded_real_world_scenario(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks);

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
/// catalogue.json (write_world_scenario).
Result<json::Json> world_plan_json(const std::vector<const WorldScenario*>& scenarios, std::string_view device);

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
