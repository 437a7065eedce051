// One round-trip scenario laid out on two worlds (docs/roundtrip.md, "Worlds"): what it saves and loads,
// on which layouts, and the words the plan gives the workers for each of its kinds, load paths and devices.
// Every enum here has one name table; the words are parsed once, at the command line.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "models/checkpoint_model.h"
#include "models/gtp_layout.h"
#include "models/model_state_dict.h"
#include "models/result.h"
#include "models/synthetic_model.h"

namespace ih {

/// One world's layout: world rank r = ((dp_rank * pp + pp_rank) * ep + ep_rank) * tp + tp_rank.
/// Experts shard over ep with expert TP = tp; dense entries are replicated over ep x dp (their
/// replica id's DP coordinate is dp_rank * ep + ep_rank), experts over dp. gtp > 1 and cp > 1 only for a
/// real model's world (kinds real_*), whose ranks the target's model decomposes (rank_layout does not).
struct WorldLayout {
  std::int64_t tp = 1, pp = 1, ep = 1, dp = 1, gtp = 1, cp = 1;
  std::int64_t ranks() const { return tp * gtp * cp * pp * ep * dp; }
  std::string text() const;
  RankLayout rank_layout(std::int64_t world_rank) const;
};

/// The GDP in_proj under GTP (kind gdp_gtp): world rank r = t * G + g (DP = 1).
struct GtpWorld {
  std::int64_t tp = 1, gtp = 1, pad_alignment = 0;
  /// How this side saves (and builds the request it loads with): Megatron's gather, or the shard split
  /// (spec 4.7: the checkout's own factory, or with --candidate shard-split the harness's candidate).
  GtpSaveDesign design = GtpSaveDesign::gather;
  std::int64_t ranks() const { return tp * gtp; }
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
/// Whether the workers build Megatron's own models for this kind (`roundtrip --real`).
constexpr bool is_real(ScenarioKind kind) {
  return kind == ScenarioKind::real_gpt_hybrid || kind == ScenarioKind::real_hybrid_hybrid;
}
/// The model a real kind saves (GPT or hybrid); it always loads a HybridModel.
constexpr ModelKind saved_model(ScenarioKind kind) {
  return kind == ScenarioKind::real_hybrid_hybrid ? ModelKind::hybrid : ModelKind::gpt;
}

/// Which of Megatron's entry points a real scenario's worlds call (the plan's "load_path").
enum class LoadPath {
  /// dist_checkpointing.save / load; the worker retargets with Megatron's layer maps and calls load_state_dict.
  dist_checkpointing,
  /// megatron.training.checkpointing.save_checkpoint / load_checkpoint under Megatron's parsed args: its own
  /// GPT -> hybrid setup (`_maybe_setup_gpt_to_hybrid_load`) retargets, and it loads the model itself.
  training,
  /// dist_checkpointing.save / load through Megatron's fully parallel strategy wrappers over the DP x CP group
  /// (training's --ckpt-fully-parallel-save / --ckpt-fully-parallel-load): each DP rank writes and reads its
  /// share of the main replicas and receives the rest by exchange (dist_checkpointing/exchange_utils.py).
  fully_parallel,
};
/// The plan's word for a load path: "dist_checkpointing", "training", "fully_parallel".
std::string_view to_string(LoadPath path);

/// Where the worlds run their collectives (the plan's "device", `roundtrip --device`).
enum class Device {
  cpu,   // gloo
  cuda,  // NCCL
};
/// The one name table of Device: the command line parses it, the plan names the device with it.
inline constexpr std::array<std::pair<Device, const char*>, 2> kDeviceNames = {
    {{Device::cpu, "cpu"}, {Device::cuda, "cuda"}}};
std::string_view to_string(Device device);

/// The word of an SSM mixer in a model's configuration (ModelConfig::ssm_mixer): "gdp", "mamba".
std::string_view mixer_word(GtpMixer mixer);

/// The plan's word for how the load world reads, which the workers act on: "serialization_load"
/// (Megatron's dist_checkpointing.load) or "to_state_dict" (each rank's local checkpoint merged by
/// Megatron's own to_state_dict, LoadOrder::to_state_dict_baseline). to_state_dict_fixed is a
/// reference-model ordering no Megatron worker runs: invalid_argument.
Result<std::string_view> plan_word(LoadOrder order);

/// What a checkpoint saved by a Megatron-LM from before 7d3f4a0122 (Nov 2025, the optimizer refactor that added
/// the param groups' `default_config`; GatedDeltaProduct came later still) lacks beside this Megatron's.
struct OlderMegatronCheckpoint {
  std::vector<std::string> args;                // the global args' fields (gdp_num_householder)
  std::vector<std::string> param_group_fields;  // each optimizer param group's fields (default_config)
};
const OlderMegatronCheckpoint& older_megatron_checkpoint();

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
  /// Load path training: the checkpoint as an older Megatron-LM saved it (older_megatron_checkpoint()), the GPT
  /// checkpoints users already have; the load run then fills in what it lacks (args' defaults, param group fields).
  bool saved_by_older_megatron = false;
  bool is_real() const { return ih::is_real(kind); }
  /// Whether the load world dumps the live optimizer's param groups after load_checkpoint, for the oracle: the
  /// training path with one (unchained: no experts) optimizer.
  bool param_groups_after_load_checkpoint() const;
  /// Whether the save is fully parallel (Megatron's FullyParallelSaveStrategyWrapper: the fully_parallel path, and
  /// training's default --ckpt-fully-parallel-save).
  bool saves_fully_parallel() const;
  /// Whether it is so over data-parallel groups of several ranks, so that some replicated chunk must be written by
  /// another rank than its main replica's.
  bool save_spreads_writes() const;
  /// Whether the real models keep Megatron's DistributedOptimizer. It takes fp32 parameters only (the oracle's
  /// values are then float32, OracleDtype::float32), and an fp32 parameter is its own main copy: the optimizer's
  /// `optimizer.state.param.<key>` entry holds the model's `<key>` itself, so the plan gives both one key id.
  bool distributed_optimizer() const;
  /// The save (or load) world's layout in words (TP/PP/EP/DP, or TP/GTP/p for gdp_gtp).
  std::string layout_text(bool save_side) const;
};

}  // namespace ih
