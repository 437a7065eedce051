// The gate's real-versus-synthetic group `model_dump` (issue 17): for each curated configuration and
// each generated one, the target's `model_state_dict` of the listed ranks against the reference's,
// compared by models/model_dump_compare.h. Against the reference it compares the reference with
// itself; against Megatron the real model's dump is first rewritten by the explained rules its
// configuration needs (docs/spec-addendum.md I), and a rule that no longer fires fails as stale.
#include <map>
#include <random>

#include "harness/gate/gate.h"
#include "models/model_dump_compare.h"
#include "seam/reference_implementation.h"

namespace ih::gate {
namespace {

constexpr const char* kGroup = "model_dump";
constexpr std::size_t kShownDifferences = 40;  // per rank; the count says how many there were

struct DumpConfig {
  std::string name;
  ModelDumpSpec spec;
  std::vector<std::int64_t> ranks;
};

struct Knobs {
  std::int64_t tp = 1, pp = 1, ep = 1, gtp = 1, experts = 0, layers = 2, dp = 1, cp = 1;
  bool gated = false, tied = false, layer_norm = false, optimizer = false, float16 = false, fp32 = false, gdp = false,
       bias = false;
};

DumpConfig config(std::string name, ModelKind model, const std::string& pattern, const Knobs& k,
                  std::vector<std::int64_t> ranks) {
  ModelDumpSpec spec;
  spec.model = model;
  if (model == ModelKind::hybrid) spec.pattern = pattern;
  spec.layers = k.layers;
  spec.sizes.tp = k.tp, spec.sizes.pp = k.pp, spec.sizes.ep = k.ep, spec.sizes.gtp = k.gtp, spec.sizes.dp = k.dp;
  spec.sizes.cp = k.cp;
  spec.optimizer = k.optimizer || k.float16 || k.fp32;
  if (k.float16) spec.optimizer_kind = OptimizerKind::float16;
  if (k.fp32) spec.optimizer_kind = OptimizerKind::fp32;
  spec.config.num_experts = k.experts;
  spec.config.gated_mlp = k.gated, spec.config.tied_embeddings = k.tied, spec.config.layer_norm = k.layer_norm;
  spec.config.add_bias = k.bias;
  if (k.gdp) spec.config.ssm_mixer = "gdp";
  return {std::move(name), spec, std::move(ranks)};
}

/// Replicas across DP and CP: of GTP shards (the reference deciding which one is main), of experts.
std::vector<DumpConfig> replica_layouts() {
  using M = ModelKind;
  return {
      // GTP x DP 2: each GTP shard's DP replicas, the reference deciding which one is main (d = 0).
      config("hybrid_gtp2_dp2", M::hybrid, "M*-", {.gtp = 2, .dp = 2}, {0, 1, 2, 3}),
      config("hybrid_gdp_gtp2_dp2", M::hybrid, "M*-", {.gtp = 2, .dp = 2, .gdp = true}, {0, 1, 2, 3}),
      // CP 2 (no attention layer: the local attention refuses CP > 1): the CP ranks are replicas, also of GTP
      // shards and of experts.
      config("hybrid_cp2_tp2", M::hybrid, "M-M-", {.tp = 2, .cp = 2}, {0, 1, 2, 3}),
      config("hybrid_gtp2_cp2", M::hybrid, "M-M-", {.gtp = 2, .cp = 2}, {0, 1, 2, 3}),
      config("hybrid_gdp_gtp2_cp2", M::hybrid, "M-", {.gtp = 2, .cp = 2, .gdp = true}, {0, 1, 2, 3}),
      config("hybrid_moe_ep2_cp2", M::hybrid, "M-E-", {.ep = 2, .experts = 4, .cp = 2}, {0, 1, 2, 3}),
  };
}

/// Every rank of small worlds, so each replica id and offset is seen (docs/spec-addendum.md I).
std::vector<DumpConfig> curated() {
  using M = ModelKind;
  return {
      config("gpt_dense", M::gpt, "", {}, {0}),
      config("gpt_dense_layernorm_pp2", M::gpt, "", {.pp = 2, .layers = 4, .layer_norm = true}, {0, 1}),
      config("gpt_swiglu_untied_tp2", M::gpt, "", {.tp = 2, .gated = true}, {0, 1}),
      config("gpt_swiglu_tied", M::gpt, "", {.gated = true, .tied = true}, {0}),
      config("gpt_tied_pp2", M::gpt, "", {.pp = 2, .tied = true}, {0, 1}),
      // A middle stage, which holds neither the embedding nor the output layer that tied weights share.
      config("gpt_tied_pp3", M::gpt, "", {.pp = 3, .layers = 3, .tied = true}, {1, 2}),
      config("gpt_moe_e4", M::gpt, "", {.experts = 4}, {0}),
      config("gpt_moe_e1", M::gpt, "", {.experts = 1}, {0}),
      config("gpt_moe_e4_ep2", M::gpt, "", {.ep = 2, .experts = 4}, {0, 1}),
      config("gpt_moe_e4_tp2_ep2", M::gpt, "", {.tp = 2, .ep = 2, .experts = 4, .gated = true}, {0, 1}),
      config("hybrid_m_star_dash", M::hybrid, "M*-M*-", {}, {0}),
      config("hybrid_m_star_dash_tp2", M::hybrid, "M*-M*-", {.tp = 2}, {0, 1}),
      config("hybrid_moe", M::hybrid, "M*EM*E", {.experts = 4}, {0}),
      config("hybrid_moe_ep2_pp2", M::hybrid, "M*E|M*E", {.pp = 2, .ep = 2, .experts = 4}, {0, 1, 2, 3}),
      config("hybrid_virtual_stages", M::hybrid, "M*|M*|M-|M-", {.pp = 2, .tied = true}, {0, 1}),
      // --optimizer: Megatron's DistributedOptimizer (fully_reshardable) after the model's entries; DP 2 under
      // EP 2, a chained dense + expert optimizer, a stage without experts, virtual stages.
      config("gpt_dense_optimizer", M::gpt, "", {.optimizer = true}, {0}),
      config("gpt_swiglu_tp2_pp2_optimizer", M::gpt, "",
             {.tp = 2, .pp = 2, .gated = true, .layer_norm = true, .optimizer = true}, {0, 3}),
      config("gpt_moe_e4_ep2_optimizer", M::gpt, "", {.ep = 2, .experts = 4, .gated = true, .optimizer = true}, {0, 1}),
      config("hybrid_tp2_optimizer", M::hybrid, "M*-M*-", {.tp = 2, .optimizer = true}, {0, 1}),
      config("hybrid_moe_pp2_optimizer", M::hybrid, "M*E|M*-", {.pp = 2, .ep = 2, .experts = 4, .optimizer = true},
             {0, 1, 2, 3}),
      config("hybrid_virtual_stages_optimizer", M::hybrid, "M*|M*|M-|M-", {.pp = 2, .tied = true, .optimizer = true},
             {0, 1}),
      // GTP: every rank's GTP slot (rank = t + T*(g + G*(d + D*p))).
      config("gpt_dense_gtp2", M::gpt, "", {.gtp = 2}, {0, 1}),
      config("gpt_gtp2_tp2_pp2", M::gpt, "", {.tp = 2, .pp = 2, .gtp = 2}, {1, 6}),
      config("hybrid_gtp2_tp2", M::hybrid, "M*-", {.tp = 2, .gtp = 2}, {0, 1, 2, 3}),
      // Finding O: Megatron's DistributedOptimizer cannot give a GTP mixer's state (pinned, KNOWN FINDING).
      config("hybrid_gtp2_optimizer", M::hybrid, "M*-", {.gtp = 2, .optimizer = true}, {0, 1}),
      // Finding S: under GTP the SwiGLU factory splits each GTP shard of fc1, not the layer's weight (pinned).
      config("gpt_swiglu_gtp2", M::gpt, "", {.gtp = 2, .gated = true}, {0, 1}),
      // GatedDeltaProduct mixers at M (--mixer gdp): split in_proj and conv1d, gathered under GTP.
      config("hybrid_gdp", M::hybrid, "M*-M*-", {.gdp = true}, {0}),
      config("hybrid_gdp_tp2", M::hybrid, "M*-", {.tp = 2, .layer_norm = true, .gdp = true}, {0, 1}),
      config("hybrid_gdp_gtp2", M::hybrid, "M*-", {.gtp = 2, .gdp = true}, {0, 1}),
      config("hybrid_gdp_gtp2_tp2", M::hybrid, "M*-", {.tp = 2, .gtp = 2, .gdp = true}, {0, 1, 2, 3}),
      config("hybrid_gdp_optimizer", M::hybrid, "M*E|M-", {.pp = 2, .experts = 4, .optimizer = true, .gdp = true},
             {0, 1}),
      // GTP with experts, pipe segments and virtual stages, the distributed optimizer; TP 4.
      config("gpt_moe_e4_ep2_gtp2", M::gpt, "", {.ep = 2, .gtp = 2, .experts = 4}, {0, 1, 2, 3}),
      config("hybrid_moe_gtp2_pp2", M::hybrid, "M*E|M*-", {.pp = 2, .gtp = 2, .experts = 4}, {0, 1, 2, 3}),
      config("hybrid_virtual_stages_gtp2", M::hybrid, "M*|-M|E*|M", {.pp = 2, .gtp = 2, .experts = 2}, {1, 2}),
      config("gpt_dense_gtp2_optimizer", M::gpt, "", {.gtp = 2, .optimizer = true}, {1}),
      config("gpt_swiglu_tp4", M::gpt, "", {.tp = 4, .gated = true}, {3}),
      config("hybrid_moe_tp4", M::hybrid, "M*-E", {.tp = 4, .experts = 4}, {2}),
      // --optimizer-kind float16: Float16OptimizerWithFloat16Params, the optimizer path GTP uses.
      config("gpt_dense_float16", M::gpt, "", {.float16 = true}, {0}),
      config("gpt_dense_gtp2_float16", M::gpt, "", {.gtp = 2, .float16 = true}, {0, 1}),
      config("gpt_tp2_gtp2_float16", M::gpt, "", {.tp = 2, .gtp = 2, .float16 = true}, {0, 1, 2, 3}),
      config("gpt_moe_e4_ep2_float16", M::gpt, "", {.ep = 2, .experts = 4, .float16 = true}, {0, 1}),
      config("hybrid_tp2_float16", M::hybrid, "M*-M*-", {.tp = 2, .float16 = true}, {0, 1}),
      // Finding P: the in_proj's rebuilt optimizer entries are keyed by the wrapped model's names (pinned).
      config("hybrid_gtp2_float16", M::hybrid, "M*-", {.gtp = 2, .float16 = true}, {0, 1}),
      // --optimizer-kind fp32: FP32Optimizer, the optimizer the real round trips save and load.
      config("gpt_swiglu_tp2_fp32", M::gpt, "", {.tp = 2, .gated = true, .fp32 = true}, {0, 1}),
      config("gpt_moe_e4_ep2_fp32", M::gpt, "", {.ep = 2, .experts = 4, .fp32 = true}, {0, 1}),
      config("hybrid_tp2_fp32", M::hybrid, "M*-M*-", {.tp = 2, .fp32 = true}, {0, 1}),
      // Finding O's FP32Optimizer face: it too finds model entries by identity, with no backfill (pinned).
      config("hybrid_gtp2_fp32", M::hybrid, "M*-", {.gtp = 2, .fp32 = true}, {0, 1}),
      // --bias (add_bias_linear): SwiGLU's fc1 bias in the SwiGLU factory, row-parallel biases replicated,
      // expert biases, GDP and GTP linears with biases, the optimizer's states of biases.
      config("gpt_swiglu_bias_tp2", M::gpt, "", {.tp = 2, .gated = true, .bias = true}, {0, 1}),
      config("gpt_moe_e4_ep2_bias", M::gpt, "", {.ep = 2, .experts = 4, .bias = true}, {0, 1}),
      config("hybrid_moe_bias_tp2", M::hybrid, "M*-E", {.tp = 2, .experts = 2, .bias = true}, {0, 1}),
      config("hybrid_gdp_bias_tp2", M::hybrid, "M*-", {.tp = 2, .gdp = true, .bias = true}, {1}),
      config("gpt_bias_gtp2", M::gpt, "", {.gtp = 2, .bias = true}, {0, 1}),
      config("gpt_bias_tp2_optimizer", M::gpt, "", {.tp = 2, .optimizer = true, .bias = true}, {0, 1}),
      config("hybrid_bias_tp2_fp32", M::hybrid, "M*-E", {.tp = 2, .experts = 2, .fp32 = true, .bias = true}, {1}),
  };
}

/// Draws for generated configurations: the raw engine reduced by modulo, the same on every platform.
class Draw {
 public:
  explicit Draw(std::uint64_t seed) : engine_(seed) {}
  std::int64_t below(std::int64_t n) { return static_cast<std::int64_t>(engine_() % static_cast<std::uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
  template <class T>
  T pick(std::initializer_list<T> values) {
    return *(values.begin() + below(static_cast<std::int64_t>(values.size())));
  }

 private:
  std::mt19937_64 engine_;
};

/// Draws of their own for what was added after the first generated configurations (the optimizer, the
/// mixer): a seed's earlier draws stay what they were.
struct LaterDraws {
  Draw optimizer, mixer, optimizer_kind, bias, gtp;
};

/// One configuration both sides build (worlds of at most 8 ranks): GPT or hybrid, random patterns over
/// M * - E with virtual stages sometimes, TP/PP/EP 1-2, ETP 2, GTP 2 one time in four, E in {0, 1, 2, 4},
/// SwiGLU, tied, LayerNorm, biases, an optimizer about one time in three (distributed, float16 or fp32) and,
/// in a hybrid model, GDP mixers one time in three. Under GTP neither SwiGLU (finding S, the curated
/// gpt_swiglu_gtp2) nor a hybrid model's optimizer (findings O and P, the curated hybrid_gtp2_*).
std::optional<DumpConfig> draw_config(Draw& d, LaterDraws& later, std::string name) {
  ModelDumpSpec s;
  s.model = d.pick({ModelKind::gpt, ModelKind::hybrid});
  s.sizes.tp = d.pick<std::int64_t>({1, 2}), s.sizes.pp = d.pick<std::int64_t>({1, 2});
  const std::int64_t ep = d.pick<std::int64_t>({1, 2});
  s.config.num_experts = d.pick<std::int64_t>({0, 0, 1, 2, 4});
  if (s.model == ModelKind::gpt) {
    s.layers = s.sizes.pp * d.pick<std::int64_t>({1, 2});
  } else {
    const std::string blocks = s.config.num_experts ? "M*-E" : "M*-";
    const std::int64_t segments = s.sizes.pp * (s.sizes.pp > 1 && d.chance(25) ? 2 : 1);
    s.pattern.clear();
    for (std::int64_t i = 0; i < segments; ++i) {
      if (i) s.pattern += '|';
      for (std::int64_t n = 1 + d.below(3); n > 0; --n) s.pattern += blocks[d.below(std::ssize(blocks))];
    }
  }
  if (s.config.num_experts) {
    if (ep > 1 && s.config.num_experts % ep == 0) s.sizes.ep = ep;
    if (s.sizes.tp > 1 && d.chance(30)) s.sizes.etp = 2;
  }
  s.config.gated_mlp = d.chance(40), s.config.tied_embeddings = d.chance(40), s.config.layer_norm = d.chance(30);
  s.config.add_bias = later.bias.chance(30);
  if (world_size(s.sizes) > 8) return std::nullopt;
  s.optimizer = later.optimizer.chance(30);
  s.optimizer_kind =
      later.optimizer_kind.pick({OptimizerKind::distributed, OptimizerKind::float16, OptimizerKind::fp32});
  if (s.model == ModelKind::hybrid && later.mixer.chance(33)) s.config.ssm_mixer = "gdp";
  if (later.gtp.chance(25) && world_size(s.sizes) * 2 <= 8) {
    s.sizes.gtp = 2;
    s.config.gated_mlp = false;
    if (s.model == ModelKind::hybrid) s.optimizer = false;
  }
  const std::int64_t rank = d.below(world_size(s.sizes));
  if (!validate_model_dump(s, rank).ok()) return std::nullopt;
  return DumpConfig{std::move(name), s, {rank}};
}

std::vector<DumpConfig> generated(std::uint64_t seed, std::int64_t count) {
  Draw d(seed);
  LaterDraws later{Draw(seed ^ 0x6f7074696d697aULL), Draw(seed ^ 0x6d69786572ULL), Draw(seed ^ 0x6b696e64ULL),
                   Draw(seed ^ 0x62696173ULL), Draw(seed ^ 0x677470ULL)};
  std::vector<DumpConfig> out;
  while (std::ssize(out) < count)
    if (auto c = draw_config(d, later, "generated_" + std::to_string(out.size()))) out.push_back(std::move(*c));
  return out;
}

/// The entry key a difference row names (its ` key=K` field), or "" for a row without one (a local entry).
std::string difference_key(const std::string& row) {
  const std::size_t at = row.find(" key=");
  if (at == std::string::npos) return "";
  const std::size_t start = at + 5;
  return row.substr(start, row.find(' ', start) - start);
}

/// The reference's dump of a configuration the gate lists: one it cannot build is the gate's own bug.
Result<std::vector<FlatEntry>> reference_dump(const DumpConfig& c, std::int64_t rank) {
  auto dump = ReferenceImplementation().model_state_dict(c.spec, rank);
  if (!dump.ok())
    return make_error(seam_kind::harness_error, "the gate's configuration " + c.name + " (" + model_dump_flags(c.spec) +
                                                    ") is not one the reference builds: " + dump.error().message);
  return dump;
}

Result<Violations> compare_config(Implementation& target, const DumpConfig& c) {
  // The explained rules describe Megatron's real model, the one target with a code identity (its
  // version); the reference and its planted mutants are compared with the reference as they are.
  const bool explain = !target.code_identity().version.empty();
  Violations out;
  for (std::int64_t rank : c.ranks) {
    IH_TRY_ASSIGN(reference, reference_dump(c, rank));
    auto dumped = target.model_state_dict(c.spec, rank);
    const std::string where = "rank " + std::to_string(rank) + " (model dump " + model_dump_flags(c.spec) + " --rank " +
                              std::to_string(rank) + "): ";
    // The target raising on a configuration it accepts is a finding of its own (typed, so it can be pinned);
    // no answer (unsupported, a timeout, the harness failing) stays what it is.
    if (!dumped.ok() && !is_no_answer(dumped.error().kind)) {
      out.push_back({"dump_raised", "rank " + std::to_string(rank), where + dumped.error().message});
      continue;
    }
    if (!dumped.ok()) return dumped.error().with_context(c.name + " rank " + std::to_string(rank));
    IH_TRY_ASSIGN(compared, compare_model_dumps(c.spec, rank, reference, std::move(*dumped), explain));
    for (DumpExplanation rule : compared.stale())
      out.push_back({"stale_explanation", to_string(rule),
                     where + "the explained difference " + to_string(rule) +
                         " (docs/spec-addendum.md I) no longer occurs: the explanation is stale"});
    // One violation per rank and entry key, so a pinned finding names the entries it expects to differ.
    std::map<std::string, std::int64_t> not_shown;
    for (std::size_t i = 0; i < compared.differences.size(); ++i) {
      const std::string key = difference_key(compared.differences[i]);
      const std::string subject = "rank " + std::to_string(rank) + (key.empty() ? "" : " " + key);
      if (i < kShownDifferences)
        out.push_back({"differs", subject, where + compared.differences[i]});
      else
        ++not_shown[subject];
    }
    for (const auto& [subject, count] : not_shown)
      out.push_back({"differs", subject, where + std::to_string(count) + " more differences of " + subject});
  }
  return out;
}

}  // namespace

std::vector<Check> model_dump_checks(std::uint64_t seed, std::int64_t generated_count) {
  std::vector<DumpConfig> configs = curated();
  for (DumpConfig& c : replica_layouts()) configs.push_back(std::move(c));
  for (DumpConfig& c : generated(seed, generated_count)) configs.push_back(std::move(c));
  std::vector<Check> out;
  for (DumpConfig& c : configs) {
    std::string name = c.name;
    out.push_back(Check::typed(kGroup, std::move(name),
                               [c = std::move(c)](Implementation& target) { return compare_config(target, c); }));
  }
  return out;
}

}  // namespace ih::gate
