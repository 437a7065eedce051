// Retargeting throughput on a 96-GPT-layer hybrid model at TP=8 with Adam optimizer state.
// Baseline measured in the same run: deep-copying the same state dicts (the floor any
// in-place pass over the tree pays), so the printed ratio is machine-independent-ish.
#include <benchmark/benchmark.h>

#include <string>

#include "models/flat_state.h"
#include "models/retarget.h"
#include "models/synthetic_model.h"

namespace {

/// 96 GPT layers as '*-' blocks with a Mamba layer before every second block: 240 symbols.
std::string production_pattern() {
  std::string out;
  for (int layer = 0; layer < 96; ++layer) out += (layer % 2 == 0 ? "M*-" : "*-");
  return out;
}

std::vector<ih::StateNode> all_tp_ranks() {
  ih::ModelConfig config;
  config.hidden = 8192, config.num_attention_heads = 64, config.num_query_groups = 8, config.kv_channels = 128;
  config.ffn_hidden = 28672, config.gated_mlp = true, config.vocab = 131072;
  config.mamba_heads = 128, config.mamba_head_dim = 64, config.mamba_groups = 8, config.mamba_state = 128;
  std::vector<ih::StateNode> ranks;
  for (std::int64_t t = 0; t < 8; ++t)
    ranks.push_back(ih::hybrid_sharded_state_dict(config, production_pattern(), {.tp = 8, .tp_rank = t},
                                                  ih::OptimizerStates::adam())
                        .value());
  return ranks;
}

std::size_t entry_count(const std::vector<ih::StateNode>& ranks) {
  std::size_t n = 0;
  for (const auto& r : ranks) n += ih::flatten(r).size();
  return n;
}

void BM_LayerMaps(benchmark::State& state) {
  const std::string pattern = production_pattern();
  for (auto _ : state) benchmark::DoNotOptimize(ih::gpt_compatible_layer_maps(std::string_view(pattern)));
  state.SetItemsProcessed(state.iterations());
}

void BM_CopyBaseline(benchmark::State& state) {
  const auto ranks = all_tp_ranks();
  for (auto _ : state) {
    auto copy = ranks;
    benchmark::DoNotOptimize(copy);
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(entry_count(ranks)));
}

void BM_Retarget(benchmark::State& state) {
  const auto ranks = all_tp_ranks();
  const std::string pattern = production_pattern();
  for (auto _ : state) {
    auto copy = ranks;
    const auto maps = ih::gpt_compatible_layer_maps(std::string_view(pattern)).value();
    for (auto& rank : copy) benchmark::DoNotOptimize(ih::retarget_sharded_state_dict(rank, maps));
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(entry_count(ranks)));
}

BENCHMARK(BM_LayerMaps);
BENCHMARK(BM_CopyBaseline)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Retarget)->Unit(benchmark::kMillisecond);

/// Prints retarget time over copy time after the runs, so the ratio sits next to the figures.
class RatioReporter : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs) {
      if (run.benchmark_name() == "BM_CopyBaseline") copy_ = run.GetAdjustedRealTime();
      if (run.benchmark_name() == "BM_Retarget") retarget_ = run.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  void Finalize() override {
    ConsoleReporter::Finalize();
    if (copy_ > 0 && retarget_ > 0)
      std::printf("ratio retarget(copy + retarget) / copy baseline: %.2f\n", retarget_ / copy_);
  }

 private:
  double copy_ = 0, retarget_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  RatioReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();
  return 0;
}
