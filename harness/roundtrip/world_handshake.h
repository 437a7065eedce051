// The describe/plan handshake of a real round trip (docs/roundtrip.md, "Model builds per real round trip"): the
// save and load worlds start together, and for each scenario in order every rank builds its real model once,
// describes it (<scenario dir>/described/<phase>_rank_<r>.json, the describer's own answer) and waits for a marker
// of this side: plan.ready (the plan is written), checkpoint.complete (the load side: every save rank saved it)
// or skip (it will not run). The C++ side plans beside the running worlds; no describing adapter builds the
// models a second time. The Python side is megatron_adapter/roundtrip/handshake.py.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "codec/json_codec.h"
#include "harness/roundtrip/world_launch.h"
#include "harness/roundtrip/world_run.h"

namespace ih {

/// The markers a scenario's folder gets, and the folder of its ranks' descriptions (one name each, shared with
/// handshake.py).
inline constexpr const char* kPlanReadyMarker = "plan.ready";
inline constexpr const char* kSkipMarker = "skip";
inline constexpr const char* kCheckpointCompleteMarker = "checkpoint.complete";
inline constexpr const char* kDescribedFolder = "described";

/// One rank's description file read as the adapter client reads the describer's reply: {"entries": [...]}, or
/// {"unsupported": why} (unsupported), {"megatron_error": why} (Megatron's sharded_state_dict raised: as the
/// adapter's megatron_error), {"harness_error": why}; anything else a harness error.
Result<std::vector<FlatEntry>> described_entries(const json::Json& described);

/// Where a scenario stands in the handshake.
enum class HandshakeStage {
  describing,  // waiting for every rank of both worlds to describe it
  planned,     // plan.ready written; the save world saves it
  complete,    // checkpoint.complete written; the load world loads it
  skipped,     // skip written (not run, failed at its description or plan, or a world will never reach it)
};

/// The scenarios that get `skip` now (indices into `stages`): once the save world ended, every one it did not save
/// completely (the load world would wait for its checkpoint forever); once the last load world ended, every one
/// still describing (the save world would wait for its plan forever; one already planned is saved and judged).
std::vector<std::size_t> scenarios_to_skip(const std::vector<HandshakeStage>& stages, bool save_ended, bool load_ended);

/// The handshake of one pair of worlds on `scenarios` (all real, all of the same world sizes), driven by the
/// caller's poll loop beside the running worlds. Plan-time outcomes (not run, failed or harness error at the
/// description or the plan) go to `report`.
class WorldHandshake {
 public:
  WorldHandshake(const std::vector<WorldScenario>& scenarios, const WorldRunOptions& o, WorldRunReport& report)
      : scenarios_(scenarios), o_(o), report_(report), stages_(scenarios.size(), HandshakeStage::describing) {}

  /// Empties each scenario's folder and writes plan.json with the models each side builds ("describe").
  Status start();
  /// One poll: plans every scenario both worlds described, and returns those the save world has newly saved on
  /// every rank (the caller applies the truncate fault, then calls complete); then skips what a world that ended
  /// will never reach.
  std::vector<std::string> poll(const std::vector<RankState>& save_ranks, bool save_ended, bool load_ended);
  /// checkpoint.complete for the load world.
  void complete(const std::string& name);
  /// The scenarios the worlds answer for, in order: those planned, and those the save world ended before
  /// describing (judged by what its ranks reported).
  std::vector<const WorldScenario*> planned() const;
  /// Those whose checkpoint is complete, in order.
  std::vector<std::string> loadable() const;

 private:
  void plan(std::size_t i);
  void mark(std::size_t i, HandshakeStage stage);
  bool described(std::size_t i) const;

  const std::vector<WorldScenario>& scenarios_;
  const WorldRunOptions& o_;
  WorldRunReport& report_;
  std::vector<HandshakeStage> stages_;
  std::vector<bool> answered_ = std::vector<bool>(scenarios_.size(), false);  // planned(): judged by the worlds
};

}  // namespace ih
