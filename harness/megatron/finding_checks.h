// Gate checks that state spec invariants Megatron is known to break (docs/megatron-findings.md):
// resuming optimizer state across a GTP change (R1, R2, with TP-1 controls that hold), a fresh
// in_proj under GTP in GPT->Hybrid retargeting (B), the two load orderings with all-padding GTP
// ranks (C), and a GPT->Hybrid load with one expert (A). Each check states what the spec wants,
// not what a model of Megatron predicts; against Megatron it runs Megatron's own code in gloo
// worlds (adapter ops gtp_roundtrip, gtp_fresh_retarget, load_orderings, single_expert_load),
// against the reference (and its mutants) the same case through the seam. A failure that matches a
// pinned finding (corpus/findings/*.finding) is reported as KNOWN FINDING by the gate.
#pragma once

#include <vector>

#include "harness/gate/gate.h"

namespace ih::megatron {

/// The checks, group "spec invariants"; names are stable: optimizer_resume_gtp_to_no_gtp (R1),
/// optimizer_resume_tp2_gtp_change (R2), optimizer_resume_tp1_gtp_change (holds),
/// fresh_in_proj_fits_parameter (B), load_orders_agree_all_padding (C), single_expert_objects_load (A).
std::vector<gate::Check> finding_checks();

}  // namespace ih::megatron
