// The seam: every property asks its questions through Implementation, so the same suite can
// judge the reference model, a planted mutant, or a real Megatron behind an adapter.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "models/checkpoint_model.h"
#include "models/flat_state.h"
#include "models/gpt_layer_maps.h"
#include "models/gtp_layout.h"
#include "models/hybrid_pattern.h"
#include "models/integrity.h"
#include "models/model_state_dict.h"
#include "seam/error_kinds.h"
#include "seam/scenarios.h"

namespace ih {

/// The operations of Megatron's checkpoint surface that the harness checks.
enum class Operation {
  parse_pattern,
  layer_maps,
  select_segment,
  retarget,
  fsdp_key,
  fsdp_retarget,
  split_chunks,         // spec 4.3
  gtp_pieces,           // spec 4.5 / 4.7 build
  gtp_merge,            // spec 4.5 / 4.7 merge
  integrity,            // exact tiling checks on boxes
  megatron_validation,  // Megatron's own validate_sharding_integrity verdict (spec 3.7)
  gtp_param_entry,      // the GTP parameter's own checkpoint entry (spec 4.4, 4.7 invariant 7)
  load_state,           // a load along one of the orderings of spec 3.8
  gtp_padding,          // GTP shard rows and padding (spec 4.4)
  // Scenario operations (seam/scenarios.h): whole save/load scenarios of the gate's spec-invariant checks.
  optimizer_resume,    // spec 4.7 invariant 6 (findings R1, R2)
  fresh_retarget,      // spec 2.4, 4.11 (finding B)
  load_orderings,      // spec 3.8 (finding C)
  all_padding_load,    // spec 3.8, 4.7 with all-padding GTP ranks
  single_expert_load,  // spec 2.5, addendum G (finding A)
  model_state_dict,    // a whole model's sharded state dict of one rank (`model dump`)
};

/// How large a world an implementation can run for one case. Real Megatron runs one process per
/// rank (harness/megatron/adapter/megatron_adapter/worlds/), so its worlds are bounded; the reference model is
/// not. Properties whose cases build worlds draw them within it and say so in their output.
struct WorldCapacity {
  /// Ranks of one world: T x G for a GTP layout, T x G x CP x DP for a writer-election grid.
  std::optional<std::int64_t> max_ranks;  // nullopt: unbounded
  /// Ranks of a world that builds a whole real model on each rank (model dump): fewer, each rank being
  /// a process holding a GPTModel or HybridModel.
  std::optional<std::int64_t> max_model_ranks;  // nullopt: unbounded
};

/// An answer an implementation cannot give (e.g. an op the installed Megatron lacks).
inline Error unsupported(std::string_view implementation, std::string_view what) {
  return make_error(seam_kind::unsupported, std::string(implementation) + " does not support " + std::string(what));
}

/// Which code answers: a version and a revision where the target has them (Megatron's package info),
/// empty for the reference. Repro tokens name Megatron by these, the path being only a hint.
struct CodeIdentity {
  std::string version, revision;
};

class Implementation {
 public:
  virtual ~Implementation() = default;
  /// "reference", "mutant:<name>", "megatron <version>".
  virtual std::string name() const = 0;
  virtual CodeIdentity code_identity() const { return {}; }
  virtual bool supports(Operation op) const { return true; }
  /// The largest worlds this implementation runs (default: unbounded).
  virtual WorldCapacity capacity() const { return {}; }

