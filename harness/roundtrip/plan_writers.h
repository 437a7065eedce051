// The pieces of write_world_scenario (world_plan.h): where each rank's entries come from and which rows each
// entry holds (ScenarioPlanner), the catalogue of saved keys, the save ranks' fills and expected writers, the
// load ranks' prefills and oracle, and the GDP in_proj's own plan. Internal to harness/roundtrip.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "harness/roundtrip/plan_segments.h"
#include "harness/roundtrip/world_plan.h"
#include "models/gpt_layer_maps.h"

namespace ih {

/// Which world of a round trip.
enum class Side { save, load };

/// The rows a factory's parameter holds, before any retarget: a real GTP in_proj's or SwiGLU fc1's from the
/// reference, any other factory's as it builds them.
struct FactoryRows {
  std::vector<Segment> segments;
  std::optional<Shape> gtp_param;  // the GTP shard's shape where the parameter is not the factory's data (in_proj)
  bool gtp_window = false;         // a SwiGLU fc1's window: the retarget moves it like the factory's own pieces
};

/// One scenario's plan in the making: each rank's entries (Megatron's real model as the target describes it, or
/// the reference's synthetic one) and the rows each of its entries holds.
class ScenarioPlanner {
 public:
  /// harness_error for a real scenario without `real_entries`; the pattern's error for a pattern without GPT
  /// layer maps; invalid_argument when the GPT layers do not split over the save world's PP.
  static Result<ScenarioPlanner> create(const WorldScenario& s, const RealModelEntries& real_entries);

  const WorldScenario& scenario() const { return *s_; }
  /// The reference's layer maps the hybrid side is retargeted with (none: hybrid -> hybrid).
  const std::optional<GptCompatLayerMaps>& maps() const { return maps_; }
  std::int64_t ranks(Side side) const { return (side == Side::save ? s_->save : s_->load).ranks(); }
  Result<std::vector<FlatEntry>> rank_entries(Side side, std::int64_t rank) const;
  /// What the workers of a real scenario build on this rank (its model request); null for the others.
  json::Json model_json(Side side, std::int64_t rank) const;
  /// A real GTP-padded linear's rows in the unpadded tensor (real_gtp_padded_rows); nullopt otherwise.
  Result<std::optional<std::vector<Segment>>> padded_rows(Side side, std::int64_t rank, const ShardedTensor& t) const;
  /// The segments of a tensor entry: the whole tensor, or a GTP-padded shard's real rows (none: all padding).
  Result<std::vector<Segment>> tensor_segments(Side side, std::int64_t rank, const ShardedTensor& t) const;
  Result<FactoryRows> factory_rows(Side side, std::int64_t rank, const ShardedTensorFactory& f) const;
  /// A real split factory's rows as the reference stores them (real_reference_split_rows); nullopt otherwise.
  Result<std::optional<std::vector<Segment>>> reference_split_rows(Side side, std::int64_t rank,
                                                                   const ShardedTensorFactory& f) const;
  /// The key whose values an entry holds: a distributed optimizer's `param` state is the parameter itself.
  std::string source_key(const std::string& key) const;

 private:
  const ModelDumpSpec& real_model(Side side) const { return side == Side::save ? s_->real_save : s_->real_load; }

  const WorldScenario* s_ = nullptr;
  RealModelEntries real_entries_;
  std::optional<GptCompatLayerMaps> maps_;
  ModelConfig config_;  // the synthetic models'
  OptimizerStates optimizer_;
};

/// The keys the save world writes: ids from 1 in key order, a distributed optimizer's `param` states as
/// aliases of their parameters.
struct SavedKeys {
  std::map<std::string, Shape> shapes;  // every saved key, aliases included
  std::map<std::string, std::int64_t> ids;
  json::Json keys = json::Json::array(), aliases = json::Json::array();
  std::int64_t max_numel = 0;
  /// The values the save world's objects carry (carries_value), by the object's unique key: JSON text.
  std::map<std::string, std::string> carried;
  /// The id of the key whose values `key` holds (harness_error for a key the save world does not write).
  Result<std::int64_t> id_of(const ScenarioPlanner& planner, const std::string& key) const;
  /// The key of a saved key id.
  const std::string& key_of(std::int64_t id) const;
};
Result<SavedKeys> saved_keys(const ScenarioPlanner& planner, const std::vector<std::vector<FlatEntry>>& save_entries);

/// Writes save_rank_<r>.json of every save rank; returns the catalogue's expected writers.
Result<json::Json> write_save_ranks(const ScenarioPlanner& planner, const SavedKeys& saved,
                                    const std::vector<std::vector<FlatEntry>>& save_entries,
                                    const std::filesystem::path& dir);

/// What the load ranks' plans share: the fresh keys (ids after the saved keys'), which saved elements some rank
/// reads, the largest key and the elements the load ranks hold.
struct LoadOracle {
  std::map<std::string, std::int64_t> fresh_ids;
  json::Json fresh_keys = json::Json::array();
  std::map<std::string, std::vector<char>> covered;  // saved key -> its elements some load rank reads
  std::int64_t max_numel = 0, expected_elements = 0;
};
/// Writes load_rank_<r>.json and oracle_rank_<r>.json of every load rank.
Status write_load_ranks(const ScenarioPlanner& planner, const SavedKeys& saved, LoadOracle& oracle,
                        const std::filesystem::path& dir);

/// The plan of kind gdp_gtp (gdp_gtp_plan.cc).
Result<WorldPlanStats> write_gdp_gtp_scenario(const WorldScenario& s, const std::filesystem::path& dir);

}  // namespace ih
