// The invariants of the spec, each written once and run three ways: by the RapidCheck properties
// (props_*.cc, on generated cases), by the libFuzzer targets (fuzz/, on arbitrary bytes) and by
// the pinned replays of both (corpus/). No RapidCheck here: fuzz/ links this without it.
//
// Every function returns what broke, readable, or an empty string when the invariant holds. The
// precondition each states (a parseable pattern, keys a model can produce) is the caller's to
// establish; outside it the function may report a break that is not a bug.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "seam/implementation.h"
#include "seam/repro_token.h"

namespace ih::invariants {

/// What broke; empty when the invariant holds.
using Broken = std::string;

// ---- patterns (spec 1.6, 2.2, 2.9) ------------------------------------------------------------

/// "L=2 attention {1:0 4:1 } mlp {...} fresh [0 3]" or "kind: message".
std::string describe(const Result<GptCompatLayerMaps>& maps);
/// The maps spec 2.2 derives from the layer characters (pipes removed): the i-th '*' and the i-th
/// MLP pair with GPT layer i, 'M' is fresh. Precondition: `layers` is a valid GPT-compatible main.
GptCompatLayerMaps expected_maps(std::string_view layers);
/// `got` (an implementation's layer_maps(pattern)) equals expected_maps(layers), where layers is
/// pattern's main without pipes. The caller passes the maps in, so one call serves both checks below.
Broken maps_match_layers(const Result<GptCompatLayerMaps>& got, std::string_view pattern, std::string_view layers);
/// The maps (`got`, as above; or the error kind) do not change when the pipes are removed or a
/// trailing '/' or '//' is added. Precondition: pattern has no MTP part (no '/').
Broken maps_invariant_under_separators(Implementation& impl, const Result<GptCompatLayerMaps>& got,
                                       std::string_view pattern, std::string_view layers);
/// With S segments and P dividing S, stage (rank r, virtual stage vp) builds segment vp*P + r at
/// the summed offset (spec 1.6).
Broken segments_follow_vp_major_order(Implementation& impl, const std::vector<std::string>& segments, std::int64_t pp);

// ---- retargeting (spec 2.4-2.7, 2.9) ---------------------------------------------------------

/// True when `key` is a key a model can produce: one pass of the key rewrite (remove the first
/// layer index, or else rename the first `decoder.final_norm.`) leaves no layer index and no
/// `decoder.final_norm.` behind. On other keys (two layer indices, a final norm beside a layer key,
/// two final norms) Megatron's retarget is not idempotent either: a second pass rewrites them again
/// (checked against megatron-core; docs/guides/adding-a-fuzz-target.md, "Triage").
bool is_model_key(std::string_view key);
/// True when every sharded entry's key is a model key.
bool only_model_keys(const std::vector<FlatEntry>& entries);
/// Retargeting keeps every path, in order, and never renames one.
Broken retarget_keeps_paths(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after);
/// No model-keyed sharded entry keeps a hybrid layer index; fresh ('M') layers and
/// output_layer._extra_state become local (spec 2.9, 6.20, 6.22).
Broken retarget_no_index_fresh_local(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& after,
                                     const GptCompatLayerMaps& maps);
/// A second pass (`twice`, run on `once`, itself run on `before`) changes no entry whose key in
/// `before` is a model key, and no entry count (spec 2.9).
Broken retarget_idempotent(const std::vector<FlatEntry>& before, const std::vector<FlatEntry>& once,
                           const std::vector<FlatEntry>& twice);
/// FSDP explicit keys (spec 2.7): without checkpoint keys the key is kept (or dropped, fresh), and
/// with them it takes the `module.` capture exactly when one distinct capture exists.
/// `captures` are the distinct captures planted in `checkpoint_keys`.
Broken fsdp_prefix_recovery(Implementation& impl, std::string_view pattern, std::string_view key,
                            const std::vector<std::string>& checkpoint_keys, const std::vector<std::string>& captures);

// ---- GTP piece plans (spec 4.4, 4.7) -----------------------------------------------------------

/// For every (t, g) of a layout: the plan's pieces are the shard's real rows in order, none empty,
/// each as long as the non-GTP chunk, together tiling every chunk [0, T*s_j) exactly once; and the
/// number of all-padding ranks is floor(pad / R). Precondition: valid layout and padding.
Broken gtp_piece_plans_tile(const SplitLayout& layout, const GtpPadding& padding, std::int64_t tp, std::int64_t gtp);

// ---- repro tokens (seam/repro_token.h) ------------------------------------------------------

/// Any text is a typed error or a token whose printed form parses back to the same token and
/// prints the same (one case, one token).
Broken repro_token_round_trip(std::string_view text);

}  // namespace ih::invariants
