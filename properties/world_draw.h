// A multi-rank round-trip case drawn by the property generators from a seed: what `roundtrip
// --seed S` runs. The header has no RapidCheck, so the round-trip driver stays free of it.
#pragma once

#include <cstdint>
#include <string>

#include "models/result.h"

namespace ih::props {

/// One world split into TP x PP x EP x DP (each a power of two; the product is the world size).
struct WorldSplit {
  std::int64_t tp = 1, pp = 1, ep = 1, dp = 1;
};

/// GPT saved by one world, the hybrid model loading it in another (world sizes may differ).
struct WorldLoadDraw {
  std::string pattern;           // a GPT-compatible hybrid pattern without pipes (pipeline by even split)
  std::int64_t num_experts = 0;  // 0: dense MLP ('-'); else every MLP is MoE ('E')
  bool gated = false;            // SwiGLU fc1 (dense only)
  bool optimizer = false;        // model-space optimizer states beside the weights
  WorldSplit save, load;
};

/// The case for `seed` on worlds of `save_ranks` and `load_ranks` ranks (1, 2, 4 or 8): the pattern
/// comes from genHybridPattern, the MoE/SwiGLU choice from the model generators' set, each world's
/// split from a draw of which dimension every factor of two goes to, kept within what the model
/// allows (PP divides the layers it splits, EP divides the experts, DP <= 2). The same seed and
/// sizes always give the same case. invalid_argument for other world sizes.
Result<WorldLoadDraw> draw_world_load_case(std::uint64_t seed, std::int64_t save_ranks, std::int64_t load_ranks);

}  // namespace ih::props