  /// parse_hybrid_pattern (spec 1.3); nullopt is Python None.
  virtual Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) = 0;
  /// gpt_compatible_layer_maps (spec 2.2).
  virtual Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) = 0;
  /// select_pipeline_segment (spec 1.6).
  virtual Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                           const pattern::SegmentRequest& request) = 0;
  /// Layer maps of `pattern`, then retarget_sharded_state_dict_to_gpt_checkpoint (spec 2.4).
  virtual Result<std::vector<FlatEntry>> retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) = 0;
  /// _retarget_explicit_key_to_gpt_checkpoint (spec 2.7); nullopt result = omitted.
  virtual Result<std::optional<std::string>> fsdp_key(
      std::string_view pattern, std::string_view key,
      const std::optional<std::vector<std::string>>& checkpoint_keys) = 0;
  /// retarget_fsdp_state_dict_to_gpt_checkpoint (spec 2.7).
  virtual Result<StateNode> fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                          const std::optional<std::vector<std::string>>& checkpoint_keys,
                                          std::string_view prefix) = 0;

  // Layout operations (spec 4). Defaults answer `unsupported` so older implementations compile.

  /// The non-GTP split factory's chunks for one TP rank's tensor `orig` (spec 4.3).
  virtual Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout) {
    return unsupported(name(), "split_chunks");
  }
  /// What one (t, g) rank's in_proj factory builds under `design` (spec 4.5 / 4.7).
  virtual Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) {
    return unsupported(name(), "gtp_pieces");
  }
  /// That factory's merge of `loaded`, with the factory's data stripped first (spec 3.6).
  virtual Result<TensorValue> gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params, const StateNode& loaded) {
    return unsupported(name(), "gtp_merge");
  }
  /// Exact integrity of all ranks' metadata, optionally against a reference key set.
  virtual Result<IntegrityReport> integrity(const GlobalMetadata& metadata,
                                            const std::optional<std::vector<std::string>>& reference_keys) {
    return unsupported(name(), "integrity");
  }
  /// What Megatron's validate_sharding_integrity concludes on all ranks' metadata (spec 3.7).
  virtual Result<MegatronValidation> megatron_validation(const GlobalMetadata& metadata) {
    return unsupported(name(), "megatron_validation");
  }
  /// GTP padding of `rows` TP-local rows over `gtp_size` ranks with pad_for_alignment (spec 4.4).
  virtual Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) {
    return unsupported(name(), "gtp_padding");
  }
  /// The (t, g) GTP parameter's composite entry, the one the optimizer state is keyed by (spec 4.4).
  virtual Result<ShardedTensor> gtp_param_entry(const GtpFactoryParams& params) {
    return unsupported(name(), "gtp_param_entry");
  }
  /// Loads `request` from `checkpoint` along `order` (spec 3.8: serialization.load or to_state_dict).
  virtual Result<StateNode> load_state(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) {
    return unsupported(name(), "load_state");
  }

  // Scenario operations (seam/scenarios.h): facts the gate's spec-invariant checks judge. Defaults answer
  // `unsupported` (the check is NOT RUN).

  /// The in_proj and its exp_avg saved in one GTP world and loaded in another (spec 4.7 invariant 6).
  virtual Result<OptimizerResumeAnswer> optimizer_resume(const OptimizerResumeCase& c) {
    return unsupported(name(), "optimizer_resume");
  }
  /// A fresh in_proj under GTP retargeted to a GPT checkpoint, and what a load hands back (spec 2.4, 4.11).
  virtual Result<FreshRetargetAnswer> fresh_retarget(const FreshRetargetCase& c) {
    return unsupported(name(), "fresh_retarget");
  }
  /// serialization.load and to_state_dict of one tree per GTP rank, all-padding ranks included (spec 3.8).
  virtual Result<LoadOrderingsAnswer> load_orderings(const AllPaddingCase& c) {
    return unsupported(name(), "load_orderings");
  }
  /// Megatron's serialization.load of a real checkpoint with all-padding GTP ranks (spec 3.8, 4.7).
  virtual Result<AllPaddingLoadAnswer> all_padding_load(const AllPaddingCase& c) {
    return unsupported(name(), "Megatron's serialization.load on a real checkpoint (Megatron targets only)");
  }
  /// A GPT save of expert objects, the hybrid request retargeted and loaded (spec 2.5, addendum G).
  virtual Result<SingleExpertAnswer> single_expert_load(const SingleExpertCase& c) {
    return unsupported(name(), "single_expert_load");
  }

  /// The flat sharded state dict (model, and the optimizer's when asked) of global `rank` of a
  /// GPTModel or HybridModel configuration (models/model_state_dict.h, docs/cli.md `model dump`).
  virtual Result<std::vector<FlatEntry>> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) {
    return unsupported(name(), "model_state_dict");
  }
};

}  // namespace ih
