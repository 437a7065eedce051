#include "models/model_state_dict.h"

#include <numeric>

#include "models/hybrid_pattern.h"

namespace ih {
namespace {

Error bad(const std::string& message) { return make_error(ErrorKind::invalid_argument, message); }

Status require_positive(std::int64_t value, const char* what) {
  if (value < 1) return bad(std::string(what) + " must be at least 1, got " + std::to_string(value));
  return Ok{};
}

}  // namespace

std::int64_t data_parallel_size(const RankLayout& sizes) {
  const std::int64_t experts = sizes.ep * sizes.etp;
  return std::lcm(sizes.tp, experts) / sizes.tp;
}

std::int64_t world_size(const RankLayout& sizes) { return sizes.gtp * sizes.tp * data_parallel_size(sizes) * sizes.pp; }

Result<RankLayout> rank_layout(const RankLayout& sizes, std::int64_t rank) {
  for (const auto& [value, what] :
       {std::pair{sizes.tp, "tp"}, {sizes.pp, "pp"}, {sizes.ep, "ep"}, {sizes.etp, "etp"}, {sizes.gtp, "gtp"}})
    IH_TRY_STATUS(require_positive(value, what));
  const std::int64_t world = world_size(sizes);
  if (rank < 0 || rank >= world)
    return bad("rank " + std::to_string(rank) + " is outside the world of " + std::to_string(world) +
               " ranks (gtp x tp x dp x pp = " + std::to_string(sizes.gtp) + " x " + std::to_string(sizes.tp) + " x " +
               std::to_string(data_parallel_size(sizes)) + " x " + std::to_string(sizes.pp) + ")");
  RankLayout out = sizes;
  const std::int64_t dp = data_parallel_size(sizes);
  out.gtp_rank = rank % sizes.gtp;
  const std::int64_t rest = rank / sizes.gtp;  // t + T*(d + D*p)
  out.tp_rank = rest % sizes.tp;
  out.dp_rank = (rest / sizes.tp) % dp;
  out.pp_rank = rest / (sizes.tp * dp);
  const std::int64_t in_stage = rest % (sizes.tp * dp);  // the expert grid over the same ranks
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
  if (spec.model == ModelKind::gpt) {
    IH_TRY_STATUS(require_positive(spec.layers, "layers"));
    if (spec.layers % spec.sizes.pp != 0)
      return bad("layers " + std::to_string(spec.layers) + " is not divisible by pp " + std::to_string(spec.sizes.pp));
    return Ok{};
  }
  IH_TRY_ASSIGN(parsed, pattern::parse(spec.pattern));
  const std::string main = parsed.main.value_or("");
  if (main.empty()) return bad("pattern '" + spec.pattern + "' has no layers");
  const std::int64_t segments = pattern::pipeline_segment_count(main);
  if (segments > 1 && spec.sizes.pp == 1)  // virtual stages need an interleaved schedule, which needs PP > 1
    return bad("pattern '" + spec.pattern + "' has " + std::to_string(segments) +
               " pipeline segments but --pp is 1 (Megatron runs virtual pipeline stages only with PP > 1)");
  if (main.find(pattern::kMoe) != std::string::npos && spec.config.num_experts < 1)
    return bad("pattern '" + spec.pattern + "' has MoE layers (E) but --experts is 0");
  return Ok{};
}

Result<StateDict> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) {
  IH_TRY_STATUS(validate_model_dump(spec, rank));
  IH_TRY_ASSIGN(layout, rank_layout(spec.sizes, rank));
  const OptimizerStates optimizer = spec.optimizer ? OptimizerStates::adam() : OptimizerStates{};
  IH_TRY_ASSIGN(tree, spec.model == ModelKind::gpt
                          ? gpt_sharded_state_dict(spec.config, spec.layers, layout, optimizer)
                          : hybrid_sharded_state_dict(spec.config, spec.pattern, layout, optimizer));
  return std::move(tree.dict());
}

}  // namespace ih
