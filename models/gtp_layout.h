// GTP sharding of a TP-local weight's rows with tail padding (spec 4.4), and the two ways a GDP
// in_proj GTP shard is saved: the baseline gather (spec 4.5) and the PR's shard split (spec 4.7).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/gdp_layout.h"
#include "models/gtp_election.h"
#include "models/state_tree.h"

namespace ih {

/// Padding arithmetic of spec 4.4 for D rows over G ranks with pad_for_alignment p.
struct GtpPadding {
  std::int64_t rows = 0;           // D, the real TP-local rows
  std::int64_t gtp_size = 1;       // G
  std::int64_t pad_alignment = 0;  // p (0 disables padding)
  std::int64_t align_block = 0;    // A = p * G (0 when p = 0)
  std::int64_t pad = 0;            // (A - D mod A) mod A
  std::int64_t padded_rows = 0;    // D' = D + pad
  std::int64_t shard_rows = 0;     // R = D' / G

  /// r_g = max(0, min(R, D - g*R)): real rows on GTP rank g (the rest of its shard is padding).
  std::int64_t real_rows(std::int64_t gtp_rank) const;
  /// True when rank g holds only padding (g*R >= D).
  bool all_padding(std::int64_t gtp_rank) const { return real_rows(gtp_rank) == 0; }
  /// Number of all-padding ranks, floor(pad / R).
  std::int64_t all_padding_ranks() const;
};

/// Validates D, G >= 1 and p >= 0; with p = 0, G > D is gtp_group_too_large and D mod G != 0 is
/// gtp_indivisible (Megatron asserts). With p > 0 any G is fine: extra ranks are all padding.
Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment);
/// The padding a GTP-wrapped weight really gets: gtp_padding, except that a one-rank GTP group is
/// never wrapped, so G = 1 pads nothing whatever p is (Megatron's wrap_module_params_gtp; finding G1
/// in docs/megatron-findings.md).
Result<GtpPadding> gtp_weight_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment);

/// One piece of the shard split (spec 4.7 build table), as plain numbers.
struct GtpPiece {
  std::size_t section = 0;             // index into the layout
  std::int64_t shard_row = 0;          // a - g*R: first row inside the (R, C) shard
  std::int64_t rows = 0;               // b - a
  std::int64_t global_rows = 0;        // T * s_j, as in the non-GTP chunk
  std::int64_t global_row_offset = 0;  // t * s_j + (a - c_j)
  bool operator==(const GtpPiece&) const = default;
};

/// The non-empty overlaps of shard g's real rows with each section, in section order; none on an
/// all-padding rank. Pure arithmetic: the builder, the report and the benchmark share it.
Result<std::vector<GtpPiece>> gtp_piece_plan(const SplitLayout& layout, const GtpPadding& padding, std::int64_t tp_size,
                                             std::int64_t tp_rank, std::int64_t gtp_rank);

/// Which GTP save path builds the in_proj factory.
enum class GtpSaveDesign {
  gather,       // spec 4.5: all-gather to (D, C), then the ordinary split factory (baseline)
  shard_split,  // spec 4.7: pieces are views of the (R, C) shard (the PR)
};

/// Parses "gather" / "shard-split" (also "shard_split").
Result<GtpSaveDesign> parse_gtp_design(const std::string& text);
/// "gather" or "shard-split".
std::string to_string(GtpSaveDesign design);

/// Which mixer owns the in_proj. Mamba keeps the gather design whatever design GDP uses
/// (mamba_mixer.py gathers under GTP; the PR changes only the GDP mixer; spec 4.10).
enum class GtpMixer { gdp, mamba };

/// Everything one (t, g) rank knows when it builds its in_proj factory.
struct GtpFactoryParams {
  std::string key;     // e.g. decoder.layers.3.mixer.in_proj.weight
  SplitLayout layout;  // the TP-local sections (spec 4.2)
  std::int64_t tp_size = 1, tp_rank = 0;
  std::int64_t gtp_size = 1, gtp_rank = 0;
  std::int64_t pad_alignment = 0;  // p
  std::int64_t cols = 1;           // C
  std::string dtype = "bfloat16";
  /// Shard split: the GTP shard's id (0, 0, rank in the GTP-excluded DP group). Gather: the id of
  /// the re-described gathered tensor (0, 0, rank in the GTP-inclusive dp_cp group).
  ReplicaId replica_id = ReplicaId::tuple({0, 0, 0});
  std::optional<TensorValue> shard;  // this rank's (R, C) parameter shard; nullopt = metadata only
  std::uint64_t gather_storage = 0;  // gather design: storage id of the all-gather buffer (0: derived)
  GtpMixer mixer = GtpMixer::gdp;    // mamba: the gather design is built whatever design is asked
  /// The world behind the parameter entry's writer election (spec addendum A). When set,
  /// gtp_param_entry takes t, g (and the expert axis) from the grid and elects the replica_id
  /// itself instead of using `replica_id`.
  std::optional<GtpElection> election;
};

/// The padding of `params` (D from the layout), with parameter checks naming the field.
Result<GtpPadding> gtp_padding_of(const GtpFactoryParams& params);

/// The GTP parameter's own checkpoint entry (spec 4.4): local (R, C), composite axis-0 triple
/// (0, t*G + g, T*G), allow_shape_mismatch when pad > 0.
Result<ShardedTensor> gtp_composite_tensor(const GtpFactoryParams& params);

/// The in_proj factory of one (t, g) rank for `design`. The shard split factory's merge uses only
/// values captured here (R, C, r) and the loaded inputs, never the factory's data.
Result<ShardedTensorFactory> make_gtp_factory(GtpSaveDesign design, const GtpFactoryParams& params);

}  // namespace ih
