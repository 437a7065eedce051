#include "harness/roundtrip/world_plan.h"

#include <algorithm>
#include <regex>

#include "harness/roundtrip/plan_writers.h"

namespace ih {
namespace {

using json::Json;

/// The saved elements no load rank reads (must be none).
std::int64_t uncovered(const LoadOracle& oracle) {
  std::int64_t n = 0;
  for (const auto& [key, bits] : oracle.covered) n += std::count(bits.begin(), bits.end(), 0);
  return n;
}

/// Whether `path` is an optimizer param group's `field` ("optimizer.param_groups.<i>.<field>", any prefix).
bool is_param_group_field(const std::string& path, const std::string& field) {
  static const std::regex group_field(R"((.*\.)?optimizer\.param_groups\.[0-9]+\.(\w+))");
  std::smatch m;
  return std::regex_match(path, m, group_field) && m[2] == field;
}

/// Plain values the save world writes (the loaded common state must equal them): an older Megatron's
/// checkpoint lacks the param group fields it did not have yet.
Json saved_plain(const WorldScenario& s, const std::vector<FlatEntry>& save_rank_0) {
  const auto lacking = [&](const std::string& path) {
    if (!s.saved_by_older_megatron) return false;
    const auto& fields = older_megatron_checkpoint().param_group_fields;
    return std::any_of(fields.begin(), fields.end(), [&](const auto& f) { return is_param_group_field(path, f); });
  };
  Json out = Json::object();
  for (const FlatEntry& e : save_rank_0)
    if (const auto* p = std::get_if<PlainValue>(&e.entry); p && !lacking(e.path)) out[e.path] = p->repr;
  return out;
}

/// The plan's "saved_by_older_megatron": null, or what the save leaves out ({"args": [...], "param_group_fields"}).
Json older_megatron_json(const WorldScenario& s) {
  if (!s.saved_by_older_megatron) return nullptr;
  return Json{{"args", older_megatron_checkpoint().args},
              {"param_group_fields", older_megatron_checkpoint().param_group_fields}};
}

Result<std::vector<std::vector<FlatEntry>>> save_world_entries(const ScenarioPlanner& planner) {
  std::vector<std::vector<FlatEntry>> out;
  for (std::int64_t r = 0; r < planner.ranks(Side::save); ++r) {
    IH_TRY_ASSIGN(entries, planner.rank_entries(Side::save, r));
    out.push_back(std::move(entries));
  }
  return out;
}

}  // namespace

std::string scenario_dir(const std::string& name) { return "s_" + name; }

Result<Json> world_plan_json(const std::vector<const WorldScenario*>& scenarios, Device device, bool describe) {
  Json list = Json::array();
  for (const WorldScenario* s : scenarios) {
    IH_TRY_ASSIGN(load_order, plan_word(s->load_order));
    list.push_back(Json{{"name", s->name},
                        {"kind", to_string(s->kind)},
                        {"dir", scenario_dir(s->name)},
                        {"pattern", s->pattern},
                        {"load_order", load_order},
                        {"load_path", to_string(s->load_path)},
                        {"saved_by_older_megatron", older_megatron_json(*s)},
                        {"save", s->layout_text(true)},
                        {"load", s->layout_text(false)}});
    if (describe && s->is_real())
      list.back()["describe"] = Json{{"save", json::model_dump_spec_to_json(s->real_save, 0)},
                                     {"load", json::model_dump_spec_to_json(s->real_load, 0)}};
  }
  return Json{{"device", to_string(device)}, {"scenarios", list}};
}

Result<WorldPlanStats> write_world_scenario(const WorldScenario& s, const std::filesystem::path& dir,
                                            const RealModelEntries& real_entries) {
  if (s.kind == ScenarioKind::gdp_gtp) return write_gdp_gtp_scenario(s, dir);
  IH_TRY_ASSIGN(planner, ScenarioPlanner::create(s, real_entries));
  IH_TRY_STATUS(create_plan_dir(dir));
  IH_TRY_ASSIGN(save_entries, save_world_entries(planner));
  IH_TRY_ASSIGN(saved, saved_keys(planner, save_entries));
  WorldPlanStats stats;
  stats.gpt_keys = static_cast<std::int64_t>(saved.shapes.size());
  for (const auto& [key, shape] : saved.shapes) stats.saved_elements += numel(shape);
  IH_TRY_ASSIGN(writers, write_save_ranks(planner, saved, save_entries, dir));
  stats.expected_writers = static_cast<std::int64_t>(writers.size());

  LoadOracle oracle;
  oracle.max_numel = saved.max_numel;
  for (const auto& [key, id] : saved.ids)
    oracle.covered[key].assign(static_cast<std::size_t>(numel(saved.shapes.at(key))), 0);
  IH_TRY_STATUS(write_load_ranks(planner, saved, oracle, dir));
  stats.expected_elements = oracle.expected_elements;
  stats.uncovered_elements = uncovered(oracle);

  IH_TRY_ASSIGN(encoding,
                oracle_encoding(s.distributed_optimizer() ? OracleDtype::float32 : OracleDtype::float64,
                                oracle.max_numel, stats.gpt_keys + static_cast<std::int64_t>(oracle.fresh_ids.size())));
  IH_TRY_STATUS(
      write_catalogue(dir, {encoding, saved.keys, oracle.fresh_keys, saved.aliases, writers,
                            saved_plain(s, save_entries[0]), stats.uncovered_elements, s.save_spreads_writes()}));
  return stats;
}

}  // namespace ih
