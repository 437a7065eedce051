#include "harness/roundtrip/scenario_table.h"

#include <algorithm>
#include <iterator>

#include "seam/error_kinds.h"

namespace ih {
namespace {

using K = ScenarioKind;
using P = LoadPath;
namespace b = builders;
constexpr P kDist = P::dist_checkpointing;

// The scenario table. Rows of one list keep the list's order: `--all` runs them, the gate checks them and
// `--list` prints them in this order.
constexpr ScenarioRow kScenarios[] = {
    // GPT -> hybrid on the reference's synthetic state dicts.
    {"gpt_hybrid_tp", K::gpt_hybrid, kDist, InAll::yes, "", b::gpt_hybrid_tp,
     "GPT -> hybrid, TP change, SwiGLU factories and optimizer states"},
    {"gpt_hybrid_tp_pp", K::gpt_hybrid, kDist, InAll::yes, "", b::gpt_hybrid_tp_pp,
     "GPT saved at TP x PP=2 -> hybrid loaded at TP only, optimizer states"},
    {"gpt_hybrid_pp_tp", K::gpt_hybrid, kDist, InAll::yes, "", b::gpt_hybrid_pp_tp,
     "GPT saved at TP only -> hybrid loaded at TP x PP=2 (layers split evenly), SwiGLU"},
    {"gpt_hybrid_moe_ep", K::gpt_hybrid, kDist, InAll::yes, "", b::gpt_hybrid_moe_ep,
     "GPT MoE (4 experts) -> hybrid with E layers, EP change, optimizer states"},
    {"dp_replicas", K::gpt_hybrid, kDist, InAll::yes, "", b::dp_replicas,
     "DP=2 replicas on both sides (exactly one writer per shard), TP change"},
    // The GDP in_proj under GTP, on the Megatron-LM snapshot.
    {"gdp_in_proj_gtp", K::gdp_gtp, kDist, InAll::yes, "", b::gdp_in_proj_gtp,
     "GDP in_proj (gather design) across a GTP x TP change, rows < p x G, all-padding GTP ranks"},
    {"gdp_in_proj_gtp_repad", K::gdp_gtp, kDist, InAll::yes, "", b::gdp_in_proj_gtp_repad,
     "GDP in_proj (gather design) saved at p=16, loaded at p=32 across a GTP change (G up to 4)"},
    {"gdp_in_proj_gtp_local", K::gdp_gtp, kDist, InAll::yes, "", b::gdp_in_proj_gtp_local,
     "GDP in_proj (gather design) reloaded from each rank's local checkpoint by to_state_dict"},
    {"gdp_in_proj_shard_split", K::gdp_gtp, kDist, InAll::with_candidate, "", b::gdp_in_proj_shard_split,
     "GDP in_proj saved and loaded with the shard split across a GTP x TP change"},
    {"gdp_in_proj_gather_to_shard_split", K::gdp_gtp, kDist, InAll::with_candidate, "",
     b::gdp_in_proj_gather_to_shard_split,
     "GDP in_proj saved with the gather design (p=16), loaded with the shard split (p=32)"},
    {"gdp_in_proj_shard_split_to_gather", K::gdp_gtp, kDist, InAll::with_candidate, "",
     b::gdp_in_proj_shard_split_to_gather,
     "GDP in_proj saved with the shard split, loaded with the gather design (TP x GTP change)"},
    // Megatron's own models (`--real --all`).
    {"real_gpt_hybrid_tp", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_tp,
     "Megatron's GPTModel -> its HybridModel M*-M*- (retargeted by Megatron), TP change"},
    {"real_gpt_hybrid_swiglu_tied", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_swiglu_tied,
     "Megatron's GPTModel -> HybridModel, SwiGLU (factories), tied embeddings, LayerNorm, TP change"},
    {"real_gpt_hybrid_pp", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_pp,
     "Megatron's GPTModel at TP x PP=2 -> HybridModel M*-|M*- at TP x PP=2 (stages by pipes)"},
    {"real_gpt_hybrid_moe", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_moe,
     "Megatron's GPTModel with 4 experts (EP = min(ranks, 4), ETP 1) -> HybridModel *E*E at TP = ETP = ranks / EP' "
     "(EP' = min(ranks, 4) / 2 or 1): EP and ETP change"},
    {"real_hybrid_hybrid_tp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_tp,
     "Megatron's HybridModel M*-M*- saved and loaded across a TP change (Mamba layers loaded too)"},
    {"real_gpt_hybrid_training", K::real_gpt_hybrid, P::training, InAll::yes, "", b::real_gpt_hybrid_training,
     "Megatron's GPTModel saved by save_checkpoint -> HybridModel *-M*-M loaded by load_checkpoint (Megatron's own "
     "GPT -> hybrid setup and retarget), TP change; the checkpoint's args as a Megatron-LM before GatedDeltaProduct "
     "saved them (no gdp_num_householder: the load takes its default)"},
    {"real_hybrid_hybrid_gtp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_gtp,
     "Megatron's HybridModel M*-M*- at TP 1 saved at GTP = save ranks, loaded at GTP = load ranks (p = 16): every "
     "linear GTP-wrapped, the Mamba in_proj gathered on save and padded to p x G rows"},
    {"real_gpt_hybrid_gtp", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_gtp,
     "Megatron's GPTModel at TP 1 saved at GTP = save ranks -> HybridModel *-*- loaded at GTP = load ranks "
     "(retargeted by Megatron): every linear GTP-wrapped (no Mamba layer: a fresh in_proj under GTP is finding B); "
     "p = 16, none padded"},
    {"real_hybrid_hybrid_gdp_tp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_gdp_tp,
     "Megatron's HybridModel M*-M*- with GatedDeltaProduct mixers saved and loaded across a TP change (the GDP "
     "in_proj's split factory [z|V|K|Q|b|a] and its conv1d loaded)"},
    {"real_gpt_hybrid_optimizer", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_optimizer,
     "Megatron's GPTModel with SwiGLU and its FP32Optimizer (Adam's moments) -> HybridModel M*-M*- and its "
     "FP32Optimizer (retargeted by Megatron, moments alike, the Mamba layers' kept fresh), TP change"},
    {"real_hybrid_hybrid_optimizer", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_optimizer,
     "Megatron's HybridModel M*-M*- and its FP32Optimizer saved and loaded across a TP change (the Mamba in_proj's "
     "split moments included)"},
    {"real_gpt_hybrid_training_optimizer", K::real_gpt_hybrid, P::training, InAll::yes, "",
     b::real_gpt_hybrid_training_optimizer,
     "Megatron's GPTModel and its FP32Optimizer saved by save_checkpoint -> HybridModel *-M*-M and its "
     "FP32Optimizer loaded by load_checkpoint (Megatron's own GPT -> hybrid setup retargets the optimizer state "
     "too), TP change"},
    {"real_hybrid_hybrid_gdp_gtp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_gdp_gtp,
     "Megatron's HybridModel M*-M*- with GatedDeltaProduct mixers at TP 1 saved at GTP = save ranks, loaded at "
     "GTP = load ranks (p = 16): every linear GTP-wrapped, the GDP in_proj ([z|V*|K*|Q|b*|a]) gathered on save and "
     "padded to p x G rows"},
    {"real_gpt_hybrid_training_moe", K::real_gpt_hybrid, P::training, InAll::yes, "", b::real_gpt_hybrid_moe,
     "Megatron's GPTModel with 4 experts (EP = min(ranks, 4), ETP 1) -> HybridModel *E*E at TP = ETP = ranks / EP' "
     "(EP' = min(ranks, 4) / 2 or 1): EP and ETP change; saved by save_checkpoint (fully parallel: each replicated "
     "chunk written by one of its holders), loaded by load_checkpoint (Megatron's own GPT -> hybrid setup)"},
    {"real_gpt_hybrid_training_pp", K::real_gpt_hybrid, P::training, InAll::yes, "", b::real_gpt_hybrid_training_pp,
     "Megatron's GPTModel at TP x PP=2 with SwiGLU, tied embeddings and LayerNorm saved by save_checkpoint -> "
     "HybridModel *-M|*-M at TP x PP=2 loaded by load_checkpoint (Megatron's own GPT -> hybrid setup per stage)"},
    {"real_gpt_hybrid_training_gtp", K::real_gpt_hybrid, P::training, InAll::yes, "", b::real_gpt_hybrid_gtp,
     "Megatron's GPTModel at TP 1 saved at GTP = save ranks -> HybridModel *-*- loaded at GTP = load ranks "
     "(retargeted by Megatron): every linear GTP-wrapped (no Mamba layer: a fresh in_proj under GTP is finding B); "
     "p = 16, none padded; saved by save_checkpoint, loaded by load_checkpoint (--tensor-parallel-num-weight-shards "
     "= G)"},
    {"real_hybrid_hybrid_gtp_dp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_gtp_dp,
     "Megatron's HybridModel M*-M*- at TP 1 x GTP 2 x DP = ranks / 2 on both sides (p = 16): each GTP shard's DP "
     "replicas, exactly one of them its main replica (the writer), across a DP change"},
    {"real_hybrid_hybrid_gdp_gtp_dp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_gdp_gtp_dp,
     "Megatron's HybridModel M*-M*- with GatedDeltaProduct mixers at TP 1 x GTP 2 x DP = ranks / 2 on both sides "
     "(p = 16): the gathered GDP in_proj and every GTP shard with DP replicas, one main replica each, DP change"},
    {"real_hybrid_hybrid_dp_parallel", K::real_hybrid_hybrid, P::fully_parallel, InAll::yes, "",
     b::real_hybrid_hybrid_dp,
     "Megatron's HybridModel M*-M*- at DP 2 x TP = ranks / 2 on both sides, saved and loaded through Megatron's "
     "fully parallel strategies (each DP rank reads its share, exchange_utils hands on the rest), TP change"},
    {"real_hybrid_hybrid_cp", K::real_hybrid_hybrid, kDist, InAll::yes, "", b::real_hybrid_hybrid_cp,
     "Megatron's HybridModel M-M- (Mamba and MLP layers, no attention) at CP 2 x TP = ranks / 2 on both sides: "
     "the CP ranks hold replicas (replica ids over the DP x CP group), TP change"},
    {"real_gpt_hybrid_cp", K::real_gpt_hybrid, kDist, InAll::yes, "", b::real_gpt_hybrid_cp,
     "Megatron's GPTModel at CP 2 x TP = ranks / 2 -> HybridModel M*-M*- at CP 2 x TP = ranks / 2: attention under "
     "context parallelism (NOT RUN where the factory's local attention cannot take CP > 1)"},
    // Megatron's own models where Megatron has a finding (`--scenario` and the gate's real tier).
    {"real_gpt_hybrid_gtp_swiglu", K::real_gpt_hybrid, kDist, InAll::no, "S", b::real_gpt_hybrid_gtp_swiglu,
     "Megatron's GPTModel at TP 1 saved at GTP = save ranks -> HybridModel *-*- loaded at GTP = load ranks "
     "(retargeted by Megatron): every linear GTP-wrapped (no Mamba layer: a fresh in_proj under GTP is finding B); "
     "p = 16, none padded; SwiGLU, fc1's rows [W; V] taken from the reference (finding S)"},
    {"real_hybrid_hybrid_gtp_tp2", K::real_hybrid_hybrid, kDist, InAll::no, "R2", b::real_hybrid_hybrid_gtp_tp2,
     "Megatron's HybridModel M*-M*- at TP 2 saved at GTP = save ranks / 2, loaded at GTP = load ranks / 2 (p = 32): "
     "the attention's linear_qkv (96 rows per TP rank) is padded to 128 under GTP 2"},
    {"real_gpt_hybrid_moe_optimizer", K::real_gpt_hybrid, kDist, InAll::no, "E", b::real_gpt_hybrid_moe_fp32_optimizer,
     "Megatron's GPTModel with 4 experts (EP = min(ranks, 4), ETP 1) -> HybridModel *E*E at TP = ETP = ranks / EP' "
     "(EP' = min(ranks, 4) / 2 or 1): EP and ETP change, with their FP32Optimizers (chained dense + expert where "
     "experts have their own groups)"},
    {"real_gpt_hybrid_gtp_p32", K::real_gpt_hybrid, kDist, InAll::no, "R2", b::real_gpt_hybrid_gtp_p32,
     "Megatron's GPTModel at TP 1 saved at GTP = save ranks -> HybridModel *-*- loaded at GTP = load ranks "
     "(retargeted by Megatron): every linear GTP-wrapped (no Mamba layer: a fresh in_proj under GTP is finding B); "
     "p = 32: the 64-row linears padded to 128 rows at GTP 4, planned from the reference"},
    {"real_gpt_hybrid_training_moe_optimizer", K::real_gpt_hybrid, P::training, InAll::no, "E",
     b::real_gpt_hybrid_moe_fp32_optimizer,
     "Megatron's GPTModel with 4 experts (EP = min(ranks, 4), ETP 1) -> HybridModel *E*E at TP = ETP = ranks / EP' "
     "(EP' = min(ranks, 4) / 2 or 1): EP and ETP change, with their FP32Optimizers (chained dense + expert where "
     "experts have their own groups); saved by save_checkpoint (fully parallel: each replicated chunk written by one "
     "of its holders), loaded by load_checkpoint (Megatron's own GPT -> hybrid setup)"},
    {"real_gpt_hybrid_distributed_optimizer", K::real_gpt_hybrid, kDist, InAll::no, "D, F",
     b::real_gpt_hybrid_distributed_optimizer,
     "Megatron's GPTModel and its DistributedOptimizer (fp32, the gradient buffer in several buckets with end "
     "padding) saved in the model-space format fully_reshardable -> HybridModel M*-M*- and its DistributedOptimizer "
     "(retargeted by Megatron, the Mamba layers' kept fresh), TP change; what Megatron loaded is verified, then the "
     "optimizer takes it (load_state_dict)"},
    {"real_gpt_hybrid_moe_distributed_optimizer", K::real_gpt_hybrid, kDist, InAll::no, "D, F",
     b::real_gpt_hybrid_moe_distributed_optimizer,
     "Megatron's GPTModel with 4 experts at EP = min(ranks, 4) (TP 1, so DP = ranks: each DP rank holds a slice of "
     "the dense states) and its chained dense + expert DistributedOptimizers (fp32, padded buckets) saved "
     "fully_reshardable -> HybridModel *E*E at EP = min(ranks, 4) and its DistributedOptimizers (retargeted by "
     "Megatron): DP and EP change; what Megatron loaded is verified, then the optimizers take it"},
};

/// The names of the rows that `keep` selects, in table order.
template <class Keep>
std::vector<std::string> names_where(Keep keep) {
  std::vector<std::string> out;
  for (const ScenarioRow& row : kScenarios)
    if (keep(row)) out.emplace_back(row.name);
  return out;
}

/// The scenario of `row` before its builder lays it out: the row's words and the worlds' small model.
WorldScenario unlaid(const ScenarioRow& row) {
  WorldScenario s;
  s.name = std::string(row.name);
  s.kind = row.kind;
  s.load_path = row.load_path;
  s.description = std::string(row.description);
  s.config = small_world_config();
  return s;
}

}  // namespace

std::span<const ScenarioRow> scenario_table() { return kScenarios; }

const ScenarioRow* find_scenario_row(std::string_view name) {
  const auto* row =
      std::find_if(std::begin(kScenarios), std::end(kScenarios), [&](const ScenarioRow& r) { return r.name == name; });
  return row == std::end(kScenarios) ? nullptr : row;
}

std::vector<std::string> world_scenario_names() {
  return names_where([](const ScenarioRow& r) { return r.kind == ScenarioKind::gpt_hybrid && r.in_all == InAll::yes; });
}

std::vector<std::string> gtp_world_scenario_names() {
  return names_where([](const ScenarioRow& r) { return r.kind == ScenarioKind::gdp_gtp && r.in_all == InAll::yes; });
}

std::vector<std::string> shard_split_world_scenario_names() {
  return names_where([](const ScenarioRow& r) { return r.in_all == InAll::with_candidate; });
}

std::vector<std::string> real_world_scenario_names() {
  return names_where([](const ScenarioRow& r) { return is_real(r.kind) && r.in_all == InAll::yes; });
}

std::vector<std::string> real_finding_scenario_names() {
  return names_where([](const ScenarioRow& r) { return is_real(r.kind) && r.in_all == InAll::no; });
}

std::vector<std::string> gate_real_scenario_names() {
  std::vector<std::string> names = real_world_scenario_names();
  for (std::string& name : real_finding_scenario_names()) names.push_back(std::move(name));
  return names;
}

std::vector<std::pair<std::string, std::string>> world_scenarios_not_run() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& name : shard_split_world_scenario_names()) out.emplace_back(name, kNeedsCandidate);
  return out;
}

Result<WorldScenario> make_world_scenario(const std::string& name, std::int64_t a, std::int64_t b) {
  if (a < 1 || b < 1 || a > 8 || b > 8)
    return make_error(ErrorKind::invalid_argument, "save and load ranks must be in [1, 8]");
  if (!power_of_two_upto8(a) || !power_of_two_upto8(b))
    return cannot_lay_out(name, {a, b},
                          "the small model's dimensions (8 heads, 4 experts) divide by 1, 2, 4 or 8 ranks");
  const ScenarioRow* row = find_scenario_row(name);
  if (!row) {
    std::string known;
    for (const auto& n : world_scenario_names()) known += (known.empty() ? "" : ", ") + n;
    return make_error(ErrorKind::invalid_argument, "unknown scenario '" + name + "' (known: " + known +
                                                       "; roundtrip --list and --real --list name them all)");
  }
  return row->build(unlaid(*row), {a, b});
}

}  // namespace ih
