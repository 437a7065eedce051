// Where a real model's GTP-wrapped entries hold other rows than Megatron's description says (spec 4.10, finding
// S): the plan takes those rows from the reference instead. Each answer is nullopt where Megatron's own entry is
// the layout (GTP 1, or an entry GTP did not wrap or pad).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "harness/roundtrip/plan_segments.h"
#include "models/model_state_dict.h"

namespace ih {

/// A real model's GTP-wrapped in_proj (spec 4.10): Megatron's sharded state dict holds a factory over
/// the all-gathered (D, C) buffer, not the parameter, so the workers fill and dump the parameter itself,
/// the (R, C) shard of that buffer zero-padded to p x G rows. The reference gives the shard's rows (its
/// gather factory of the same layout, checked against the factory Megatron describes); nullopt for any
/// other factory.
Result<std::optional<GatheredShard>> real_gtp_in_proj(const ModelDumpSpec& m, std::int64_t rank,
                                                      const ShardedTensorFactory& f);

/// A real model's GTP-wrapped linear whose rows Megatron padded (allow_shape_mismatch): its entry is the
/// padded (R, ...) shard at the composite offset of the padded global tensor, so the plan takes the
/// shard's rows from the reference instead (the GTP window of the same key unwrapped). nullopt for an entry
/// GTP did not wrap (its rows' fragmentation is the unwrapped one's) or did not pad.
Result<std::optional<std::vector<Segment>>> real_gtp_padded_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                 const ShardedTensor& t);

/// A real model's GTP-wrapped SwiGLU fc1 (weight or bias). Its parameter is the GTP shard of the TP-local
/// [W; V], and Megatron's factory splits whatever parameter it is given, so its description of which rows are
/// W and which V is not the oracle (finding S): the plan takes the shard's rows from the reference's factory of
/// the same key unwrapped. nullopt where GTP did not wrap the factory (its rows are the TP-local ones).
Result<std::optional<std::vector<Segment>>> real_gtp_factory_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                  const ShardedTensorFactory& f);

/// A real model's split factory (a Mamba or GDP in_proj or conv1d, `_split_tensor_factory`, spec 4.3) laid out
/// as the reference lays it out: the reference's factory of the same key and layer (GTP unwrapped: the split
/// factories are over the TP-local rows) and its segments over the same local rows, which say under which chunk
/// key and rows the reference stores each row. nullopt for any other factory, or where the reference has none of
/// that key and layer (the description check names that).
Result<std::optional<std::vector<Segment>>> real_reference_split_rows(const ModelDumpSpec& m, std::int64_t rank,
                                                                      const ShardedTensorFactory& f);

}  // namespace ih
