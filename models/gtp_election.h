// Which rank writes a GTP parameter's checkpoint entry (spec addendum A): Megatron's rank grids
// (RankGenerator order strings, the GTP axis injected after tp for dense and after ep for expert
// weights) and the replica_id chain of make_tp_sharded_tensor_for_checkpoint / gtp_replica_rank.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/sharded_tensor.h"

namespace ih {

/// A rank grid as RankGenerator builds it: axes named tp, gtp_remat, cp, ep, dp, pp in `order`,
/// the first axis varying fastest. Sizes of axes missing from the order must be 1.
struct ParallelGrid {
  std::vector<std::string> order;   // e.g. {"tp", "gtp_remat", "cp", "ep", "dp", "pp"}
  std::vector<std::int64_t> sizes;  // one per axis of `order`

  /// Checks axis names, duplicates and sizes >= 1; the product must fit in 64 bits.
  static Result<ParallelGrid> make(const std::string& order, std::int64_t tp, std::int64_t gtp_remat, std::int64_t cp,
                                   std::int64_t ep, std::int64_t dp, std::int64_t pp = 1);
  /// The number of ranks (product of the sizes).
  std::int64_t world_size() const;
  /// The size of `axis` (1 when absent).
  std::int64_t size(const std::string& axis) const;
  /// `rank`'s coordinate on `axis` (0 when absent).
  std::int64_t coordinate(std::int64_t rank, const std::string& axis) const;
  /// `rank`'s index inside its group over `axes` (get_ranks("a-b")): the masked axes in grid order,
  /// the first fastest. Axes absent from the grid are ignored.
  std::int64_t group_rank(std::int64_t rank, const std::vector<std::string>& axes) const;
  /// "tp2-gtp_remat4-cp1-ep1-dp2-pp1".
  std::string to_string() const;
};

/// Megatron's default orders with the GTP axis injected (parallel_state._inject_gtp_remat_axis).
inline constexpr const char* kDenseGridOrder = "tp-gtp_remat-cp-ep-dp-pp";
inline constexpr const char* kExpertGridOrder = "tp-cp-ep-gtp_remat-dp-pp";

/// The dense and the expert grid of one world (same world size).
struct WorldGrids {
  ParallelGrid dense;   // ep = 1
  ParallelGrid expert;  // cp = 1; tp = expert TP, gtp_remat = expert GTP, dp = expert DP
};

/// Builds both grids with Megatron's default orders; the expert DP size is derived from the world
/// size (world / (etp * ep * egtp), which must divide).
Result<WorldGrids> default_world_grids(std::int64_t tp, std::int64_t gtp, std::int64_t cp, std::int64_t dp,
                                       std::int64_t etp, std::int64_t ep, std::int64_t egtp);

/// What decides the replica_id of one rank's GTP parameter entry.
struct GtpElection {
  bool expert = false;  // a routed-expert weight (allreduce = False): elected over expert DP
  std::int64_t global_rank = 0;
  /// The caller's process groups (pg_collection dp_cp / expt_dp, both GTP-excluded), stamped on
  /// the parameter at wrap time as gtp_replica_group; nullopt: nothing stamped.
  std::optional<WorldGrids> caller;
  /// parallel_state's globals; nullopt: parallel_state not initialized.
  std::optional<WorldGrids> globals;
  bool distributed = true;  // torch.distributed initialized
  /// replica_id handed to make_tp_sharded_tensor_for_checkpoint by the caller; wins over everything.
  std::optional<ReplicaId> explicit_replica_id;
  std::int64_t local_experts = 1;  // expert weights per EP rank (expert axis E = ep * local_experts)
  std::int64_t expert_local_index = 0;
};

/// The grid the parameter was built on (the caller's when stamped, else the globals), or an
/// invalid_layout_parameter error when neither exists in a distributed run.
Result<ParallelGrid> election_model_grid(const GtpElection& election);

/// gtp_replica_rank: the rank in the stamped group, else in the globals' GTP-excluded DP group
/// (DP x CP for dense, expert DP for expert weights), else 0 in a single-process run; a distributed
/// run with neither is gtp_replica_group_unknown (Megatron raises RuntimeError).
Result<std::int64_t> gtp_replica_rank(const GtpElection& election);

/// The replica_id the entry gets: the explicit one, else (0, 0, gtp_replica_rank).
Result<ReplicaId> gtp_entry_replica_id(const GtpElection& election);

}  // namespace ih
