// Synthetic sharded state dicts (spec 2.3): what a GPTModel (homogeneous layers) and a HybridModel
// (per-layer keys) emit for one rank of a parallel layout, with TE-spec keys, replica ids and
// fragmentations; optionally the model-space distributed-optimizer entries (spec 2.6).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/gtp_layout.h"
#include "models/state_tree.h"

namespace ih {

/// Model dimensions (a small GPT by default). num_experts = 0 means dense MLP layers.
struct ModelConfig {
  std::int64_t hidden = 256;
  std::int64_t num_attention_heads = 8;
  std::int64_t num_query_groups = 8;
  std::int64_t kv_channels = 32;
  std::int64_t ffn_hidden = 1024;
  bool gated_mlp = false;
  bool add_bias = false;
  std::int64_t num_experts = 0;
  std::int64_t moe_ffn_hidden = 512;
  std::int64_t vocab = 1024;
  std::int64_t mamba_heads = 8;
  std::int64_t mamba_head_dim = 32;
  std::int64_t mamba_groups = 4;
  std::int64_t mamba_state = 16;
  /// The mixer at 'M' positions: "mamba" (Mamba-2) or "gdp" (the GatedDeltaProduct stack spec; spec 1.1).
  std::string ssm_mixer = "mamba";
  std::int64_t gdp_householder = 3;                       // M of spec 4.1
  GtpSaveDesign gdp_design = GtpSaveDesign::shard_split;  // how a GTP GDP in_proj is saved
  std::int64_t pad_alignment = 16;                        // GTP pad_for_alignment (spec 4.4)
  bool layer_norm = false;       // LayerNorm (weight and bias) instead of RMSNorm (weight only)
  bool tied_embeddings = false;  // the output layer shares the word embeddings
  /// Under GTP, every parallel linear GTP-wrapped as Megatron wraps them (model dump, addendum I):
  /// weights sharded on their axis 0 over GTP, the GTP rank in the replica ids of what GTP
  /// replicates. False: GTP on the mixers' in_proj only (the GTP properties' model, addendum H).
  bool gtp_linears = false;
};

/// One rank's position in the parallel layout.
struct RankLayout {
  std::int64_t tp = 1, tp_rank = 0;
  std::int64_t pp = 1, pp_rank = 0;
  std::int64_t ep = 1, ep_rank = 0;
  std::int64_t etp = 1, etp_rank = 0;
  /// Data-parallel size asked for (model_state_dict.h's data_parallel_size: the least multiple of it that the
  /// expert grid allows); its rank in the replica ids.
  std::int64_t dp = 1, dp_rank = 0;
  /// Data-parallel rank of the expert grid (Megatron's expert-dp group), in the experts' replica ids.
  std::int64_t expert_dp_rank = 0;
  /// GTP over the mixers' in_proj, and with ModelConfig::gtp_linears over every parallel linear.
  std::int64_t gtp = 1, gtp_rank = 0;
  /// Context-parallel size: its ranks hold the same parameters (they split the sequence), so a CP rank is a
  /// replica like a DP rank; with CP > 1 dp_rank counts the DP x CP group (Megatron's dp_cp rank, c + C d).
  std::int64_t cp = 1;
};

/// Which distributed-optimizer states to emit next to the model entries (empty: none).
struct OptimizerStates {
  std::vector<std::string> names;  // e.g. exp_avg, exp_avg_sq, fp32_param
  static OptimizerStates adam() { return {{"exp_avg", "exp_avg_sq", "fp32_param"}}; }
};

/// GPTModel, homogeneous-layer format: layer index dropped from keys, prepended layer axis.
/// The layers split evenly over pp; the result is a flat dict keyed by state-dict path.
Result<StateNode> gpt_sharded_state_dict(const ModelConfig& config, std::int64_t num_layers, const RankLayout& layout,
                                         const OptimizerStates& optimizer = {});

/// HybridModel, per-layer format, for every pipeline stage (and virtual stage) of this pp rank.
Result<StateNode> hybrid_sharded_state_dict(const ModelConfig& config, std::string_view pattern,
                                            const RankLayout& layout, const OptimizerStates& optimizer = {});

/// Every rank position of a layout's sizes (pp x tp x ep x etp x gtp), ranks filled in.
std::vector<RankLayout> all_ranks(const RankLayout& sizes);

/// Checks that TP/EP/ETP/PP sizes divide the dimensions every model shards; names the first that does not.
Status validate_layout(const ModelConfig& config, const RankLayout& layout);
/// The same for a model with Mamba (M) layers: TP divides the Mamba heads and groups (a GPT model has none).
Status validate_mamba_layout(const ModelConfig& config, const RankLayout& layout);

}  // namespace ih
