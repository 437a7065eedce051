// The gate's base mode: the tree a change is judged against (--base-megatron-path, a temporary git worktree of
// --base-ref kept for the whole gate, or the same target without --mutant), its verdicts (run in this process, or
// read back from the cache keyed by the base tree's content hash), handed to gate_command, which prints the change
// first.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "harness/gate/gate.h"
#include "harness/targets/targets.h"

namespace ih::cli {

/// The gate's flags of its base mode.
struct BaseFlags {
  std::optional<std::string> base_ref;    // --base-ref REF (NEW's checkout must be a git checkout)
  std::optional<std::string> base_cache;  // --base-cache DIR (default ~/.cache/interop-harness/gate-base)
  bool no_base_cache = false;             // --no-base-cache
  bool base_without_mutant = false;       // --base-without-mutant: the change is the planted mutant (or none)
};

/// What the base gate concluded.
struct BaseVerdicts {
  std::string target;  // describe_target() of the base
  int exit_code = 0;   // its own exit code
  std::vector<gate::CheckResult> results;
  std::string tree_hash;  // the cache key (empty: a reference base, never cached)
  bool from_cache = false;
};

/// Runs the gate's checks against one target (the caller's run, the same one NEW gets): its description, exit
/// code and results.
using GateSideRunner = std::function<Result<BaseVerdicts>(const TargetSpec&, std::ostream& progress)>;

/// The base a command line names.
struct BasePlan {
  TargetSpec spec;  // NEW's without its mutant (a planted bug is the change); megatron_path: the base tree (--base-ref:
                    // none until check_out_base made its worktree)
  std::optional<std::string> commit;  // --base-ref: the commit of NEW's git checkout to check out
  std::string repository;             // --base-ref: the top of NEW's git checkout
  std::string inside;                 // --base-ref: NEW's folder relative to that top ("" or "." at the top)
};

/// The base of `spec` (its base_megatron_path) or the flags name, validated before any check runs: nullopt without base
/// flags; bad usage (a base flag on the wrong target, two bases, --base-ref where NEW is no git checkout, a ref that is
/// no commit there, a --base-megatron-path without megatron/core) is invalid_argument.
Result<std::optional<BasePlan>> base_plan_of(const TargetSpec& spec, const BaseFlags& flags);

/// A temporary git worktree of a commit, inside the run folder (so SIGINT and SIGTERM remove it with that folder;
/// the next --base-ref run prunes the entry it left in the repository), removed with its entry when destroyed.
class BaseWorktree {
 public:
  static Result<std::unique_ptr<BaseWorktree>> add(const std::string& repository, const std::string& commit);
  ~BaseWorktree();
  BaseWorktree(const BaseWorktree&) = delete;
  BaseWorktree& operator=(const BaseWorktree&) = delete;
  std::string path() const;

 private:
  BaseWorktree(std::string repository, std::string folder);
  std::string repository_, folder_;
};

/// A --base-ref plan's tree: a worktree of its commit, `plan.spec.megatron_path` set to NEW's place in it. The
/// caller holds it until the whole gate ended (NEW's cross-version round trips and its changed lines read the base
/// tree). nullptr for any other plan. A commit without megatron/core/__init__.py at NEW's place is invalid_argument.
Result<std::unique_ptr<BaseWorktree>> check_out_base(BasePlan& plan, std::ostream& progress);

/// The base's verdicts: read from the cache when its key (the base tree, the harness and its `corpus`,
/// `cache_options`) is there, else `run` against the base and stored. A --base-ref plan must have been checked out
/// (check_out_base). `cache_options`: the gate options that change the checks or their verdicts.
Result<BaseVerdicts> base_verdicts(const BasePlan& plan, const BaseFlags& flags, const std::string& corpus,
                                   const std::string& cache_options, const GateSideRunner& run, std::ostream& progress);

}  // namespace ih::cli
