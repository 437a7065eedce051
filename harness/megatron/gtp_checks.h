// Gate checks of the GTP save path that Megatron's main branch has today (the gather design,
// spec 4.5), for any target: every (t, g) rank's in_proj pieces, their merge and the GTP
// parameter's own entry, compared with the reference on fixed layouts (TP x GTP, padding 0/16/32,
// all-padding ranks). Against Megatron these run the real GDP mixer code in gloo worlds
// (harness/megatron/adapter/gtp_world.py). The property suite generates the PR's shard-split
// design; these checks are what judges the gather design.
#pragma once

#include <vector>

#include "harness/gate/gate.h"

namespace ih::megatron {

/// The checks, group "gtp-gather"; names are stable (gather_pieces, gather_merge, gather_param_entry,
/// all_padding_load: Megatron's serialization.load with all-padding ranks, Megatron targets only).
std::vector<gate::Check> gtp_gather_checks();

}  // namespace ih::megatron
