// The generated inputs of the property suite, as small value structs that print readably (the
// counterexample a failure shows, and what `repro` prints).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "models/gtp_layout.h"
#include "models/model_state_dict.h"
#include "models/result.h"
#include "models/synthetic_model.h"

namespace ih::props {

/// A GPT-pairable hybrid pattern built from known layers: `layers` is main' (no pipes).
struct PatternCase {
  std::string layers;   // e.g. "M*-*M-"
  std::string pattern;  // layers with pipes inserted (what is asked)
  std::int64_t pp = 1;  // segments = pp * vpp when pipes are present
};

/// A near-valid pattern: one mutation of a valid one, aimed at one error kind.
struct NearValidCase {
  std::string pattern;
  std::string mutation;  // what was changed, e.g. "mixed: one '-' became 'E'"
  ErrorKind expected;
};

/// A GTP in_proj layout and the parallel sizes it is saved under.
struct GtpCase {
  std::string mixer = "gdp";  // gdp (spec 4.2) or mamba (spec 4.10)
  GdpDims dims;               // for mamba: d_inner_local, group_state_local, nheads_local
  std::int64_t tp = 1, gtp = 1, pad_alignment = 0, cols = 1;
  std::string dtype = "bfloat16";
  GtpSaveDesign design = GtpSaveDesign::shard_split;
  std::size_t drop = 0;  // which main piece the integrity property removes (modulo the count)
};

/// A save at one GTP layout and a load at another (same TP and in_proj layout).
struct GtpCrossCase {
  GtpCase save;
  std::int64_t load_gtp = 1, load_pad_alignment = 0;
};

/// A model and a parallel layout over all of its ranks (sizes; ranks are enumerated).
struct ModelCase {
  std::string pattern;
  ModelConfig config;
  RankLayout layout;
};

/// GPT saved at layout A, the hybrid model loading it at layout B.
struct LoadCase {
  ModelCase hybrid;       // pattern, config, layout B
  RankLayout gpt_layout;  // layout A
};

/// A main pattern with pipes and the PP size its segments are spread over.
struct SegmentCase {
  std::vector<std::string> segments;
  std::int64_t pp = 1;
};

/// One FSDP key and checkpoint keys with a chosen number of distinct `module.` captures.
struct FsdpCase {
  std::string pattern;
  std::string key;  // hybrid explicit key, possibly module.-prefixed
  std::vector<std::string> checkpoint_keys;
  std::vector<std::string> captures;  // the distinct captures planted in checkpoint_keys
};

/// Storage keys of every kind the retarget rules tell apart (spec 2.4), under a valid pattern.
struct KeyRulesCase {
  std::string pattern;
  std::vector<std::string> keys;
};

/// A world of dense (TP x GTP x CP x DP) and expert (ETP x EP x EGTP x EDP) ranks and where the
/// GTP parameter's writer election finds its groups (spec addendum A).
struct ElectionCase {
  std::int64_t tp = 1, gtp = 1, cp = 1, dp = 1;  // dense grid; world = tp * gtp * cp * dp
  bool expert = false;                           // the parameter is a routed-expert weight
  std::int64_t etp = 1, ep = 1, egtp = 1;        // expert grid; expert DP = world / (etp * ep * egtp)
  /// caller: groups stamped, parallel_state not initialized; globals: nothing stamped, parallel_state
  /// initialized; caller_over_foreign_globals: stamped, and parallel_state initialized for the same
  /// world without GTP; none: neither (Megatron raises).
  std::string source = "caller";
  std::int64_t rows = 30, pad_alignment = 16, cols = 2;
};

/// One rank of a whole model's `model dump` configuration that both the reference and Megatron build.
struct ModelDumpCase {
  ModelDumpSpec spec;
  std::int64_t rank = 0;
};

std::ostream& operator<<(std::ostream& os, const ElectionCase& c);
std::ostream& operator<<(std::ostream& os, const PatternCase& c);
std::ostream& operator<<(std::ostream& os, const NearValidCase& c);
std::ostream& operator<<(std::ostream& os, const GtpCase& c);
std::ostream& operator<<(std::ostream& os, const GtpCrossCase& c);
std::ostream& operator<<(std::ostream& os, const ModelCase& c);
std::ostream& operator<<(std::ostream& os, const LoadCase& c);
std::ostream& operator<<(std::ostream& os, const SegmentCase& c);
std::ostream& operator<<(std::ostream& os, const FsdpCase& c);
/// The `model dump` command line of the case (docs/cli.md).
std::ostream& operator<<(std::ostream& os, const ModelDumpCase& c);
std::ostream& operator<<(std::ostream& os, const KeyRulesCase& c);

/// The in_proj split layout of a GtpCase.
Result<SplitLayout> layout_of(const GtpCase& c);

}  // namespace ih::props
