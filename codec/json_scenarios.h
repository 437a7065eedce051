// The wire form of the seam's scenario operations (seam/scenarios.h): the requests the Megatron client
// sends and the typed answers read from the adapter's replies (docs/adapter-protocol.md: optimizer_resume,
// gtp_fresh_retarget, load_orderings, gtp_all_padding_load, single_expert_load). A reply that lacks what
// the protocol promises is a harness_error naming the field, never a verdict.
#pragma once

#include "codec/json_codec.h"
#include "seam/scenarios.h"

namespace ih::json {

Json optimizer_resume_request(const OptimizerResumeCase& c);
Result<OptimizerResumeAnswer> optimizer_resume_from_json(const Json& reply);

Json fresh_retarget_request(const FreshRetargetCase& c);
Result<FreshRetargetAnswer> fresh_retarget_from_json(const Json& reply);

/// {"rows", "gtp_size", "shard_rows", "cols"}: the request of load_orderings and gtp_all_padding_load.
Json all_padding_request(const AllPaddingCase& c);
Result<LoadOrderingsAnswer> load_orderings_from_json(const Json& reply);
Result<AllPaddingLoadAnswer> all_padding_load_from_json(const Json& reply);

Json single_expert_request(const SingleExpertCase& c);
Result<SingleExpertAnswer> single_expert_from_json(const Json& reply);

/// "[[0,1],null,...]": loaded rows as the protocol writes them (for failure texts).
std::string rows_text(const std::vector<std::optional<std::array<std::int64_t, 2>>>& rows);

}  // namespace ih::json
