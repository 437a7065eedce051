#include "harness/roundtrip/roundtrip_session.h"

#include <stdlib.h>

#include <map>

#include "codec/json_codec.h"
#include "harness/process/child_run.h"
#include "harness/process/run_scope.h"
#include "harness/roundtrip/description_diff.h"
#include "harness/roundtrip/world_verdicts.h"

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih {
namespace {

namespace fs = std::filesystem;

/// The session's scenarios by the Megatron they need: the synthetic ones any megatron-core runs; the GDP/GTP and
/// the real ones need a Megatron with GDP + GTP (and Megatron's HybridModel and its GPT interop).
struct Groups {
  std::vector<WorldScenario> gpt, gtp, real;
};

Groups grouped(std::vector<WorldScenario> scenarios) {
  Groups g;
  for (WorldScenario& s : scenarios)
    (s.is_real() ? g.real : s.kind == ScenarioKind::gdp_gtp ? g.gtp : g.gpt).push_back(std::move(s));
  return g;
}

/// The Megatron-LM snapshot extracted under the source tree's build/megatron-snapshot/ (a checkout with GDP), after
/// extracting it once if need be (bash ci/megatron-snapshot.sh); nullopt when there is none.
std::optional<std::string> megatron_snapshot(const WorldRunOptions& o) {
  const fs::path root = fs::path(IH_SOURCE_DIR_PATH) / "build" / "megatron-snapshot";
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::error_code ec;
    if (fs::is_directory(root, ec))
      for (const auto& d : fs::directory_iterator(root, ec))
        if (fs::exists(d.path() / "megatron" / "core" / "ssm" / "gated_delta_product.py")) return d.path().string();
    if (attempt == 1) break;
    o.progress("extracting the Megatron-LM snapshot (bash ci/megatron-snapshot.sh) for the GTP scenarios");
    (void)run_child({"bash", std::string(IH_SOURCE_DIR_PATH) + "/ci/megatron-snapshot.sh"}, std::chrono::seconds(600),
                    [](const std::string&) {});
  }
  return std::nullopt;
}

/// The Megatron of the GDP/GTP and real scenarios: the given one, or the snapshot where the session looks for it
/// (nullopt when there is none: those scenarios are then not run, said in `report`).
std::optional<std::string> checkout_for(Groups& g, const RoundTripSessionOptions& options, WorldRunReport& report) {
  const WorldRunOptions& o = options.worlds;
  if (o.megatron_path || !options.find_snapshot || (g.gtp.empty() && g.real.empty())) return o.megatron_path;
  if (auto snapshot = megatron_snapshot(o)) return snapshot;
  for (const auto* group : {&g.gtp, &g.real})
    for (const auto& s : *group) {
      report.not_run.emplace_back(s.name, "no Megatron-LM checkout with GDP + GTP (ci/megatron-snapshot.sh)");
      o.progress("NOT RUN " + s.name + ": " + report.not_run.back().second);
    }
  g.gtp.clear(), g.real.clear();
  return std::nullopt;
}

std::string checkout_text(const std::optional<std::string>& checkout) {
  return checkout ? "the Megatron-LM checkout " + *checkout : "the installed megatron-core";
}

/// The real scenarios' describer, started once for the session: the checkout's adapter describes each rank's
/// model (its `model dump`) in persistent gloo worlds. Splits the real scenarios by what it can describe.
Result<RealModelEntries> describe_real_scenarios(Groups& g, const std::optional<std::string>& checkout,
                                                 const RoundTripSessionOptions& options,
                                                 std::shared_ptr<Implementation>& describer, WorldRunReport& report) {
  const WorldRunOptions& o = options.worlds;
  if (!options.start_describer) return make_error(seam_kind::harness_error, "no describer of the real models");
  o.progress("starting the Megatron adapter on " + (checkout ? *checkout : checkout_text(checkout)) +
             " to describe the real models' ranks");
  auto started = options.start_describer(checkout);
  if (!started.ok())
    return make_error(seam_kind::harness_error,
                      "the Megatron adapter that describes the real models did not start: " + started.error().message);
  describer = std::move(*started);
  BuildableRealScenarios split = buildable_real_scenarios(
      std::move(g.real),
      [d = describer.get()](const ModelDumpSpec& spec, std::int64_t rank) { return d->model_state_dict(spec, rank); });
  report_unbuildable(split, o, report);
  g.real = std::move(split.runnable);
  return split.describe;
}

/// Where the load tree describes a real scenario's models otherwise than the save tree: the scenario's problem.
using LayoutDifferences = std::map<std::string, std::string>;

/// A cross-version session's load tree, asked for the same ranks' models as the save tree: a scenario it cannot
/// describe, or describes with another structure, ends before it runs (failed: the two trees' models differ); one
/// it describes with another layout runs, its difference kept for its report.
Result<LayoutDifferences> compare_load_tree(Groups& g, const RealModelEntries& save_tree,
                                            const RoundTripSessionOptions& options, WorldRunReport& report) {
  const WorldRunOptions& o = options.worlds;
  o.progress("starting the Megatron adapter on " + *options.load_megatron_path +
             " (the load tree) to describe the same ranks' models");
  auto started = options.start_describer(options.load_megatron_path);
  if (!started.ok())
    return make_error(seam_kind::harness_error,
                      "the load tree's Megatron adapter did not start: " + started.error().message);
  const std::shared_ptr<Implementation> describer = std::move(*started);
  BuildableRealScenarios split = buildable_real_scenarios(
      std::move(g.real),
      [d = describer.get()](const ModelDumpSpec& spec, std::int64_t rank) { return d->model_state_dict(spec, rank); });
  report_unbuildable(split, o, report, "the load tree: ");
  LayoutDifferences differences;
  for (WorldScenario& s : split.runnable) {
    std::optional<DescriptionDifference> diff;
    for (const bool save_side : {true, false}) {
      const ModelDumpSpec& m = save_side ? s.real_save : s.real_load;
      for (std::int64_t r = 0; r < (save_side ? s.save.ranks() : s.load.ranks()) && !(diff && diff->structural); ++r) {
        auto a = save_tree(m, r), b = split.describe(m, r);
        if (!a.ok() || !b.ok()) continue;  // both described it above
        if (auto d = description_difference(*a, *b); d && (!diff || d->structural))
          diff = DescriptionDifference{d->structural, std::string(save_side ? "save" : "load") + " rank " +
                                                          std::to_string(r) + "'s model: " + d->text};
      }
    }
    const std::string line = diff ? "the save tree and the load tree describe " + diff->text : "";
    if (diff && diff->structural) {
      ScenarioOutcome r = outcome_before_running(s);
      r.device = o.device, r.outcome = Outcome::failed, r.problems.push_back(line);
      o.progress("FAIL " + s.name + ": " + line);
      report.scenarios.push_back(std::move(r));
      continue;
    }
    if (diff) differences[s.name] = line;
    g.real.push_back(std::move(s));
  }
  return differences;
}

/// A layout difference fails its scenario, whatever its elements said: after the first wrong element (a gate check's
/// detail is its scenario's first problem), or first.
void report_layout_differences(const LayoutDifferences& differences, WorldRunReport& report) {
  for (ScenarioOutcome& s : report.scenarios) {
    const auto it = differences.find(s.name);
    if (it == differences.end()) continue;
    s.problems.insert(s.problems.begin() + (s.problems.empty() ? 0 : 1), it->second);
    if (s.outcome == Outcome::passed) s.outcome = Outcome::failed;
  }
}

/// Whether the real scenarios are planned in their own worlds (world_handshake.h) rather than from a describer: not
/// in a cross-version session (both trees describe the same models, which its worlds never build on both), nor with
/// a mutant (the worlds plant it before any build, and a mutant must not shape its own plan).
bool plans_in_worlds(const RoundTripSessionOptions& options) {
  return !options.load_megatron_path && !options.worlds.mutant;
}

/// Runs each group in its own pair of worlds, on its own Megatron, in its own folder under the work folder; the real
/// scenarios from `describe`, or planned in their worlds where it is unset.
Status run_groups(Groups& g, const std::optional<std::string>& checkout,
                  const std::optional<std::string>& load_checkout, const RealModelEntries& describe,
                  const WorldRunOptions& worlds, WorldRunReport& report) {
  for (auto* group : {&g.gpt, &g.gtp, &g.real}) {
    if (group->empty()) continue;
    WorldRunOptions o = worlds;
    if (group == &g.gtp) {
      o.megatron_path = checkout, o.work = worlds.work / "gtp";
      worlds.progress("GTP scenarios on " + checkout_text(checkout));
    } else if (group == &g.real) {
      o.megatron_path = checkout, o.work = worlds.work / "real", o.real_entries = describe;
      o.load_megatron_path = load_checkout, o.plan_in_worlds = !describe;
      worlds.progress("real-model scenarios on " + checkout_text(checkout));
    } else {
      o.work = worlds.work / "gpt";
    }
    IH_TRY_ASSIGN(part, run_world_roundtrips(*group, o));
    report.merge(std::move(part));
  }
  return Ok{};
}

}  // namespace

