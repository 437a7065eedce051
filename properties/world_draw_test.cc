// draw_world_load_case: `roundtrip --seed S` must name one scenario per seed, laid out on exactly
// the ranks asked for, within what the synthetic model can split.
#include <gtest/gtest.h>
#include <algorithm>
#include <set>

#include "models/gpt_layer_maps.h"
#include "properties/world_draw.h"

namespace ih::props {
namespace {

std::int64_t ranks(const WorldSplit& w) { return w.tp * w.pp * w.ep * w.dp; }

TEST(WorldDraw, SameSeedSameCase) {
  const auto a = draw_world_load_case(42, 4, 2), b = draw_world_load_case(42, 4, 2);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->pattern, b->pattern);
  EXPECT_EQ(a->num_experts, b->num_experts);
  EXPECT_EQ(ranks(a->save), ranks(b->save));
  EXPECT_EQ(a->save.pp, b->save.pp);
  EXPECT_EQ(a->load.tp, b->load.tp);
}

TEST(WorldDraw, EveryDrawFitsItsWorldsAndTheModel) {
  std::set<std::string> patterns;
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    for (const auto& [a, b] : {std::pair{4, 2}, std::pair{2, 4}, std::pair{8, 1}}) {
      const auto d = draw_world_load_case(seed, a, b);
      ASSERT_TRUE(d.ok()) << seed;
      EXPECT_EQ(ranks(d->save), a) << seed;
      EXPECT_EQ(ranks(d->load), b) << seed;
      const auto maps = gpt_compatible_layer_maps(d->pattern);
      ASSERT_TRUE(maps.ok()) << d->pattern;
      EXPECT_EQ(maps->num_gpt_layers % d->save.pp, 0) << seed;
      EXPECT_EQ(static_cast<std::int64_t>(d->pattern.size()) % d->load.pp, 0) << seed;
      const bool moe = d->pattern.find('E') != std::string::npos;
      EXPECT_EQ(moe, d->num_experts > 0) << d->pattern;
      if (moe) {
        EXPECT_EQ(d->num_experts % std::max(d->save.ep, d->load.ep), 0) << seed;
      }
      EXPECT_FALSE(d->gated && moe) << seed;
      patterns.insert(d->pattern);
    }
  }
  EXPECT_GT(patterns.size(), 50u);  // the generators, not a short list
}

TEST(WorldDraw, OtherWorldSizesAreRefused) {
  const auto d = draw_world_load_case(1, 3, 2);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.error().kind, ErrorKind::invalid_argument);
}

}  // namespace
}  // namespace ih::props
