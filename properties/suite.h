// The property suite: every property by group, repro tokens, and the pinned-case corpus format.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "properties/cases.h"
#include "properties/generators.h"
#include "properties/property.h"
#include "seam/repro_token.h"

namespace ih::props {

/// Layer maps, error parity, pipeline segments, FSDP keys (props_pattern.cc).
std::vector<Property> pattern_properties();
/// GPT->Hybrid retargeting over all ranks of generated layouts (props_retarget.cc).
std::vector<Property> retarget_properties();
/// The GTP shard split: spec 4.7 invariants and bug classes 6.1-6.10 (props_gtp.cc).
std::vector<Property> gtp_properties();
/// Saves and loads: cross-layout GPT->Hybrid, cross-GTP, load orderings (props_load.cc).
std::vector<Property> load_properties();
/// The spec addendum: writer election, allow_shape_mismatch, DCP plan validation, Mamba gather (props_addendum.cc).
std::vector<Property> addendum_properties();
/// Real versus synthetic: a target's model dump against the reference's (props_model_dump.cc).
std::vector<Property> model_dump_properties();
/// All of them, in a fixed order.
const std::vector<Property>& all_properties();
/// The property called `name`, or nullptr.
const Property* find_property(const std::string& name);

/// "property/<name>": a property's stable check name in a repro token.
std::string property_check_name(const std::string& property);
/// The property a token's check names, or an error (not a property token, or a property that no
/// longer exists: a stale token is an error, never a pass).
Result<const Property*> property_of(const ReproToken& token);
/// The options a failing run adds to a token so that it replays exactly: seed, cases, size, rc.
void add_case_options(ReproToken& token, const RunParams& params, const PropertyRun& run);

/// A replay: the printed case and what the property concluded on it.
struct Replay {
  std::string printed_case;
  Outcome outcome = Outcome::passed;  // harness_error: the token no longer regenerates its case
  std::string verdict;                // what broke, or why there is no verdict
  std::string failure_kind;           // a failed verdict's typed_verdict kind ("": untyped)
  bool no_such_case = false;          // rc='s shrink path leads nowhere: a damaged or stale token
};

/// Checks, before any target starts, that a token names one case this property can replay: a known
/// spec= case, or an rc= string RapidCheck can take (check_reproduce). invalid_argument otherwise.
Status check_case(const Property& property, const ReproToken& token);

/// Replays the case a token names (rc=<RapidCheck reproduce string> or spec=<fixture>) against `impl`.
Replay replay(Implementation& impl, const Property& property, const ReproToken& token);

/// Runs one of the property's spec cases (worked examples of the spec, its `fixtures`) against
/// `impl`: passed, failed with the verdict, or the target's no-verdict outcome (an unsupported
/// operation, a timeout, a harness fault). harness_error for an unknown name.
Replay run_spec_case(Implementation& impl, const Property& property, const std::string& fixture);

}  // namespace ih::props
