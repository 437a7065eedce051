// `model dump` configurations (issue 17, the real-versus-synthetic property), built by construction: the
// sizes are drawn first and cut to the target's world, the pattern's pipe segments and the rank follow
// from them, so every case is one both the reference and Megatron build and it shrinks toward a dense
// one-layer GPT at rank 0 of one rank.
#include <string>
#include <vector>

#include "properties/generators.h"

namespace ih::props {
namespace gen = rc::gen;

namespace {

/// The raw draws of one configuration, before the world is fitted and the pattern drawn.
struct Knobs {
  bool hybrid = false;
  std::int64_t experts = 0, tp = 1, pp = 1, gtp = 1, stage_layers = 1;
  bool ep2 = false, etp_is_tp = false, gated = false, tied = false, layer_norm = false, optimizer = false,
       virtual_stages = false, bias = false, gdp = false;
  OptimizerKind optimizer_kind = OptimizerKind::distributed;
};

/// The configuration of `k` with the world cut to `max_ranks` (GTP, then PP, EP, ETP, TP halved).
ModelDumpSpec spec_of(const Knobs& k, std::optional<std::int64_t> max_ranks) {
  ModelDumpSpec s;
  s.model = k.hybrid ? ModelKind::hybrid : ModelKind::gpt;
  s.config.num_experts = k.experts;
  s.config.gated_mlp = k.gated, s.config.tied_embeddings = k.tied, s.config.layer_norm = k.layer_norm;
  s.config.add_bias = k.bias;
  if (k.hybrid && k.gdp) s.config.ssm_mixer = "gdp";  // GatedDeltaProduct mixers at the pattern's M
  s.optimizer = k.optimizer;
  s.sizes.tp = k.tp, s.sizes.pp = k.pp, s.sizes.gtp = k.gtp;
  s.sizes.ep = k.experts > 0 && k.ep2 && k.experts % 2 == 0 ? 2 : 1;
  s.sizes.etp = k.experts > 0 && k.etp_is_tp ? k.tp : 1;
  for (std::int64_t* size : {&s.sizes.gtp, &s.sizes.pp, &s.sizes.ep, &s.sizes.etp, &s.sizes.tp})
    while (max_ranks && world_size(s.sizes) > *max_ranks && *size > 1) *size /= 2;
  s.layers = s.sizes.pp * k.stage_layers;
  if (s.optimizer) s.optimizer_kind = k.optimizer_kind;
  // Not drawn under GTP (docs/spec-addendum.md I): SwiGLU (finding S, pinned as the gate's curated
  // gpt_swiglu_gtp2: every such draw would fail on it) and a hybrid model's optimizer (the distributed one
  // refuses the gathered in_proj, finding O; the Float16 one keys its per-shard rebuild by the wrapped name, P).
  if (s.sizes.gtp > 1) {
    s.config.gated_mlp = false;
    if (s.model == ModelKind::hybrid) s.optimizer = false;
  }
  // TransformerConfig refuses biased MoE linears with expert TP ("Bias in Moe is only supported when ETP==1").
  if (s.config.num_experts > 0 && s.sizes.etp != 1) s.config.add_bias = false;
  return s;
}

/// One pipe segment of a hybrid pattern: 1-3 layers of M * - (and E with experts).
rc::Gen<std::string> genSegment(bool experts) {
  const std::vector<char> symbols = experts ? std::vector<char>{'*', '-', 'M', 'E'} : std::vector<char>{'*', '-', 'M'};
  return gen::mapcat(gen::inRange<std::size_t>(1, 4),
                     [symbols](std::size_t n) { return gen::container<std::string>(n, genElement(symbols)); });
}

}  // namespace

rc::Gen<ModelDumpCase> genModelDumpCase(const WorldCapacity& capacity) {
  const auto knobs = gen::build<Knobs>(
      gen::set(&Knobs::hybrid, gen::arbitrary<bool>()),
      gen::set(&Knobs::experts, genElement<std::int64_t>({0, 1, 2, 4})), gen::set(&Knobs::tp, genTpSize()),
      gen::set(&Knobs::pp, genElement<std::int64_t>({1, 2})), gen::set(&Knobs::gtp, genElement<std::int64_t>({1, 2})),
      gen::set(&Knobs::stage_layers, genElement<std::int64_t>({1, 2})), gen::set(&Knobs::ep2, gen::arbitrary<bool>()),
      gen::set(&Knobs::etp_is_tp, gen::arbitrary<bool>()), gen::set(&Knobs::gated, gen::arbitrary<bool>()),
      gen::set(&Knobs::tied, gen::arbitrary<bool>()), gen::set(&Knobs::layer_norm, gen::arbitrary<bool>()),
      gen::set(&Knobs::optimizer, gen::arbitrary<bool>()),
      gen::set(&Knobs::optimizer_kind,
               genElement<OptimizerKind>({OptimizerKind::distributed, OptimizerKind::float16, OptimizerKind::fp32})),
      gen::set(&Knobs::virtual_stages, gen::arbitrary<bool>()), gen::set(&Knobs::bias, gen::arbitrary<bool>()),
      gen::set(&Knobs::gdp, gen::arbitrary<bool>()));
  return gen::mapcat(knobs, [max_ranks = capacity.max_model_ranks](const Knobs& k) {
    const ModelDumpSpec spec = spec_of(k, max_ranks);
    const std::int64_t segments =
        spec.model == ModelKind::gpt ? 0 : spec.sizes.pp * (spec.sizes.pp > 1 && k.virtual_stages ? 2 : 1);
    const auto pattern = gen::container<std::vector<std::string>>(static_cast<std::size_t>(segments),
                                                                  genSegment(spec.config.num_experts > 0));
    return gen::apply(
        [spec](const std::vector<std::string>& parts, std::int64_t rank) {
          ModelDumpCase c{spec, rank};
          if (spec.model == ModelKind::hybrid) {
            c.spec.pattern.clear();
            for (const std::string& part : parts) c.spec.pattern += (c.spec.pattern.empty() ? "" : "|") + part;
          }
          return c;
        },
        pattern, gen::inRange<std::int64_t>(0, world_size(spec.sizes)));
  });
}

}  // namespace ih::props
