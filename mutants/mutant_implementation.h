// The reference model behind the seam with exactly one planted bug, chosen by name. Each mutant
// perturbs what one operation answers, the way a bad change to Megatron would; the reference code
// itself stays clean. The property suite must kill every mutant in the catalogue (spec section 6).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "mutants/mutant_catalogue.h"
#include "seam/reference_implementation.h"

namespace ih {

/// Every planted mutant, one enumerator per line of mutants/mutant_catalogue.h.
enum class Mutant {
#define IH_MUTANT_ENUMERATOR(name, bug_class, description) name,
  IH_REFERENCE_MUTANTS(IH_MUTANT_ENUMERATOR)
#undef IH_MUTANT_ENUMERATOR
};

/// One planted bug: its name, the spec 6 bug class it stands for, and what it does.
struct MutantInfo {
  Mutant id;
  std::string name;
  std::string bug_class;    // e.g. "6.1"
  std::string description;  // one line
};

/// Every mutant, in catalogue order.
const std::vector<MutantInfo>& mutant_catalogue();

/// The reference with one planted bug. Operations the mutant does not touch answer like the reference.
class MutantImplementation : public ReferenceImplementation {
 public:
  /// A mutant from the catalogue; an unknown name is invalid_argument listing the known ones.
  static Result<std::unique_ptr<MutantImplementation>> create(const std::string& name);

  std::string name() const override { return "mutant:" + info_.name; }
  Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) override;
  Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) override;
  Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                   const pattern::SegmentRequest& request) override;
  Result<std::vector<FlatEntry>> retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) override;
  Result<std::optional<std::string>> fsdp_key(std::string_view pattern, std::string_view key,
                                              const std::optional<std::vector<std::string>>& checkpoint_keys) override;
  Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) override;
  Result<TensorValue> gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params, const StateNode& loaded) override;
  Result<IntegrityReport> integrity(const GlobalMetadata& metadata,
                                    const std::optional<std::vector<std::string>>& reference_keys) override;
  Result<ShardedTensor> gtp_param_entry(const GtpFactoryParams& params) override;
  Result<StateNode> load_state(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) override;
  Result<MegatronValidation> megatron_validation(const GlobalMetadata& metadata) override;  // mutant_addendum.cc

 private:
  explicit MutantImplementation(MutantInfo info) : info_(std::move(info)) {}
  bool is(Mutant mutant) const { return info_.id == mutant; }
  /// The retarget mutants: the reference's output perturbed entry by entry (mutant_retarget.cc).
  Result<std::vector<FlatEntry>> perturb_retarget(std::string_view pattern, const std::vector<FlatEntry>& in,
                                                  std::vector<FlatEntry> out);
  /// The shard-split build mutants (mutant_layout.cc).
  Result<StateNode> perturb_pieces(const GtpFactoryParams& params, StateNode built);
  /// The spec-addendum mutants (mutant_addendum.cc); nullopt where the mutant does not apply.
  std::optional<Result<ShardedTensor>> addendum_param_entry(const GtpFactoryParams& params);
  std::optional<Result<StateNode>> addendum_pieces(GtpSaveDesign design, const GtpFactoryParams& params);
  std::optional<Result<StateNode>> addendum_load(const Checkpoint& checkpoint, const StateNode& request,
                                                 LoadOrder order);
  void addendum_retarget(const std::vector<FlatEntry>& in, std::vector<FlatEntry>& out);
  std::optional<Result<TensorValue>> addendum_merge(GtpSaveDesign design, const GtpFactoryParams& params,
                                                    const StateNode& loaded);

  MutantInfo info_;
};

}  // namespace ih
