// Layout generators: TP/GTP sizes, padding, mixer dimensions, model configs and load scenarios.
#include "properties/generators.h"

#include <algorithm>

namespace ih::props {
namespace gen = rc::gen;

namespace {

/// Small values most of the time (tiny D, rows < p*G), large ones up to production sizes.
rc::Gen<std::int64_t> genDim(std::int64_t small, std::int64_t large) {
  return gen::weightedOneOf<std::int64_t>(
      {{3, gen::inRange<std::int64_t>(1, small + 1)}, {1, gen::inRange<std::int64_t>(1, large + 1)}});
}

/// Divisors of d up to 64: the GTP sizes p = 0 accepts.
std::vector<std::int64_t> small_divisors(std::int64_t d) {
  std::vector<std::int64_t> out;
  for (std::int64_t g = 1; g <= 64 && g <= d; ++g)
    if (d % g == 0) out.push_back(g);
  return out;
}

/// Divisors of d up to `max` (1 always is one).
std::vector<std::int64_t> divisors_up_to(std::int64_t d, std::int64_t max) {
  std::vector<std::int64_t> out;
  for (std::int64_t g : small_divisors(d))
    if (g <= max) out.push_back(g);
  return out;
}

/// The largest G a world of T = `tp` ranks per GTP group leaves room for (64 unbounded).
std::int64_t max_gtp_for(const WorldCapacity& capacity, std::int64_t tp) {
  return capacity.max_ranks ? std::clamp<std::int64_t>(*capacity.max_ranks / tp, 1, 64) : 64;
}

/// G for a layout with D rows: any 1-`max_gtp` with padding, a divisor of D up to it without.
rc::Gen<std::int64_t> genGtpFor(std::int64_t rows, std::int64_t pad_alignment, std::int64_t max_gtp = 64) {
  return pad_alignment > 0 ? genGtpSize(max_gtp) : genElement(divisors_up_to(rows, max_gtp));
}

/// TP sizes of genTpSize that fit `capacity` (1 always does).
rc::Gen<std::int64_t> genTpSizeWithin(const WorldCapacity& capacity) {
  if (!capacity.max_ranks) return genTpSize();
  std::vector<std::int64_t> sizes;
  for (std::int64_t t : {1, 2, 4})
    if (t <= std::max<std::int64_t>(1, *capacity.max_ranks)) sizes.push_back(t);
  return genElement(sizes);
}

std::int64_t rows_of(const GtpCase& c) { return layout_of(c).value().total_rows().value(); }

/// The rank position sizes of a model config (EP/ETP only for MoE).
rc::Gen<RankLayout> genRankSizes(bool moe, std::int64_t pp) {
  const auto expert = moe ? genElement<std::int64_t>({1, 2}) : gen::just<std::int64_t>(1);
  return gen::map(gen::tuple(genTpSize(), expert, expert), [pp](const auto& t) {
    RankLayout l;
    l.tp = std::get<0>(t), l.pp = pp, l.ep = std::get<1>(t), l.etp = std::get<2>(t);
    return l;
  });
}

ModelConfig config_of(std::int64_t experts, bool gated, bool bias) {
  ModelConfig c;
  c.num_experts = experts, c.gated_mlp = gated, c.add_bias = bias;
  return c;
}

}  // namespace

rc::Gen<std::int64_t> genTpSize() { return genElement<std::int64_t>({1, 2, 4}); }

rc::Gen<std::int64_t> genGtpSize() { return genGtpSize(64); }

rc::Gen<std::int64_t> genGtpSize(std::int64_t max_gtp) {
  std::vector<std::int64_t> powers;
  for (std::int64_t g = 1; g <= max_gtp && g <= 64; g *= 2) powers.push_back(g);
  return gen::weightedOneOf<std::int64_t>(
      {{2, genElement(powers)}, {1, gen::inRange<std::int64_t>(1, std::min<std::int64_t>(max_gtp, 64) + 1)}});
}

rc::Gen<std::int64_t> genPadAlignment() { return genElement<std::int64_t>({0, 16, 32}); }

rc::Gen<GdpDims> genMixerDims() {
  return gen::build<GdpDims>(gen::set(&GdpDims::d_inner_local, genDim(8, 10'240)),
                             gen::set(&GdpDims::group_state_local, genDim(4, 5'120)),
                             gen::set(&GdpDims::nheads_local, genDim(4, 128)),
                             gen::set(&GdpDims::householder, gen::inRange<std::int64_t>(1, 5)));
}

rc::Gen<GtpCase> genGtpConfig(GtpSaveDesign design, const WorldCapacity& capacity) {
  const auto base = gen::build<GtpCase>(
      gen::set(&GtpCase::mixer, genElement<std::string>({"gdp", "mamba"})), gen::set(&GtpCase::dims, genMixerDims()),
      gen::set(&GtpCase::tp, genTpSizeWithin(capacity)), gen::set(&GtpCase::pad_alignment, genPadAlignment()),
      gen::set(&GtpCase::cols, gen::inRange<std::int64_t>(1, 5)),
      gen::set(&GtpCase::dtype, genElement<std::string>({"bfloat16", "float32"})),
      gen::set(&GtpCase::design, gen::just(design)), gen::set(&GtpCase::drop, gen::inRange<std::size_t>(0, 1024)));
  return gen::mapcat(base, [capacity](GtpCase c) {
    return gen::map(genGtpFor(rows_of(c), c.pad_alignment, max_gtp_for(capacity, c.tp)), [c](std::int64_t g) {
      GtpCase out = c;
      out.gtp = g;
      return out;
    });
  });
}

rc::Gen<GtpCrossCase> genGtpCross(const WorldCapacity& capacity) {
  const auto save = gen::mapcat(genElement<GtpSaveDesign>({GtpSaveDesign::shard_split, GtpSaveDesign::gather}),
                                [capacity](GtpSaveDesign design) { return genGtpConfig(design, capacity); });
  return gen::mapcat(save, [capacity](const GtpCase& c) {
    return gen::mapcat(genPadAlignment(), [c, capacity](std::int64_t p) {
      return gen::map(genGtpFor(rows_of(c), p, max_gtp_for(capacity, c.tp)), [c, p](std::int64_t g) {
        return GtpCrossCase{c, g, p};
      });
    });
  });
}

rc::Gen<ModelCase> genModelCase() {
  const auto config =
      gen::map(gen::tuple(genElement<std::int64_t>({0, 0, 2, 4}), gen::arbitrary<bool>(), gen::arbitrary<bool>()),
               [](const auto& t) { return config_of(std::get<0>(t), std::get<1>(t), std::get<2>(t)); });
  return gen::mapcat(config, [](const ModelConfig& c) {
    return gen::mapcat(genHybridPattern(3, c.num_experts > 0 ? 'E' : '-'), [c](const PatternCase& p) {
      return gen::map(genRankSizes(c.num_experts > 0, p.pp), [c, p](const RankLayout& l) {
        return ModelCase{p.pattern, c, l};
      });
    });
  });
}

rc::Gen<LoadCase> genLoadCase() {
  return gen::mapcat(genModelCase(), [](const ModelCase& m) {
    std::int64_t layers = 0;
    for (char ch : m.pattern) layers += ch == '*';
    std::vector<std::int64_t> pps;
    for (std::int64_t pp : {1, 2, 4})
      if (layers % pp == 0) pps.push_back(pp);
    return gen::map(gen::mapcat(genElement(pps),
                                [moe = m.config.num_experts > 0](std::int64_t pp) { return genRankSizes(moe, pp); }),
                    [m](const RankLayout& a) {
                      return LoadCase{m, a};
                    });
  });
}

}  // namespace ih::props
