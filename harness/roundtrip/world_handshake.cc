#include "harness/roundtrip/world_handshake.h"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "harness/roundtrip/roundtrip_session.h"
#include "harness/roundtrip/world_verdicts.h"

namespace ih {
namespace {

namespace fs = std::filesystem;
using json::Json;

/// A side's description of one rank, or nullopt while the rank has not written it (it is written whole, by rename).
std::optional<Json> read_described(const fs::path& file) {
  std::ifstream in(file);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  if (!parsed.ok()) return Json{{"harness_error", file.string() + ": " + parsed.error().message}};
  return std::move(parsed).value();
}

fs::path described_file(const fs::path& dir, const char* phase, std::int64_t rank) {
  return dir / kDescribedFolder / (std::string(phase) + "_rank_" + std::to_string(rank) + ".json");
}

/// The scenario's models as its worlds described them: the save world's ranks for its save model, the load world's
/// for its load model (the describer's answers, from the ranks that build the models).
RealModelEntries described_models(const WorldScenario& s, const fs::path& dir) {
  return [&s, dir](const ModelDumpSpec& m, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    const Json asked = json::model_dump_spec_to_json(m, 0);
    const char* phase = asked == json::model_dump_spec_to_json(s.real_save, 0)   ? "save"
                        : asked == json::model_dump_spec_to_json(s.real_load, 0) ? "load"
                                                                                 : nullptr;
    if (!phase) return make_error(seam_kind::harness_error, "no world of scenario " + s.name + " built that model");
    auto described = read_described(described_file(dir, phase, rank));
    if (!described)
      return make_error(seam_kind::harness_error,
                        std::string(phase) + " rank " + std::to_string(rank) + " did not describe its model");
    return described_entries(*described);
  };
}

void write_marker(const fs::path& dir, const char* marker, const std::string& text) {
  std::ofstream(dir / marker) << text << "\n";
}

}  // namespace

Result<std::vector<FlatEntry>> described_entries(const Json& described) {
  if (described.is_object() && described.size() == 1) {
    const std::string field = described.begin().key();
    const Json& value = described.begin().value();
    if (field == "entries") {
      auto entries = json::entries_from_json(value);
      if (!entries.ok())
        return make_error(seam_kind::harness_error, "a rank's description: " + entries.error().message);
      return entries;
    }
    if (value.is_string()) {
      const std::string why = value.get<std::string>();
      if (field == "unsupported") return make_error(seam_kind::unsupported, why);
      if (field == "harness_error") return make_error(seam_kind::harness_error, why);
      if (field == "megatron_error") return json::error_from_json(Json{{"kind", field}, {"message", why}});
    }
  }
  return make_error(seam_kind::harness_error,
                    "a rank's description is none of {\"entries\"}, {\"unsupported\"}, {\"megatron_error\"}, "
                    "{\"harness_error\"}: " +
                        json::dump(described).substr(0, 300));
}

std::vector<std::size_t> scenarios_to_skip(const std::vector<HandshakeStage>& stages, bool save_ended,
                                           bool load_ended) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < stages.size(); ++i)
    if ((stages[i] == HandshakeStage::describing && (save_ended || load_ended)) ||
        (stages[i] == HandshakeStage::planned && save_ended))
      out.push_back(i);
  return out;
}

Status WorldHandshake::start() {
  std::vector<const WorldScenario*> all;
  for (const WorldScenario& s : scenarios_) {
    const fs::path dir = o_.work / scenario_dir(s.name);
    std::error_code ec;
    fs::remove_all(dir, ec);
    fs::create_directories(dir / kDescribedFolder, ec);
    if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());
    all.push_back(&s);
  }
  IH_TRY_ASSIGN(plan, world_plan_json(all, o_.device, true));
  return write_json_atomically(o_.work / "plan.json", plan);
}

