#include "harness/roundtrip/roundtrip_plan.h"

#include <fstream>

#include "codec/json_codec.h"
#include "models/flat_state.h"
#include "models/gpt_layer_maps.h"

namespace ih {
namespace {

Status write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text << "\n";
  out.close();
  if (!out) return make_error(seam_kind::harness_error, "cannot write " + path.string());
  return Ok{};
}

std::string rank_file(const char* side, std::int64_t rank) {
  return std::string(side) + "_rank_" + std::to_string(rank) + ".json";
}

}  // namespace

ModelConfig RoundtripScenario::small_config() {
  ModelConfig c;
  c.hidden = 64;
  c.num_attention_heads = 8;
  c.num_query_groups = 8;
  c.kv_channels = 8;
  c.ffn_hidden = 128;
  c.add_bias = true;
  c.vocab = 256;
  c.mamba_heads = 8;
  c.mamba_head_dim = 8;
  c.mamba_groups = 8;
  c.mamba_state = 8;
  return c;
}

Result<std::int64_t> write_roundtrip_inputs(const RoundtripScenario& s, const std::filesystem::path& dir) {
  auto maps = gpt_compatible_layer_maps(s.pattern);
  if (!maps.ok()) return maps.error().with_context("pattern '" + s.pattern + "'");
  const std::int64_t layers = maps->num_gpt_layers;
  if (s.save_tp < 1 || s.save_pp < 1 || s.load_tp < 1 || s.load_pp < 1)
    return make_error(ErrorKind::invalid_argument, "TP and PP sizes must be at least 1");
  if (layers % s.save_pp != 0)
    return make_error(ErrorKind::invalid_argument, "the GPT model has " + std::to_string(layers) +
                                                       " layers, not divisible by --save-pp " +
                                                       std::to_string(s.save_pp));
  ModelConfig config = s.config;
  config.gated_mlp = s.gated;
  const OptimizerStates optimizer = s.optimizer ? OptimizerStates::adam() : OptimizerStates{};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return make_error(seam_kind::harness_error, "cannot create " + dir.string() + ": " + ec.message());

  json::Json save_files = json::Json::array(), load_files = json::Json::array();
  for (std::int64_t r = 0; r < s.save_ranks(); ++r) {
    RankLayout l;
    l.tp = s.save_tp, l.tp_rank = r % s.save_tp, l.pp = s.save_pp, l.pp_rank = r / s.save_tp;
    auto tree = gpt_sharded_state_dict(config, layers, l, optimizer);
    if (!tree.ok()) return tree.error().with_context("GPT state dict, save rank " + std::to_string(r));
    IH_TRY_STATUS(write_text(dir / rank_file("save", r), json::dump(json::entries_to_json(flatten(*tree)))));
    save_files.push_back(rank_file("save", r));
  }
  for (std::int64_t r = 0; r < s.load_ranks(); ++r) {
    RankLayout l;
    l.tp = s.load_tp, l.tp_rank = r % s.load_tp, l.pp = s.load_pp, l.pp_rank = r / s.load_tp;
    auto tree = hybrid_sharded_state_dict(config, s.pattern, l, optimizer);
    if (!tree.ok()) return tree.error().with_context("hybrid state dict, load rank " + std::to_string(r));
    IH_TRY_STATUS(write_text(dir / rank_file("load", r), json::dump(json::entries_to_json(flatten(*tree)))));
    load_files.push_back(rank_file("load", r));
  }
  const json::Json plan{{"pattern", s.pattern},
                        {"num_gpt_layers", layers},
                        {"save", {{"tp", s.save_tp}, {"pp", s.save_pp}, {"files", save_files}}},
                        {"load", {{"tp", s.load_tp}, {"pp", s.load_pp}, {"files", load_files}}},
                        {"gated", s.gated},
                        {"optimizer", s.optimizer}};
  IH_TRY_STATUS(write_text(dir / "plan.json", plan.dump(2)));
  return layers;
}

}  // namespace ih