Result<WorldRunReport> run_roundtrip_session(std::vector<WorldScenario> scenarios,
                                             const RoundTripSessionOptions& options) {
  WorldRunReport report;
  Groups g = grouped(std::move(scenarios));
  const std::optional<std::string> checkout = checkout_for(g, options, report);
  std::shared_ptr<Implementation> describer;  // alive until the real scenarios' plans are written
  RealModelEntries describe;
  const bool any_real = !g.real.empty();
  LayoutDifferences differences;
  if (any_real && !plans_in_worlds(options)) {
    IH_TRY_ASSIGN(described, describe_real_scenarios(g, checkout, options, describer, report));
    describe = std::move(described);
    if (options.load_megatron_path && !g.real.empty()) {
      IH_TRY_ASSIGN(found, compare_load_tree(g, describe, options, report));
      differences = std::move(found);
    }
  }
  if (g.gpt.empty() && g.gtp.empty() && g.real.empty() && report.scenarios.empty()) {
    if (any_real) return report;  // this Megatron builds none of the real scenarios: every one not run
    return make_error(seam_kind::harness_error, "nothing could run");
  }
  IH_TRY_STATUS(run_groups(g, checkout, options.load_megatron_path, describe, options.worlds, report));
  report_layout_differences(differences, report);
  return report;
}

