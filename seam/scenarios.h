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

#include "models/gdp_layout.h"
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

/// Which GTP weight carries the optimizer state: the GDP mixer's in_proj (its model entries are the
/// mixer's split pieces) or a plain GTP ColumnParallelLinear (its entry is the parameter's own).
enum class ResumeModule { gdp_in_proj, linear };

inline const char* to_string(ResumeModule m) { return m == ResumeModule::gdp_in_proj ? "gdp_in_proj" : "linear"; }

/// The weight (rows: `in_proj`'s sections at TP 1; the linear has their sum) and its optimizer's
/// exp_avg saved in a `save` world, loaded in a `load` world.
struct OptimizerResumeCase {
  SplitLayout in_proj;
  std::int64_t cols = 2;
  GtpSide save, load;
  ResumeModule module = ResumeModule::gdp_in_proj;
};

/// What one loaded row holds: the saved row its values came from, zeros, or values no saved row held.
struct LoadedRow {
  std::optional<TpRow> saved;  // the save world's TP rank and its TP-local row; nullopt: zeros or `stray`
  std::string stray;           // values that no saved row held, in the target's words ("" when none)
  bool operator==(const LoadedRow&) const = default;
};

/// One tensor of one load rank, row by row.
struct LoadedRows {
  std::string tensor;  // "weight" or "exp_avg"
  std::vector<LoadedRow> rows;
};

/// What one rank of the load world loaded. Its row j is TP-local row first_row + j of TP rank tp_rank.
struct ResumedRank {
  std::int64_t tp_rank = 0, gtp_rank = 0;
  std::int64_t first_row = 0;       // g * R on a GTP shard of R rows; 0 on a weight GTP does not shard
  std::vector<LoadedRows> tensors;  // Megatron's weight and exp_avg; the reference models the exp_avg only
};

/// Facts only: which keys each side used, a refusal, and what each load rank loaded. The check
/// (harness/gate/gate_invariants.cc) judges the rows against where the spec puts them.
struct OptimizerResumeAnswer {
  std::string key;                                      // the exp_avg entries the load asked for (compact_keys)
  std::vector<std::string> saved_keys, requested_keys;  // exp_avg keys, sorted
  std::optional<Refusal> refused;                       // a step refused (then no rank's rows are given)
  std::vector<ResumedRank> ranks;
  std::string unexplained;  // what did not hold that the rows cannot say (a loaded tensor of another shape)
};

/// Sorted keys on one line: "p.{z,V0,...}" when they share the stem p, else joined by ", ".
inline std::string compact_keys(const std::vector<std::string>& keys) {
  const auto stem = [](const std::string& k) { return k.substr(0, k.rfind('.')); };
  bool shared = keys.size() > 1;
  for (const std::string& k : keys) shared = shared && stem(k) == stem(keys.front());
  std::string out;
  for (const std::string& k : keys)
    out += (out.empty() ? "" : shared ? "," : ", ") + (shared ? k.substr(stem(k).size() + 1) : k);
  return shared ? stem(keys.front()) + ".{" + out + "}" : out;
}

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
  std::string malformed;          // what is wrong with the loaded tensor beyond its rows (its shape, its columns)
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
