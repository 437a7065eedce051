#include "models/model_state_dict.h"

#include <algorithm>
#include <numeric>

#include "models/hybrid_pattern.h"

namespace ih {
namespace {

/// The DistributedOptimizer's plain entry that names its checkpoint format.
constexpr const char* kShardingType = "optimizer.param_state_sharding_type";

Error bad(const std::string& message) { return make_error(ErrorKind::invalid_argument, message); }

Status require_positive(std::int64_t value, const char* what) {
  if (value < 1) return bad(std::string(what) + " must be at least 1, got " + std::to_string(value));
  return Ok{};
}

/// Expert parameters on the expert groups have their own DistributedOptimizer (over the expert-data-parallel
/// group). The param groups are aligned over all ranks, so when the model has such experts anywhere every rank has a
/// ChainedOptimizer of two (on a stage without experts the second is empty): its state dict is one
/// per optimizer, under optimizer.0 (dense) and optimizer.1 (experts), the tensor keys unprefixed in
/// the fully_reshardable format. Renames the single optimizer's sharding-type entry and adds the second.
void chain_expert_optimizer(StateDict& dict) {
  const auto plain =
      std::find_if(dict.begin(), dict.end(), [](const DictItem& item) { return to_string(item.key) == kShardingType; });
  if (plain == dict.end()) return;
  DictItem dense = *plain;
  dense.key = std::string("optimizer.0.param_state_sharding_type");
  *plain = dense;
  dense.key = std::string("optimizer.1.param_state_sharding_type");
  dict.push_back(std::move(dense));
}

/// Whether expert parameters use the expert process groups (`allreduce` False, Megatron's parallel
/// linears: EP > 1 or ETP != TP), which puts them in an optimizer of their own; with EP 1 and ETP = TP
/// they are ordinary parameters of the dense optimizer.
bool expert_optimizer(const ModelDumpSpec& spec) {
  const bool experts = spec.model == ModelKind::gpt ? spec.config.num_experts > 0
                                                    : spec.pattern.find(pattern::kMoe) != std::string::npos;
  return experts && (spec.sizes.ep > 1 || spec.sizes.etp != spec.sizes.tp);
}

}  // namespace

std::int64_t data_parallel_size(const RankLayout& sizes) {
  const std::int64_t experts = sizes.ep * sizes.etp;
  return std::lcm(std::lcm(sizes.tp, experts) / sizes.tp, sizes.dp);
}

std::int64_t world_size(const RankLayout& sizes) {
  return sizes.gtp * sizes.tp * sizes.cp * data_parallel_size(sizes) * sizes.pp;
}

Result<RankLayout> rank_layout(const RankLayout& sizes, std::int64_t rank) {
  for (const auto& [value, what] : {std::pair{sizes.tp, "tp"},
                                    {sizes.pp, "pp"},
                                    {sizes.ep, "ep"},
                                    {sizes.etp, "etp"},
                                    {sizes.gtp, "gtp"},
                                    {sizes.dp, "dp"},
                                    {sizes.cp, "cp"}})
    IH_TRY_STATUS(require_positive(value, what));
  const std::int64_t world = world_size(sizes);
  if (rank < 0 || rank >= world)
    return bad("rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world) +
               " ranks (gtp x tp x cp x dp x pp = " + std::to_string(sizes.gtp) + " x " + std::to_string(sizes.tp) +
               " x " + std::to_string(sizes.cp) + " x " + std::to_string(data_parallel_size(sizes)) + " x " +
               std::to_string(sizes.pp) + ")");
  RankLayout out = sizes;
  const std::int64_t dp_cp = data_parallel_size(sizes) * sizes.cp;  // CP inside DP (Megatron's tp-cp-dp-pp)
  out.tp_rank = rank % sizes.tp;
  out.gtp_rank = (rank / sizes.tp) % sizes.gtp;
  out.dp_rank = (rank / (sizes.tp * sizes.gtp)) % dp_cp;
  out.pp_rank = rank / (sizes.tp * sizes.gtp * dp_cp);
  const std::int64_t in_stage = rank % (sizes.tp * sizes.gtp * dp_cp);  // the expert grid over the same ranks
  out.etp_rank = in_stage % sizes.etp;
  out.ep_rank = (in_stage / sizes.etp) % sizes.ep;
  out.expert_dp_rank = in_stage / (sizes.etp * sizes.ep);
  return out;
}

Status validate_model_dump(const ModelDumpSpec& spec, std::int64_t rank) {
  IH_TRY_ASSIGN(layout, rank_layout(spec.sizes, rank));
  IH_TRY_STATUS(validate_layout(spec.config, layout));
  if (spec.config.num_attention_heads % spec.config.num_query_groups != 0)
    return bad("num_attention_heads " + std::to_string(spec.config.num_attention_heads) +
               " is not a multiple of num_query_groups " + std::to_string(spec.config.num_query_groups));
  // TransformerConfig's own checks (its __post_init__): expert parallelism needs experts, and biased MoE
  // linears no expert TP.
  if (spec.sizes.ep > 1 && spec.config.num_experts < 1)
    return bad("--ep " + std::to_string(spec.sizes.ep) +
               " needs --experts (Megatron: \"num_moe_experts must be non None to use expert-parallel.\")");
  if (spec.config.num_experts > 0 && spec.config.add_bias && spec.sizes.etp != 1)
    return bad("--bias with experts needs --etp 1 (Megatron: \"Bias in Moe is only supported when ETP==1\"), got etp " +
               std::to_string(spec.sizes.etp));
  if (spec.model == ModelKind::gpt) {
    IH_TRY_STATUS(require_positive(spec.layers, "layers"));
    if (spec.layers % spec.sizes.pp != 0)
      return bad("layers " + std::to_string(spec.layers) + " is not divisible by pp " + std::to_string(spec.sizes.pp));
    return Ok{};
  }
  IH_TRY_ASSIGN(parsed, pattern::parse(spec.pattern));
  const std::string main = parsed.main.value_or("");
  if (main.empty()) return bad("pattern '" + spec.pattern + "' has no layers");
  if (main.find(pattern::kMamba) != std::string::npos) IH_TRY_STATUS(validate_mamba_layout(spec.config, layout));
  const std::int64_t segments = pattern::pipeline_segment_count(main);
  if (segments > 1 && spec.sizes.pp == 1)  // virtual stages need an interleaved schedule, which needs PP > 1
    return bad("pattern '" + spec.pattern + "' has " + std::to_string(segments) +
               " pipeline segments but --pp is 1 (Megatron runs virtual pipeline stages only with PP > 1)");
  if (main.find(pattern::kMoe) != std::string::npos && spec.config.num_experts < 1)
    return bad("pattern '" + spec.pattern + "' has MoE layers (E) but --experts is 0");
  return Ok{};
}

const char* to_string(OptimizerKind kind) {
  switch (kind) {
    case OptimizerKind::distributed: return "distributed";
    case OptimizerKind::float16: return "float16";
    case OptimizerKind::fp32: return "fp32";
  }
  return "?";
}

Result<StateDict> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) {
  IH_TRY_STATUS(validate_model_dump(spec, rank));
  IH_TRY_ASSIGN(layout, rank_layout(spec.sizes, rank));
  // Megatron's DistributedOptimizer in the fully_reshardable format (the one a GPT->hybrid load requires):
  // per parameter its main copy `param` and Adam's two moments, each with the parameter's key (prefixed
  // optimizer.state.<state>.), sharding and replica id (docs/spec-addendum.md, I). Float16OptimizerWithFloat16Params
  // keys the same three by the model's entries, its fp32 main copy as `fp32_param`, and saves no sharding type.
  // FP32Optimizer keys Adam's two moments like Float16's, with no main copy (the parameters are fp32).
  const bool float16 = spec.optimizer_kind == OptimizerKind::float16;
  const bool fp32 = spec.optimizer_kind == OptimizerKind::fp32;
  const OptimizerStates optimizer = !spec.optimizer ? OptimizerStates{}
                                    : float16       ? OptimizerStates{{"fp32_param", "exp_avg", "exp_avg_sq"}}
                                    : fp32          ? OptimizerStates{{"exp_avg", "exp_avg_sq"}}
                                                    : OptimizerStates{{"param", "exp_avg", "exp_avg_sq"}};
  IH_TRY_ASSIGN(tree, spec.model == ModelKind::gpt
                          ? gpt_sharded_state_dict(spec.config, spec.layers, layout, optimizer)
                          : hybrid_sharded_state_dict(spec.config, spec.pattern, layout, optimizer));
  StateDict dict = std::move(tree.dict());
  if (spec.optimizer && (float16 || fp32))
    std::erase_if(dict, [](const DictItem& item) { return to_string(item.key) == kShardingType; });
  else if (spec.optimizer && expert_optimizer(spec))
    chain_expert_optimizer(dict);
  return dict;
}

}  // namespace ih