BuildableRealScenarios buildable_real_scenarios(std::vector<WorldScenario> scenarios,
                                                const RealModelEntries& describe) {
  auto answers = std::make_shared<std::map<std::string, Result<std::vector<FlatEntry>>>>();
  BuildableRealScenarios out;
  out.describe = [describe, answers](const ModelDumpSpec& m, std::int64_t rank) -> Result<std::vector<FlatEntry>> {
    const std::string key = json::dump(json::model_dump_spec_to_json(m, rank));
    auto it = answers->find(key);
    if (it == answers->end()) it = answers->emplace(key, describe(m, rank)).first;
    return it->second;
  };
  for (WorldScenario& s : scenarios) {
    std::optional<Error> failure;  // the first rank the target could not describe
    for (const bool save_side : {true, false}) {
      const ModelDumpSpec& m = save_side ? s.real_save : s.real_load;
      const std::int64_t ranks = save_side ? s.save.ranks() : s.load.ranks();
      for (std::int64_t r = 0; r < ranks && !failure; ++r)
        if (auto probe = out.describe(m, r); !probe.ok())
          failure = probe.error().with_context(std::string(save_side ? "save" : "load") + " rank " + std::to_string(r) +
                                               "'s real model");
    }
    if (!failure) {
      out.runnable.push_back(std::move(s));
    } else if (failure->kind == seam_kind::unsupported) {
      out.not_run.emplace_back(s.name, failure->message);
    } else {
      ScenarioOutcome r = outcome_before_running(s);
      r.outcome = outcome_of_error(failure->kind);
      r.problems.push_back("describing the models failed: " + std::string(to_string(failure->kind)) + ": " +
                           failure->message);
      out.undescribed.push_back(std::move(r));
    }
  }
  return out;
}

void report_unbuildable(BuildableRealScenarios& split, const WorldRunOptions& o, WorldRunReport& report,
                        const std::string& prefix) {
  for (auto& [name, why] : split.not_run) {
    o.progress("NOT RUN " + name + ": " + prefix + why);
    report.not_run.emplace_back(std::move(name), prefix + why);
  }
  for (ScenarioOutcome& u : split.undescribed) {
    u.device = o.device;
    report.scenarios.push_back(std::move(u));
  }
}

}  // namespace ih
