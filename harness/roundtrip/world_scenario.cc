#include "harness/roundtrip/world_scenario.h"

namespace ih {
namespace {

constexpr std::pair<ScenarioKind, std::string_view> kScenarioKindNames[] = {
    {ScenarioKind::gpt_hybrid, "gpt_hybrid"},
    {ScenarioKind::gdp_gtp, "gdp_gtp"},
    {ScenarioKind::real_gpt_hybrid, "real_gpt_hybrid"},
    {ScenarioKind::real_hybrid_hybrid, "real_hybrid_hybrid"}};

constexpr std::pair<LoadPath, std::string_view> kLoadPathNames[] = {
    {LoadPath::dist_checkpointing, "dist_checkpointing"},
    {LoadPath::training, "training"},
    {LoadPath::fully_parallel, "fully_parallel"}};

constexpr std::pair<GtpMixer, std::string_view> kMixerWords[] = {{GtpMixer::gdp, "gdp"}, {GtpMixer::mamba, "mamba"}};

/// The word of `value` in a name table of (value, word) rows.
template <class E, class Table>
std::string_view word_of(const Table& table, E value) {
  for (const auto& [v, word] : table)
    if (v == value) return word;
  return "?";
}

}  // namespace

std::string_view to_string(ScenarioKind kind) { return word_of(kScenarioKindNames, kind); }
std::string_view to_string(LoadPath path) { return word_of(kLoadPathNames, path); }
std::string_view to_string(Device device) { return word_of(kDeviceNames, device); }
std::string_view mixer_word(GtpMixer mixer) { return word_of(kMixerWords, mixer); }

Result<std::string_view> plan_word(LoadOrder order) {
  switch (order) {
    case LoadOrder::serialization_load: return std::string_view("serialization_load");
    case LoadOrder::to_state_dict_baseline: return std::string_view("to_state_dict");
    case LoadOrder::to_state_dict_fixed: break;
  }
  return make_error(ErrorKind::invalid_argument, "load order " + to_string(order) +
                                                     " is a reference-model ordering; a Megatron load world runs "
                                                     "serialization_load or Megatron's own to_state_dict");
}

const OlderMegatronCheckpoint& older_megatron_checkpoint() {
  static const OlderMegatronCheckpoint lacks{{"gdp_num_householder"}, {"default_config"}};
  return lacks;
}

bool WorldScenario::param_groups_after_load_checkpoint() const {
  return load_path == LoadPath::training && real_load.optimizer && real_load.config.num_experts == 0;
}

bool WorldScenario::saves_fully_parallel() const {
  return load_path == LoadPath::training || load_path == LoadPath::fully_parallel;
}

bool WorldScenario::save_spreads_writes() const {
  return is_real() && saves_fully_parallel() && data_parallel_size(real_save.sizes) * real_save.sizes.cp > 1;
}

bool WorldScenario::distributed_optimizer() const {
  return is_real() && real_save.optimizer && real_save.optimizer_kind == OptimizerKind::distributed;
}

std::string WorldLayout::text() const {
  std::string s = "TP=" + std::to_string(tp) + " PP=" + std::to_string(pp);
  if (gtp > 1) s += " GTP=" + std::to_string(gtp);
  if (cp > 1) s += " CP=" + std::to_string(cp);
  if (ep > 1) s += " EP=" + std::to_string(ep);
  if (dp > 1) s += " DP=" + std::to_string(dp);
  return s + " (" + std::to_string(ranks()) + (ranks() == 1 ? " rank)" : " ranks)");
}

std::string WorldScenario::layout_text(bool save_side) const {
  if (kind != ScenarioKind::gdp_gtp) return (save_side ? save : load).text();
  const GtpWorld& w = save_side ? gtp_save : gtp_load;
  const std::int64_t n = w.ranks();
  return "TP=" + std::to_string(w.tp) + " GTP=" + std::to_string(w.gtp) + " p=" + std::to_string(w.pad_alignment) +
         (w.design == GtpSaveDesign::shard_split ? " shard-split" : "") + " (" + std::to_string(n) +
         (n == 1 ? " rank)" : " ranks)");
}

RankLayout WorldLayout::rank_layout(std::int64_t r) const {
  RankLayout l;
  l.tp = tp, l.tp_rank = r % tp;
  l.ep = ep, l.ep_rank = (r / tp) % ep;
  l.pp = pp, l.pp_rank = (r / (tp * ep)) % pp;
  l.dp_rank = r / (tp * ep * pp);
  l.etp = tp, l.etp_rank = l.tp_rank;  // Megatron's default: expert TP = TP
  return l;
}

}  // namespace ih