bool WorldHandshake::described(std::size_t i) const {
  const WorldScenario& s = scenarios_[i];
  const fs::path dir = o_.work / scenario_dir(s.name);
  for (std::int64_t r = 0; r < s.save.ranks(); ++r)
    if (!fs::exists(described_file(dir, "save", r))) return false;
  for (std::int64_t r = 0; r < s.load.ranks(); ++r)
    if (!fs::exists(described_file(dir, "load", r))) return false;
  return true;
}

void WorldHandshake::mark(std::size_t i, HandshakeStage stage) {
  const fs::path dir = o_.work / scenario_dir(scenarios_[i].name);
  stages_[i] = stage;
  if (stage == HandshakeStage::planned) write_marker(dir, kPlanReadyMarker, "planned from the worlds' descriptions");
  if (stage == HandshakeStage::skipped) write_marker(dir, kSkipMarker, "not run in these worlds");
}

/// What buildable_real_scenarios and plan_world_scenario say of the scenario, from its ranks' descriptions: its
/// plan, or its outcome (not run, failed, harness error) and skip.
void WorldHandshake::plan(std::size_t i) {
  const WorldScenario& s = scenarios_[i];
  BuildableRealScenarios split = buildable_real_scenarios({s}, described_models(s, o_.work / scenario_dir(s.name)));
  report_unbuildable(split, o_, report_);
  std::optional<ScenarioOutcome> unplanned;
  if (!split.runnable.empty()) unplanned = plan_world_scenario(s, o_, split.describe);
  if (unplanned) report_.scenarios.push_back(std::move(*unplanned));
  answered_[i] = !split.runnable.empty() && !unplanned;
  mark(i, answered_[i] ? HandshakeStage::planned : HandshakeStage::skipped);
}

std::vector<std::string> WorldHandshake::poll(const std::vector<RankState>& save_ranks, bool save_ended,
                                              bool load_ended) {
  std::vector<std::string> saved;
  for (std::size_t i = 0; i < scenarios_.size(); ++i) {
    if (stages_[i] == HandshakeStage::describing && described(i)) plan(i);
    if (stages_[i] != HandshakeStage::planned) continue;
    const std::string& name = scenarios_[i].name;
    if (std::all_of(save_ranks.begin(), save_ranks.end(), [&](const RankState& st) {
          const auto* r = scenario_result(st, name);
          return r && r->value("ok", false);
        }))
      saved.push_back(name);
  }
  for (const std::size_t i : scenarios_to_skip(stages_, save_ended && saved.empty(), load_ended)) {
    if (stages_[i] == HandshakeStage::describing) {
      if (save_ended) {
        answered_[i] = true;  // judged by what the save world's ranks reported
      } else {
        ScenarioOutcome r = outcome_before_running(scenarios_[i]);
        r.device = o_.device;
        // No rank said why (a Megatron failure describing is in its described file): the harness's own fault,
        // the load world's exit and stderr in the run's faults.
        r.outcome = Outcome::harness_error;
        r.problems.push_back("not planned: the load world ended before every rank described this scenario");
        o_.progress("HARNESS ERROR " + r.name + ": " + r.problems[0]);
        report_.scenarios.push_back(std::move(r));
      }
    }
    mark(i, HandshakeStage::skipped);
  }
  return saved;
}

void WorldHandshake::complete(const std::string& name) {
  for (std::size_t i = 0; i < scenarios_.size(); ++i)
    if (scenarios_[i].name == name) {
      stages_[i] = HandshakeStage::complete;
      write_marker(o_.work / scenario_dir(name), kCheckpointCompleteMarker,
                   "saved by all " + std::to_string(scenarios_[i].save.ranks()) + " ranks");
    }
}

std::vector<const WorldScenario*> WorldHandshake::planned() const {
  std::vector<const WorldScenario*> out;
  for (std::size_t i = 0; i < scenarios_.size(); ++i)
    if (answered_[i]) out.push_back(&scenarios_[i]);
  return out;
}

std::vector<std::string> WorldHandshake::loadable() const {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < scenarios_.size(); ++i)
    if (stages_[i] == HandshakeStage::complete) out.push_back(scenarios_[i].name);
  return out;
}

}  // namespace ih
