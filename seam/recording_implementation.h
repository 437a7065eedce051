// A pass-through Implementation that remembers the first answer that carries no verdict about the
// target: an operation it lacks (unsupported), a timeout, a harness fault. A property run through
// it gets a typed outcome (not run, timeout, harness error) instead of a failure text to search.
#pragma once

#include <optional>

#include "seam/implementation.h"
#include "seam/outcome.h"

namespace ih {

class RecordingImplementation : public Implementation {
 public:
  explicit RecordingImplementation(Implementation& inner) : inner_(inner) {}

  /// The first no-verdict error any operation answered, if one did.
  const std::optional<Error>& no_verdict() const { return no_verdict_; }
  /// not_run / timeout / harness_error for the recorded error; passed when none was recorded.
  Outcome no_verdict_outcome() const { return no_verdict_ ? outcome_of_error(no_verdict_->kind) : Outcome::passed; }

  std::string name() const override { return inner_.name(); }
  CodeIdentity code_identity() const override { return inner_.code_identity(); }
  bool supports(Operation op) const override { return inner_.supports(op); }
  WorldCapacity capacity() const override { return inner_.capacity(); }
  Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) override {
    return seen(inner_.parse_pattern(text));
  }
  Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) override {
    return seen(inner_.layer_maps(text));
  }
  Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                   const pattern::SegmentRequest& request) override {
    return seen(inner_.select_segment(main, request));
  }
  Result<std::vector<FlatEntry>> retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) override {
    return seen(inner_.retarget(pattern, entries));
  }
  Result<std::optional<std::string>> fsdp_key(std::string_view pattern, std::string_view key,
                                              const std::optional<std::vector<std::string>>& checkpoint_keys) override {
    return seen(inner_.fsdp_key(pattern, key, checkpoint_keys));
  }
  Result<StateNode> fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                  const std::optional<std::vector<std::string>>& checkpoint_keys,
                                  std::string_view prefix) override {
    return seen(inner_.fsdp_retarget(pattern, tree, checkpoint_keys, prefix));
  }
  Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout) override {
    return seen(inner_.split_chunks(orig, layout));
  }
  Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) override {
    return seen(inner_.gtp_pieces(design, params));
  }
  Result<TensorValue> gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params,
                                const StateNode& loaded) override {
    return seen(inner_.gtp_merge(design, params, loaded));
  }
  Result<IntegrityReport> integrity(const GlobalMetadata& metadata,
                                    const std::optional<std::vector<std::string>>& reference_keys) override {
    return seen(inner_.integrity(metadata, reference_keys));
  }
  Result<MegatronValidation> megatron_validation(const GlobalMetadata& metadata) override {
    return seen(inner_.megatron_validation(metadata));
  }
  Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) override {
    return seen(inner_.gtp_padding(rows, gtp_size, pad_alignment));
  }
  Result<ShardedTensor> gtp_param_entry(const GtpFactoryParams& params) override {
    return seen(inner_.gtp_param_entry(params));
  }
  Result<StateNode> load_state(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) override {
    return seen(inner_.load_state(checkpoint, request, order));
  }
  Result<OptimizerResumeAnswer> optimizer_resume(const OptimizerResumeCase& c) override {
    return seen(inner_.optimizer_resume(c));
  }
  Result<FreshRetargetAnswer> fresh_retarget(const FreshRetargetCase& c) override {
    return seen(inner_.fresh_retarget(c));
  }
  Result<LoadOrderingsAnswer> load_orderings(const AllPaddingCase& c) override {
    return seen(inner_.load_orderings(c));
  }
  Result<AllPaddingLoadAnswer> all_padding_load(const AllPaddingCase& c) override {
    return seen(inner_.all_padding_load(c));
  }
  Result<SingleExpertAnswer> single_expert_load(const SingleExpertCase& c) override {
    return seen(inner_.single_expert_load(c));
  }
  Result<std::vector<FlatEntry>> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) override {
    return seen(inner_.model_state_dict(spec, rank));
  }

 private:
  template <class T>
  Result<T> seen(Result<T> answer) {
    if (!answer.ok() && !no_verdict_ && outcome_of_error(answer.error().kind) != Outcome::failed)
      no_verdict_ = answer.error();
    return answer;
  }

  Implementation& inner_;
  std::optional<Error> no_verdict_;
};

}  // namespace ih
