// Addendum F and G pinned on worked examples: a gather-saved in_proj loaded at another GTP size by
// both designs, and the E = 1 expert object whose shape looks like the hybrid placeholder.
#include <gtest/gtest.h>

#include "models/checkpoint_model.h"
#include "models/flat_state.h"
#include "models/retarget.h"
#include "models/synthetic_model.h"

namespace ih {
namespace {

GtpFactoryParams review_rank(std::int64_t g, std::int64_t gtp, std::int64_t pad, GtpSaveDesign design) {
  GtpFactoryParams p;
  p.key = "w";
  p.layout = gdp_in_proj_layout({10, 3, 2, 3}).value();  // D = 60 (spec 4.9)
  p.tp_size = 1, p.gtp_size = gtp, p.gtp_rank = g, p.pad_alignment = pad, p.cols = 2, p.dtype = "bfloat16";
  p.replica_id = ReplicaId::tuple({0, 0, design == GtpSaveDesign::gather ? g : 0});
  const GtpPadding padding = gtp_padding_of(p).value();
  p.shard = TensorValue::of_storage(100 + static_cast<std::uint64_t>(g), {padding.shard_rows, 2}, "bfloat16");
  p.gather_storage = 7;  // the all-gathered (D, C) buffer
  return p;
}

// Saved with the gather design at G = 2, p = 16 (only g = 0 writes the gathered 60 rows); loaded at
// G = 4, p = 32 (R = 32): rank 1 gets gathered rows 32..59 then 4 zero rows, by either design.
TEST(AddendumF, GatherSavedLoadsAtAnotherGtpByBothDesigns) {
  std::vector<StateNode> trees;
  for (std::int64_t g = 0; g < 2; ++g)
    trees.push_back(StateNode(StateDict{
        {std::string("w"),
         StateNode(make_gtp_factory(GtpSaveDesign::gather, review_rank(g, 2, 16, GtpSaveDesign::gather)).value())}}));
  const Checkpoint saved = save_checkpoint(trees).value();
  for (GtpSaveDesign design : {GtpSaveDesign::shard_split, GtpSaveDesign::gather}) {
    const StateNode request(
        StateDict{{std::string("w"), StateNode(make_gtp_factory(design, review_rank(1, 4, 32, design)).value())}});
    const StateNode loaded = load_checkpoint(saved, request, LoadOrder::serialization_load).value();
    const TensorValue& w = std::get<TensorValue>(loaded.find(std::string("w"))->leaf());
    std::vector<RowBlock> joined;
    for (const RowBlock& b : w.blocks)
      if (!joined.empty() && joined.back().storage == b.storage &&
          (b.is_zero() || joined.back().first_row + joined.back().rows == b.first_row))
        joined.back().rows += b.rows;
      else if (b.rows > 0)
        joined.push_back(b);
    EXPECT_EQ(joined, (std::vector<RowBlock>{{7, 32, 28}, {0, 0, 4}})) << to_string(design);
  }
}

// E = 1: the hybrid expert object (1,)/(0,) is replaced by the layer axis like a placeholder, so it
// asks shard_1_2 where the GPT save of the same layer wrote shard_1.0_2.1.
TEST(AddendumG, SingleExpertObjectLooksLikeThePlaceholder) {
  ModelConfig c;
  c.num_experts = 1;
  StateNode hybrid = hybrid_sharded_state_dict(c, "*E*E", {}).value();
  ASSERT_TRUE(retarget_sharded_state_dict(hybrid, gpt_compatible_layer_maps(std::string_view("*E*E")).value()).ok());
  const StateNode gpt = gpt_sharded_state_dict(c, 2, {}).value();
  std::set<std::string> hybrid_keys, gpt_keys;
  for (const FlatEntry& e : flatten(hybrid))
    if (const auto* o = std::get_if<ShardedObject>(&e.entry);
        o && o->key.find("experts.linear_fc1") != std::string::npos)
      hybrid_keys.insert(o->unique_key());
  for (const FlatEntry& e : flatten(gpt))
    if (const auto* o = std::get_if<ShardedObject>(&e.entry);
        o && o->key.find("experts.linear_fc1") != std::string::npos)
      gpt_keys.insert(o->unique_key());
  EXPECT_TRUE(hybrid_keys.count("decoder.layers.mlp.experts.experts.linear_fc1._extra_state/shard_1_2"))
      << *hybrid_keys.begin();
  EXPECT_TRUE(gpt_keys.count("decoder.layers.mlp.experts.experts.linear_fc1._extra_state/shard_1.0_2.1"))
      << *gpt_keys.begin();
}

}  // namespace
}  // namespace ih
