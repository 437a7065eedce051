// The reference model's answers to the layout operations of the seam (spec 4).
#include "models/split_factory.h"
#include "seam/reference_implementation.h"

namespace ih {

Result<std::vector<ShardedTensor>> ReferenceImplementation::split_chunks(const ShardedTensor& orig,
                                                                         const SplitLayout& layout) {
  return ih::split_chunks(orig, layout);
}

Result<StateNode> ReferenceImplementation::gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) {
  IH_TRY_ASSIGN(factory, make_gtp_factory(design, params));
  return factory.build();
}

Result<TensorValue> ReferenceImplementation::gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params,
                                                       const StateNode& loaded) {
  IH_TRY_ASSIGN(factory, make_gtp_factory(design, params));
  return factory.without_data().merge(loaded);
}

Result<IntegrityReport> ReferenceImplementation::integrity(
    const GlobalMetadata& metadata, const std::optional<std::vector<std::string>>& reference_keys) {
  return check_integrity(metadata, reference_keys);
}

}  // namespace ih
