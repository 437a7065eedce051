// Helpers for the load properties: one GTP rank's state tree with neighbours (a replicated
// tensor, a local object, a common value), every rank of a layout, and the GPT->Hybrid load property.
#pragma once

#include <vector>

#include "models/synthetic_model.h"
#include "properties/property.h"

namespace ih::props {

/// {"mixer": {"in_proj.weight": factory, ["A_log": ST]}, ["local": LNP, "iteration": 7]}; the
/// neighbours (bracketed) make the orderings of spec 3.8 differ. Only rank 0 writes A_log.
StateNode gtp_rank_tree(const ShardedTensorFactory& in_proj, std::int64_t rank, bool with_neighbours);

/// Every rank of `c.gpt_layout` saves its GPT state dict (with Adam states) of `layers` layers.
Result<Checkpoint> save_gpt(const LoadCase& c, std::int64_t layers);

/// GPT saved at layout A, hybrid loading at layout B (props_hybrid_load.cc).
Property gpt_to_hybrid_load_property();

}  // namespace ih::props
