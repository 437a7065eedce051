// What a check runs against: the reference, the reference with one planted C++ mutant, or a real
// Megatron (the installed package or a checkout) with one adapter-side mutant. One place turns the
// command line or a repro token into an Implementation, so `--mutant NAME` means the same in every
// command and a token replays against exactly the target it was printed for. It also starts what else
// a command needs of a Megatron (its mutant list, a describer of real models, the gate's real round trips).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/json_codec.h"
#include "harness/gate/real_roundtrip_runner.h"
#include "harness/megatron/candidates.h"
#include "seam/implementation.h"
#include "seam/repro_token.h"

namespace ih {

struct MegatronOptions;

/// What runs: the C++ reference (alone or with a planted C++ mutant) or a real Megatron.
enum class TargetKind { reference, megatron };
/// The command-line and token word of a target: "reference", "megatron" (the one name table).
std::string_view to_string(TargetKind kind);
/// The target a word names; anything else is invalid_argument naming the word and the known targets.
Result<TargetKind> parse_target_kind(std::string_view word);

struct TargetSpec {
  TargetKind target = TargetKind::reference;
  std::optional<std::string> mutant;              // a planted bug (C++ registry for reference, Python for megatron)
  std::optional<std::string> megatron_path;       // a Megatron-LM checkout (megatron only)
  Candidate candidate = Candidate::none;          // a candidate design applied to that Megatron (megatron only)
  std::optional<std::string> fix;                 // a declared optional fix of Megatron's code (megatron only)
  std::optional<std::string> base_megatron_path;  // the BASE Megatron-LM tree of a change (cross-version tokens)
};

/// The target options of a token (target, mutant, megatron-path, candidate, fix, base-megatron-path); a token
/// naming an unknown target is invalid_argument.
Result<TargetSpec> target_of(const ReproToken& token);
/// Writes the target options into a token (not the base tree: only a cross-version check runs across it).
void add_target_options(ReproToken& token, const TargetSpec& spec);
/// Writes the base tree (base-megatron-path, a path hint like megatron-path) into a cross-version check's token.
void add_base_tree(ReproToken& token, const TargetSpec& spec);
/// Whether a token replays a cross-version check (gate/real-roundtrip-cross/...), which needs both trees.
bool is_cross_version_token(const ReproToken& token);

/// Names the Megatron `target` runs in a token by version and revision (megatron-version,
/// megatron-revision): a token says what it was printed against, its path is only a hint.
void add_target_identity(ReproToken& token, const Implementation& target);
/// The target to replay `token` against. `megatron_path` (repro --megatron-path) overrides the
/// token's path hint; a hint that is no Megatron checkout here falls back to the installed package,
/// said in a NOTE on `notes`. --megatron-path with a reference token is invalid_argument. A cross-version token
/// needs both trees here: a missing or non-checkout megatron-path or base-megatron-path is invalid_argument naming
/// it (no fallback: the installed package is neither tree).
Result<TargetSpec> replay_target_of(const ReproToken& token, const std::optional<std::string>& megatron_path,
                                    std::ostream& notes);
/// A WARNING on `notes` when `target` is not the Megatron version and revision the token names
/// (the verdict of the replay may then differ from the one the token was printed with).
void warn_if_other_megatron(const ReproToken& token, const Implementation& target, std::ostream& notes);

/// Checks the spec before any work: a known C++ mutant, options that belong to its target, a
/// --megatron-path that holds megatron/core. Bad input is invalid_argument.
Result<TargetSpec> validated(TargetSpec spec);
/// The target a command line names (--target WORD, default reference, and its options), parsed and validated.
Result<TargetSpec> validated_target(const std::optional<std::string>& target, std::optional<std::string> mutant,
                                    std::optional<std::string> megatron_path, std::optional<std::string> candidate,
                                    std::optional<std::string> fix);
/// The adapter options of a megatron spec (checkout, mutant, candidate, fix).
MegatronOptions megatron_options(const TargetSpec& spec);
/// Starts the target (for megatron: the adapter subprocess and its handshake).
Result<std::unique_ptr<Implementation>> make_target(const TargetSpec& spec);
/// One line naming the target: for Megatron its path, version and git revision when known.
std::string describe_target(const Implementation& target, const TargetSpec& spec);

/// Which checks reach an adapter mutant: the seam's checks, or the real tier's round trips too (a mutant of model
/// or training code, which only Megatron's own models reach).
enum class MutantTier { checks, real };
/// Whose code an adapter mutant plants its mistake in: Megatron's, or the harness's candidate design.
enum class MutantOf { megatron, candidate };

/// One adapter-side mutant, its listing read once here (docs/adapter-protocol.md, `mutants`).
struct MegatronMutant {
  std::string name, description;
  json::Json bug_class;        // the spec's bug class (a number), or "-" when the adapter names none
  std::string not_applicable;  // why this Megatron lacks what the mutant patches (empty: applicable)
  MutantTier tier = MutantTier::checks;
  MutantOf of = MutantOf::megatron;
};
/// The adapter's "mutants" answer read into rows; a row the harness cannot read (no name, an unknown tier or
/// "of") is harness_error naming it.
Result<std::vector<MegatronMutant>> megatron_mutants_from_json(const json::Json& listing);
/// The adapter-side mutants of `spec`'s Megatron, as its adapter lists them.
Result<std::vector<MegatronMutant>> list_megatron_mutants(const TargetSpec& spec);

/// An adapter of `spec`'s Megatron (its checkout, candidate and fix) without the mutant, which describes real
/// models for a round trip's plan (its model_state_dict): a mutant is Megatron's code in a world, never in the
/// plan. `python`: the venv python (nullopt: the default); `reply_timeout`: what a loaded machine's model builds
/// need.
Result<std::unique_ptr<Implementation>> start_megatron_describer(TargetSpec spec,
                                                                 const std::optional<std::string>& python,
                                                                 std::chrono::milliseconds reply_timeout);

/// The real scenarios the gate runs (harness/roundtrip's table: `--real --all`, then the finding ones) and the
/// directions (save ranks, load ranks) it runs them in.
std::vector<std::string> gate_real_scenarios();
std::vector<std::pair<std::int64_t, std::int64_t>> gate_real_directions();
/// The real scenarios the gate also runs across two trees (gate --base-megatron-path): those of `--real --all`.
/// The finding ones are left out: they fail in either tree for Megatron's own reason, pinned to their same-tree
/// check.
std::vector<std::string> gate_cross_scenarios();

/// How the real round trips of one runner share worlds.
enum class RealRoundTripBatch {
  by_direction,  // the gate: the first scenario of a direction runs every gate scenario of it in one pair of worlds
  by_scenario,   // a replayed token: each scenario in worlds of its own
};
/// The gate checks a run selected by name (gate --checks-from); none: every check. A direction's batch then runs
/// only the scenarios of selected checks (a mutant reaching two scenarios runs two, not the whole tier).
using SelectedChecks = std::optional<std::set<std::string>>;
/// A runner of the gate's real round trips (harness/roundtrip's session) for `spec`'s Megatron, its lines on
/// `progress`. The plan's models are described by an unmutated adapter of the same Megatron with a long reply
/// limit (a mutant is Megatron's code in the worlds only).
gate::RealRoundTripRunner real_roundtrip_runner(const TargetSpec& spec, std::ostream& progress,
                                                RealRoundTripBatch batch = RealRoundTripBatch::by_direction,
                                                SelectedChecks selected = std::nullopt);
/// Which trees a cross-version runner saves and loads with: BASE (spec.base_megatron_path) then NEW
/// (spec.megatron_path), or NEW then BASE.
enum class CrossVersion { base_to_new, new_to_base };
/// A runner of the gate's cross-version real round trips (docs/roundtrip.md, "Cross-version round trips"): the
/// save world imports one tree, the load world the other, both describe every rank's model; no mutant (a mutant is
/// NEW's code, and either world may be BASE's). Needs both trees (harness_error from each run otherwise).
gate::RealRoundTripRunner cross_version_runner(const TargetSpec& spec, std::ostream& progress, CrossVersion cross,
                                               RealRoundTripBatch batch = RealRoundTripBatch::by_direction,
                                               SelectedChecks selected = std::nullopt);
/// The scenarios one direction's batch runs: the gate's (the cross-version ones with `cross`) whose checks
/// `selected` names, every one without a selection.
std::vector<std::string> direction_scenarios(std::int64_t save_ranks, std::int64_t load_ranks,
                                             std::optional<CrossVersion> cross, const SelectedChecks& selected);

}  // namespace ih
