// The reference model behind the seam.
#pragma once

#include "seam/implementation.h"

namespace ih {

class ReferenceImplementation : public Implementation {
 public:
  std::string name() const override { return "reference"; }
  Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) override;
  Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) override;
  Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                   const pattern::SegmentRequest& request) override;
  Result<std::vector<FlatEntry>> retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) override;
  Result<std::optional<std::string>> fsdp_key(std::string_view pattern, std::string_view key,
                                              const std::optional<std::vector<std::string>>& checkpoint_keys) override;
  Result<StateNode> fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                  const std::optional<std::vector<std::string>>& checkpoint_keys,
                                  std::string_view prefix) override;
  // Layout operations: bodies in reference_layout_ops.cc.
  Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout) override;
  Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) override;
  Result<TensorValue> gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params, const StateNode& loaded) override;
  Result<IntegrityReport> integrity(const GlobalMetadata& metadata,
                                    const std::optional<std::vector<std::string>>& reference_keys) override;
  Result<MegatronValidation> megatron_validation(const GlobalMetadata& metadata) override {
    // Megatron builds every entry first: its constructors refuse malformed metadata (spec 3.1, 3.4).
    for (const RankedTensor& t : metadata.tensors) IH_TRY_STATUS(t.tensor.validate_metadata_integrity());
    for (const RankedObject& o : metadata.objects) IH_TRY_STATUS(o.object.validate_metadata_integrity());
    return megatron_validate_sharding(metadata);
  }
  Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) override {
    return ih::gtp_padding(rows, gtp_size, pad_alignment);
  }
  Result<ShardedTensor> gtp_param_entry(const GtpFactoryParams& params) override {
    return gtp_composite_tensor(params);
  }
  Result<StateNode> load_state(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) override {
    return load_checkpoint(checkpoint, request, order);
  }
  // Scenario operations: bodies in reference_scenarios.cc, built from the operations above (virtual,
  // so a mutant's planted bug shows in them). all_padding_load stays unsupported: it is Megatron's own.
  Result<OptimizerResumeAnswer> optimizer_resume(const OptimizerResumeCase& c) override;
  Result<FreshRetargetAnswer> fresh_retarget(const FreshRetargetCase& c) override;
  Result<LoadOrderingsAnswer> load_orderings(const AllPaddingCase& c) override;
  Result<SingleExpertAnswer> single_expert_load(const SingleExpertCase& c) override;
  Result<std::vector<FlatEntry>> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) override {
    IH_TRY_ASSIGN(dict, ih::model_state_dict(spec, rank));
    return flatten(StateNode(std::move(dict)));
  }
};

}  // namespace ih
