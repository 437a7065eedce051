// Megatron's load strictness (dist_checkpointing/validation.py StrictHandling, spec 3.7 and addendum
// C): which requested keys are "unexpected" (not in the checkpoint; per rank), which checkpoint keys
// are "missing" (requested by no rank; global), and what each mode does with them.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "models/checkpoint_model.h"

namespace ih {

enum class StrictHandling {
  assume_ok_unexpected,  // default: no check; the strategy fails on an unexpected key itself
  log_unexpected,
  log_all,
  raise_unexpected,
  raise_all,
  return_unexpected,
  return_all,
  ignore_all,
};

/// The Python value ("assume_ok_unexpected", ...); unknown text is invalid_argument ("Invalid strict flag").
Result<StrictHandling> parse_strict_handling(const std::string& text);
std::string to_string(StrictHandling mode);

/// What validate_integrity_and_strict_load hands back to load().
struct StrictOutcome {
  StateNode request;                  // the sharded request without the unexpected keys' entries
  std::set<std::string> missing;      // only for *_all modes (needs every rank's requested keys)
  std::set<std::string> unexpected;   // this rank's
  std::vector<std::string> warnings;  // log_* modes: what Megatron logs
  bool returned = false;              // return_* modes: load() returns the key sets with the state dict
};

/// The storage keys a checkpoint holds: tensor keys and ShardedObject keys (without the shard suffix).
std::set<std::string> checkpoint_keys(const Checkpoint& checkpoint);

/// Applies `mode` to one rank's sharded request (ShardedBase leaves, factories already built).
/// `all_requested` is every rank's requested keys (the global metadata); *_all modes need it.
/// raise_* with a mismatch is strict_load_keys naming both sets. Every mode except
/// assume_ok_unexpected removes the unexpected keys' entries from the request.
Result<StrictOutcome> apply_strict_handling(const Checkpoint& checkpoint, const StateNode& sharded_request,
                                            StrictHandling mode,
                                            const std::optional<std::set<std::string>>& all_requested = std::nullopt);

}  // namespace ih
