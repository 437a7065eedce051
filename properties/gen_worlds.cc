// draw_world_load_case: the property generators, driven by one seed outside a property.
#include <rapidcheck.h>
#include <algorithm>
#include <vector>

#include "properties/generators.h"
#include "properties/world_draw.h"

namespace ih::props {
namespace {

namespace gen = rc::gen;

/// The dimension each factor of two of a world goes to (0 TP, 1 PP, 2 EP, 3 DP); a factor a
/// dimension cannot take goes to TP, which every layer of the small model divides.
rc::Gen<std::vector<int>> genFactorTargets(std::int64_t ranks) {
  std::size_t factors = 0;
  for (std::int64_t n = ranks; n > 1; n /= 2) ++factors;
  return gen::container<std::vector<int>>(factors, gen::inRange(0, 4));
}

WorldSplit split_world(const std::vector<int>& targets, std::int64_t layers_to_split, std::int64_t experts) {
  WorldSplit w;
  for (const int dim : targets) {
    if (dim == 1 && w.pp < 2 && layers_to_split % (w.pp * 2) == 0)
      w.pp *= 2;
    else if (dim == 2 && experts > 0 && experts % (w.ep * 2) == 0)
      w.ep *= 2;
    else if (dim == 3 && w.dp < 2)
      w.dp *= 2;
    else
      w.tp *= 2;
  }
  return w;
}

bool is_world_size(std::int64_t n) { return n == 1 || n == 2 || n == 4 || n == 8; }

}  // namespace

Result<WorldLoadDraw> draw_world_load_case(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks) {
  if (!is_world_size(save_ranks) || !is_world_size(load_ranks))
    return make_error(ErrorKind::invalid_argument, "seeded scenarios need 1, 2, 4 or 8 ranks per world");
  const auto model = gen::mapcat(genElement<std::int64_t>({0, 0, 2, 4}), [](std::int64_t experts) {
    return gen::tuple(gen::just(experts), genHybridPattern(3, experts > 0 ? 'E' : '-'), gen::arbitrary<bool>(),
                      gen::arbitrary<bool>());
  });
  const auto draw = gen::tuple(model, genFactorTargets(save_ranks), genFactorTargets(load_ranks));
  const auto [drawn_model, save_targets, load_targets] = draw(rc::Random(seed)).value();
  const auto& [experts, pattern, gated, optimizer] = drawn_model;
  WorldLoadDraw out;
  out.pattern = pattern.layers;
  out.num_experts = experts;
  out.gated = experts == 0 && gated;
  out.optimizer = optimizer;
  const auto gpt_layers = static_cast<std::int64_t>(std::count(out.pattern.begin(), out.pattern.end(), '*'));
  out.save = split_world(save_targets, gpt_layers, experts);
  out.load = split_world(load_targets, static_cast<std::int64_t>(out.pattern.size()), experts);
  return out;
}

}  // namespace ih::props
