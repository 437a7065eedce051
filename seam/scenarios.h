// Typed arguments and answers of the seam's scenario operations: whole save/load scenarios that the
// gate's "spec invariants" and "gtp-gather" checks ask (harness/gate/gate_invariants.cc). Each answer
// states facts (what was refused, which rows came back, which objects were asked for); the check judges
// them against the spec. The reference answers from its model (seam/reference_scenarios.cc), Megatron
// by running its own code in gloo worlds (harness/megatron, docs/adapter-protocol.md). Header-only and
// free of the seam's interface, so the codec can decode Megatron's replies into these types.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/gtp_layout.h"
#include "models/result.h"

namespace ih {

/// A refusal by the target: the step that refused, its kind where the target types it (the reference
/// does; Megatron answers an exception's type and text), and its text.
struct Refusal {
  std::string step;               // e.g. "the load", "the save-side parameter entry", "the GPT save"
  std::optional<ErrorKind> kind;  // nullopt: the target gave no typed kind
  std::string message;
};

/// One side of a GTP save or load world.
struct GtpSide {
  std::int64_t tp = 1, gtp = 1, pad = 0;  // TP size, GTP size, pad_for_alignment
};

// --- optimizer_resume (findings R1, R2) ---------------------------------------------------------

/// The GDP in_proj (sections at TP 1) and its exp_avg saved in a `save` world, loaded in a `load` world.
struct OptimizerResumeCase {
  SplitLayout in_proj;
  std::int64_t cols = 2;
  GtpSide save, load;
};

/// Loaded rows of one tensor that are not the saved ones.
struct RowMismatches {
  std::string tensor;  // "weight" or "exp_avg"
  std::int64_t count = 0;
  std::string first;  // the first few, in the target's words
};

struct OptimizerResumeAnswer {
  std::string key;                 // the exp_avg entry the load asked for
  std::optional<Refusal> refused;  // a step refused (then nothing else was compared)
  std::vector<RowMismatches> mismatches;
  std::string pad_rows_in_checkpoint;  // model pad rows the checkpoint holds ("" when none)
  std::string unexplained;             // the target says the round trip did not hold without saying how
};

// --- fresh_retarget (finding B) -------------------------------------------------------------------

/// A fresh GDP or Mamba layer's in_proj under GTP, retargeted to a GPT checkpoint. The reference
/// builds the synthetic hybrid model's mixer of that kind (its own sizes); Megatron the mixer with
/// `in_proj`'s TP-local sections.
struct FreshRetargetCase {
  std::string mixer;  // "gdp" or "mamba"
  SplitLayout in_proj;
  std::string pattern = "M*-";
  std::int64_t cols = 2, tp = 1, gtp = 2, pad = 16;
};

/// One rank's fresh in_proj after retargeting, and what a load hands back for its parameter.
struct FreshRetargetRank {
  std::string rank;        // "(t=0, g=1)" or "g=1 <path>"
  std::string entry_type;  // what the in_proj became ("LocalNonpersistentObject" when a local object)
  std::optional<Shape> loaded_shape, param_shape;
  std::string copy_error;  // copying the handed-back value into the parameter failed ("" when it did not)
};

struct FreshRetargetAnswer {
  std::vector<FreshRetargetRank> ranks;
};

inline constexpr const char* kLocalObjectType = "LocalNonpersistentObject";

// --- load_orderings and all_padding_load (finding C, gtp-gather all_padding_load) ----------------

/// D real in_proj rows in GTP ranks of `shard_rows` rows each: ranks past the real rows hold padding only.
struct AllPaddingCase {
  std::int64_t rows = 6, gtp = 4, shard_rows = 16, cols = 2;
};

/// What one rank's load along one ordering handed back.
struct OrderedLoad {
  std::optional<Refusal> refused;
  /// The loaded in_proj rows: (saved GTP rank, saved row), nullopt for a zero row.
  std::vector<std::optional<std::array<std::int64_t, 2>>> rows;
  std::vector<std::string> keys;  // the loaded tree's top-level keys, sorted
};

struct OrderingsRank {
  OrderedLoad serialization_load, to_state_dict;
};

struct LoadOrderingsAnswer {
  std::vector<OrderingsRank> ranks;
};

struct AllPaddingLoadAnswer {
  std::vector<OrderedLoad> ranks;  // serialization.load, one per GTP rank
};

// --- single_expert_load (finding A) -------------------------------------------------------------

/// A GPT save of the expert _extra_state objects with `experts` experts, the hybrid request for
/// `pattern` retargeted, then loaded.
struct SingleExpertCase {
  std::string pattern = "*E*E";
  std::int64_t experts = 1;
};

/// One expert object of the hybrid request. Each target says what it can: the reference which stored
/// object the request asks for and whether the save wrote it; Megatron what a real load handed back.
struct ExpertObject {
  std::string key;    // the hybrid request's key or path
  std::string asked;  // the checkpoint object it asks for ("" when the target does not say)
  bool written = true;
  std::optional<std::array<std::int64_t, 2>> loaded;  // (GPT layer, expert) of the loaded object
};

struct SingleExpertAnswer {
  std::optional<Refusal> refused;  // the GPT save or the GPT->Hybrid load
  std::vector<ExpertObject> objects;
  bool loads_objects = false;  // true: `loaded` says what came back (a real load); false: `written` says it
};

}  // namespace ih
