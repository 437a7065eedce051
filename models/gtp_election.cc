#include "models/gtp_election.h"

#include <algorithm>

#include "models/checked_math.h"
#include "models/gdp_layout.h"
#include "models/text.h"

namespace ih {
namespace {

const std::vector<std::string> kAxes = {"tp", "gtp_remat", "cp", "ep", "dp", "pp"};

Error bad_grid(const std::string& why) { return make_error(ErrorKind::invalid_layout_parameter, "rank grid: " + why); }

}  // namespace

Result<ParallelGrid> ParallelGrid::make(const std::string& order, std::int64_t tp, std::int64_t gtp_remat,
                                        std::int64_t cp, std::int64_t ep, std::int64_t dp, std::int64_t pp) {
  const std::vector<std::int64_t> by_axis = {tp, gtp_remat, cp, ep, dp, pp};
  ParallelGrid out;
  for (const std::string& axis : split(order, '-')) {
    const auto it = std::find(kAxes.begin(), kAxes.end(), axis);
    if (it == kAxes.end()) return bad_grid("unknown axis '" + axis + "' in order '" + order + "'");
    if (std::find(out.order.begin(), out.order.end(), axis) != out.order.end())
      return bad_grid("axis '" + axis + "' twice in order '" + order + "'");
    out.order.push_back(axis);
    out.sizes.push_back(by_axis[static_cast<std::size_t>(it - kAxes.begin())]);
  }
  std::int64_t world = 1;
  for (std::size_t i = 0; i < kAxes.size(); ++i) {
    if (by_axis[i] < 1) return bad_grid(kAxes[i] + " size must be >= 1, got " + std::to_string(by_axis[i]));
    const bool listed = std::find(out.order.begin(), out.order.end(), kAxes[i]) != out.order.end();
    if (!listed && by_axis[i] != 1)
      return bad_grid(kAxes[i] + " size is " + std::to_string(by_axis[i]) + " but order '" + order + "' lacks it");
    IH_TRY_ASSIGN(next, checked_mul(world, by_axis[i], "world size"));
    world = next;
  }
  return out;
}

std::int64_t ParallelGrid::world_size() const {
  std::int64_t w = 1;
  for (std::int64_t s : sizes) w *= s;  // checked in make()
  return w;
}

std::int64_t ParallelGrid::size(const std::string& axis) const {
  for (std::size_t i = 0; i < order.size(); ++i)
    if (order[i] == axis) return sizes[i];
  return 1;
}

std::int64_t ParallelGrid::coordinate(std::int64_t rank, const std::string& axis) const {
  std::int64_t stride = 1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (order[i] == axis) return (rank / stride) % sizes[i];
    stride *= sizes[i];
  }
  return 0;
}

std::int64_t ParallelGrid::group_rank(std::int64_t rank, const std::vector<std::string>& axes) const {
  std::int64_t index = 0, stride = 1;
  for (std::size_t i = 0; i < order.size(); ++i) {
    if (std::find(axes.begin(), axes.end(), order[i]) == axes.end()) continue;
    index += coordinate(rank, order[i]) * stride;
    stride *= sizes[i];
  }
  return index;
}

std::string ParallelGrid::to_string() const {
  std::string out;
  for (std::size_t i = 0; i < order.size(); ++i) out += (i ? "-" : "") + order[i] + std::to_string(sizes[i]);
  return out;
}

Result<WorldGrids> default_world_grids(std::int64_t tp, std::int64_t gtp, std::int64_t cp, std::int64_t dp,
                                       std::int64_t etp, std::int64_t ep, std::int64_t egtp) {
  IH_TRY_ASSIGN(dense, ParallelGrid::make(kDenseGridOrder, tp, gtp, cp, 1, dp));
  IH_TRY_STATUS(require_positive(etp, "expert tp size"));
  IH_TRY_STATUS(require_positive(ep, "ep size"));
  IH_TRY_STATUS(require_positive(egtp, "expert gtp size"));
  IH_TRY_ASSIGN(model, checked_mul(etp, ep, "etp * ep"));
  IH_TRY_ASSIGN(expert_model, checked_mul(model, egtp, "etp * ep * egtp"));
  const std::int64_t world = dense.world_size();
  if (world % expert_model != 0)
    return bad_grid("world size " + std::to_string(world) +
                    " is not divisible by etp*ep*egtp = " + std::to_string(expert_model));
  IH_TRY_ASSIGN(expert, ParallelGrid::make(kExpertGridOrder, etp, egtp, 1, ep, world / expert_model));
  return WorldGrids{std::move(dense), std::move(expert)};
}

Result<ParallelGrid> election_model_grid(const GtpElection& e) {
  const std::optional<WorldGrids>& grids = e.caller ? e.caller : e.globals;
  if (!grids) {
    if (e.distributed)
      return make_error(ErrorKind::gtp_replica_group_unknown,
                        "rank " + std::to_string(e.global_rank) +
                            ": no process groups stamped on the GTP parameter and parallel_state is not initialized");
    return ParallelGrid::make(kDenseGridOrder, 1, 1, 1, 1, 1);  // a single-process run
  }
  const ParallelGrid& grid = e.expert ? grids->expert : grids->dense;
  if (e.global_rank < 0 || e.global_rank >= grid.world_size())
    return bad_grid("global rank " + std::to_string(e.global_rank) + " outside a world of " +
                    std::to_string(grid.world_size()));
  return grid;
}

Result<std::int64_t> gtp_replica_rank(const GtpElection& e) {
  // Dense weights are replicated over DP x CP, routed experts over expert DP; both without GTP.
  const std::vector<std::string> replicas =
      e.expert ? std::vector<std::string>{"dp"} : std::vector<std::string>{"dp", "cp"};
  if (e.caller) {
    IH_TRY_ASSIGN(grid, election_model_grid(e));
    return grid.group_rank(e.global_rank, replicas);
  }
  if (e.globals) {
    const ParallelGrid& grid = e.expert ? e.globals->expert : e.globals->dense;
    if (e.global_rank < 0 || e.global_rank >= grid.world_size())
      return bad_grid("global rank " + std::to_string(e.global_rank) + " outside the globals' world");
    return grid.group_rank(e.global_rank, replicas);
  }
  if (!e.distributed) return std::int64_t{0};
  return make_error(ErrorKind::gtp_replica_group_unknown,
                    "rank " + std::to_string(e.global_rank) +
                        ": GTP writer election needs the GTP-excluded DP group, but nothing is stamped on the "
                        "parameter and parallel_state is not initialized");
}

Result<ReplicaId> gtp_entry_replica_id(const GtpElection& e) {
  // Megatron elects before it looks at the caller's replica_id, so a missing group fails even then.
  IH_TRY_ASSIGN(rank, gtp_replica_rank(e));
  if (e.explicit_replica_id) return *e.explicit_replica_id;
  return ReplicaId::tuple({0, 0, rank});
}

}  // namespace ih
