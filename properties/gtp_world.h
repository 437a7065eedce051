// Helpers shared by the GTP and load properties: every (t, g) rank's factory parameters and what
// the implementation builds for it, and a factory whose build and merge ask the implementation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "properties/cases.h"
#include "seam/implementation.h"

namespace ih::props {

/// One (t, g) rank: its factory parameters (with its shard) and its build through the seam.
struct RankBuild {
  std::int64_t t = 0, g = 0;
  GtpFactoryParams params;
  StateNode built;
  std::vector<ShardedTensor> pieces;  // the list's tensors, when the build is a list
};

/// Storage id of rank (t, g)'s shard: nonzero and distinct per rank.
std::uint64_t shard_storage(std::int64_t t, std::int64_t g, std::int64_t gtp);
/// The (t, g) parameters of a case: shard storage, replica id as the design requires.
Result<GtpFactoryParams> rank_params(const GtpCase& c, std::int64_t t, std::int64_t g);
/// Every rank's build, in (t, g) order; an implementation error names the rank.
Result<std::vector<RankBuild>> build_all(Implementation& impl, const GtpCase& c);

/// The padding of a case.
Result<GtpPadding> padding_of(const GtpCase& c);

/// Row blocks with adjacent runs joined and empty runs dropped, for comparing tensors.
std::vector<RowBlock> canonical(const TensorValue& t);
/// "(rows, cols) dtype [storage:first+rows ...]" for messages.
std::string show_tensor(const TensorValue& t);

/// A factory for (t, g) whose build and merge are the implementation's gtp_pieces / gtp_merge.
/// The merge never sees the shard: load preprocessing strips factory data, and so does this.
ShardedTensorFactory seam_factory(Implementation& impl, GtpSaveDesign design, const GtpFactoryParams& params);

}  // namespace ih::props
