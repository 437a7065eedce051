// Writer-election worlds (spec addendum A) and GPT->Hybrid loads under GTP (addendum H), built by construction: the
// expert sizes are drawn from the divisors of what the dense sizes leave, so every case is a valid world and shrinks
// toward 1.
#include "properties/generators.h"

#include <algorithm>
#include <initializer_list>

namespace ih::props {
namespace gen = rc::gen;

namespace {

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t d = 1; d <= n && d <= 8; ++d)
    if (n % d == 0) out.push_back(d);
  return out;
}

/// `c` with its dense sizes cut down until the world fits `max_ranks`: DP first, then CP, GTP and TP,
/// each to the largest of its generator's values that fits (1 always does).
ElectionCase fit_world(ElectionCase c, std::int64_t max_ranks) {
  const auto largest = [](std::int64_t current, std::initializer_list<std::int64_t> values, std::int64_t limit) {
    std::int64_t best = 1;
    for (std::int64_t v : values)
      if (v <= current && v <= limit) best = std::max(best, v);
    return best;
  };
  c.dp = largest(c.dp, {1, 2, 3}, max_ranks / (c.tp * c.gtp * c.cp));
  c.cp = largest(c.cp, {1, 2}, max_ranks / (c.tp * c.gtp * c.dp));
  c.gtp = largest(c.gtp, {1, 2, 4}, max_ranks / (c.tp * c.cp * c.dp));
  c.tp = largest(c.tp, {1, 2}, max_ranks / (c.gtp * c.cp * c.dp));
  return c;
}

}  // namespace

rc::Gen<ElectionCase> genElectionCase(const WorldCapacity& capacity) {
  const auto unbounded = gen::build<ElectionCase>(
      gen::set(&ElectionCase::tp, genElement<std::int64_t>({1, 2})),
      gen::set(&ElectionCase::gtp, genElement<std::int64_t>({1, 2, 4})),
      gen::set(&ElectionCase::cp, genElement<std::int64_t>({1, 2})),
      gen::set(&ElectionCase::dp, genElement<std::int64_t>({1, 2, 3})),
      gen::set(&ElectionCase::expert, gen::arbitrary<bool>()),
      gen::set(&ElectionCase::source,
               genElement<std::string>({"caller", "globals", "caller_over_foreign_globals", "none"})),
      gen::set(&ElectionCase::rows, gen::inRange<std::int64_t>(1, 100)),
      gen::set(&ElectionCase::pad_alignment, genElement<std::int64_t>({16, 32})),
      gen::set(&ElectionCase::cols, gen::inRange<std::int64_t>(1, 4)));
  const rc::Gen<ElectionCase> dense =
      capacity.max_ranks
          ? gen::map(unbounded, [max = *capacity.max_ranks](const ElectionCase& c) { return fit_world(c, max); })
          : unbounded;
  return gen::mapcat(dense, [](ElectionCase c) {
    const std::int64_t world = c.tp * c.gtp * c.cp * c.dp;
    return gen::mapcat(genElement(divisors(world)), [c, world](std::int64_t etp) {
      return gen::mapcat(genElement(divisors(world / etp)), [c, world, etp](std::int64_t ep) {
        return gen::map(genElement(divisors(world / etp / ep)), [c, etp, ep](std::int64_t egtp) {
          ElectionCase out = c;
          out.etp = etp, out.ep = ep, out.egtp = egtp;
          return out;
        });
      });
    });
  });
}

rc::Gen<LoadCase> genHybridGtpLoadCase() {
  const auto gtp = gen::tuple(genElement<std::string>({"gdp", "mamba"}),
                              genElement<GtpSaveDesign>({GtpSaveDesign::shard_split, GtpSaveDesign::gather}),
                              genElement<std::int64_t>({2, 1, 4, 8}), genElement<std::int64_t>({16, 32}));
  return gen::mapcat(genLoadCase(), [gtp](const LoadCase& c) {
    return gen::map(gtp, [c](const auto& t) {
      LoadCase out = c;
      out.hybrid.config.ssm_mixer = std::get<0>(t), out.hybrid.config.gdp_design = std::get<1>(t);
      out.hybrid.layout.gtp = std::get<2>(t), out.hybrid.config.pad_alignment = std::get<3>(t);
      return out;
    });
  });
}

rc::Gen<LoadCase> genSingleExpertLoadCase() {
  return gen::mapcat(genHybridPattern(3, 'E'), [](const PatternCase& p) {
    std::int64_t layers = 0;
    for (char ch : p.layers) layers += ch == '*';
    std::vector<std::int64_t> pps;
    for (std::int64_t pp : {1, 2, 4})
      if (layers % pp == 0) pps.push_back(pp);
    return gen::map(
        gen::tuple(genTpSize(), genElement<std::int64_t>({1, 2}), genTpSize(), genElement(pps),
                   genElement<std::int64_t>({1, 2}), gen::arbitrary<bool>()),
        [p](const auto& t) {
          LoadCase c;
          c.hybrid.pattern = p.pattern;
          c.hybrid.config.num_experts = 1, c.hybrid.config.gated_mlp = std::get<5>(t);
          c.hybrid.layout.tp = std::get<0>(t), c.hybrid.layout.etp = std::get<1>(t), c.hybrid.layout.pp = p.pp;
          c.gpt_layout.tp = std::get<2>(t), c.gpt_layout.pp = std::get<3>(t), c.gpt_layout.etp = std::get<4>(t);
          return c;
        });
  });
}

}  // namespace ih::props
