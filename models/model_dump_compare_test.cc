#include "models/model_dump_compare.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace ih {
namespace {

std::vector<FlatEntry> reference_dump(const ModelDumpSpec& spec, std::int64_t rank) {
  auto dict = model_state_dict(spec, rank);
  EXPECT_TRUE(dict.ok()) << dict.error().message;
  return flatten(StateNode(std::move(*dict)));
}

ModelDumpSpec gpt(std::int64_t experts = 0, bool gated = false, std::int64_t tp = 1) {
  ModelDumpSpec spec;
  spec.config.num_experts = experts;
  spec.config.gated_mlp = gated;
  spec.sizes.tp = tp;
  return spec;
}

ModelDumpSpec hybrid(const std::string& pattern, std::int64_t tp = 1, std::int64_t pp = 1) {
  ModelDumpSpec spec;
  spec.model = ModelKind::hybrid;
  spec.pattern = pattern;
  spec.sizes.tp = tp;
  spec.sizes.pp = pp;
  return spec;
}

ShardedTensor& first_tensor(std::vector<FlatEntry>& entries, const std::string& key_part = "") {
  for (FlatEntry& e : entries)
    if (auto* t = std::get_if<ShardedTensor>(&e.entry); t && t->key.find(key_part) != std::string::npos) return *t;
  ADD_FAILURE() << "no tensor with '" << key_part << "'";
  static ShardedTensor none;
  return none;
}

std::vector<std::string> differences(const std::vector<FlatEntry>& a, const std::vector<FlatEntry>& b) {
  auto out = dump_differences(a, b);
  EXPECT_TRUE(out.ok()) << out.error().message;
  return out.ok() ? *out : std::vector<std::string>{"error"};
}

TEST(ModelDumpCompare, ADumpAgreesWithItselfFactoriesIncluded) {
  for (const ModelDumpSpec& spec : {gpt(), gpt(4, true, 2), hybrid("M*-M*-", 2)}) {
    const auto dump = reference_dump(spec, 1 % world_size(spec.sizes));
    EXPECT_TRUE(differences(dump, dump).empty());
  }
}

TEST(ModelDumpCompare, EachComparedFieldChangedInOneEntryIsADifference) {
  const auto base = reference_dump(gpt(), 0);
  const std::vector<std::pair<std::string, std::function<void(ShardedTensor&)>>> edits = {
      {"key", [](ShardedTensor& t) { t.key = "planted.key"; }},
      {"global_shape", [](ShardedTensor& t) { t.global_shape.back() += 1; }},
      {"local_shape", [](ShardedTensor& t) { t.local_shape.back() += 1; }},
      {"global_offset", [](ShardedTensor& t) { t.global_offset.back() += 1; }},
      {"axis_fragmentations", [](ShardedTensor& t) { t.axis_fragmentations->back() += 1; }},
      {"axis_fragmentations uneven", [](ShardedTensor& t) { t.axis_fragmentations.reset(); }},
      {"replica_id", [](ShardedTensor& t) { t.replica_id.coords.back() += 1; }},
      {"replica_id scalar", [](ShardedTensor& t) { t.replica_id.is_tuple = !t.replica_id.is_tuple; }},
      {"allow_shape_mismatch", [](ShardedTensor& t) { t.allow_shape_mismatch = !t.allow_shape_mismatch; }}};
  for (const auto& [field, edit] : edits) {
    auto planted = base;
    edit(first_tensor(planted, "linear_qkv.weight"));
    const auto found = differences(base, planted);
    EXPECT_EQ(found.size(), 2u) << field;  // the reference's row and the target's
  }
  auto kind = base;  // the kind: the same key as an object
  for (FlatEntry& e : kind)
    if (auto* t = std::get_if<ShardedTensor>(&e.entry); t && t->key.find("linear_qkv.weight") != std::string::npos) {
      e.entry = ShardedObject{t->key, std::nullopt, t->global_shape, t->global_offset, t->replica_id};
      break;
    }
  EXPECT_EQ(differences(base, kind).size(), 2u);
  auto dropped = base;  // an entry missing on one side
  dropped.pop_back();
  EXPECT_EQ(differences(base, dropped).size(), 1u);
}

TEST(ModelDumpCompare, AFactoryIsComparedByItsBuiltPieces) {
  const auto base = reference_dump(gpt(0, true, 2), 1);
  auto planted = base;
  for (FlatEntry& e : planted)  // the swiglu factory's pieces replaced by its unbuilt original
    if (const auto* f = std::get_if<ShardedTensorFactory>(&e.entry)) {
      const auto recipe = f->builder->recipe(*f);
      ASSERT_TRUE(recipe.has_value());
      e.entry = recipe->original;
    }
  const auto found = differences(base, planted);
  ASSERT_FALSE(found.empty());
  EXPECT_NE(found.front().find("factory/tensor"), std::string::npos) << found.front();
}

TEST(ModelDumpCompare, PathsAreNotCompared) {
  const auto base = reference_dump(gpt(), 0);
  auto renamed = base;
  renamed.front().path = "model.elsewhere";
  EXPECT_TRUE(differences(base, renamed).empty());
}

/// The keys of the pieces the dump's split factories build under `key_part` (their built pieces), sorted.
std::vector<std::string> split_piece_keys(const std::vector<FlatEntry>& entries, const std::string& key_part) {
  std::vector<std::string> out;
  for (const FlatEntry& e : entries) {
    const auto* f = std::get_if<ShardedTensorFactory>(&e.entry);
    if (!f || f->key.find(key_part) == std::string::npos) continue;
    auto built = f->build();
    EXPECT_TRUE(built.ok()) << built.error().message;
    for (const FlatEntry& piece : flatten(*built)) out.push_back(std::get<ShardedTensor>(piece.entry).key);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// MambaMixer saves in_proj and conv1d through `_split_tensor_factory` (ssm/mamba_mixer.py): the
// reference does too, at GTP 1 and under GTP (conv1d; the in_proj is the gather factory, addendum E), so
// no explained rule merges them back.
TEST(ModelDumpCompare, TheMambaMixerSavesSplitFactoriesAsMegatronsDoes) {
  for (std::int64_t gtp : {1, 2}) {
    ModelDumpSpec spec = hybrid("M*", 2);
    spec.sizes.gtp = gtp;
    const auto dump = reference_dump(spec, 1);
    const std::string layer = "decoder.layers.0.mixer.";
    EXPECT_EQ(
        split_piece_keys(dump, layer + "in_proj.weight"),
        (std::vector<std::string>{layer + "in_proj.weight.B", layer + "in_proj.weight.C", layer + "in_proj.weight.dt",
                                  layer + "in_proj.weight.x", layer + "in_proj.weight.z"}))
        << "gtp " << gtp;
    EXPECT_EQ(
        split_piece_keys(dump, layer + "conv1d.weight"),
        (std::vector<std::string>{layer + "conv1d.weight.B", layer + "conv1d.weight.C", layer + "conv1d.weight.x"}));
    EXPECT_EQ(split_piece_keys(dump, layer + "conv1d.bias"),
              (std::vector<std::string>{layer + "conv1d.bias.B", layer + "conv1d.bias.C", layer + "conv1d.bias.x"}));
    for (const FlatEntry& e : dump)
      if (const auto* t = std::get_if<ShardedTensor>(&e.entry))
        EXPECT_TRUE(t->key.find("in_proj.weight") == std::string::npos && t->key.find("conv1d") == std::string::npos)
            << t->key << " is a plain tensor";
  }
}

TEST(ModelDumpCompare, OptimizerCommonStateIsDroppedAndTheRuleIsStaleWithoutIt) {
  ModelDumpSpec spec = gpt();
  spec.optimizer = true;
  const std::int64_t rank = 0;
  const auto reference = reference_dump(spec, rank);
  auto real = reference;
  real.push_back({"optimizer.optimizer.param_groups.0.lr", PlainValue{"0.001"}});
  real.push_back({"optimizer.1.optimizer.param_groups.0.step", PlainValue{"1"}});
  EXPECT_EQ(differences(reference, real).size(), 2u);
  auto compared = compare_model_dumps(spec, rank, reference, real, true);
  ASSERT_TRUE(compared.ok());
  EXPECT_TRUE(compared->differences.empty()) << compared->differences.front();
  ASSERT_EQ(compared->explained.size(), 1u);
  EXPECT_EQ(compared->explained[0].second, 2);
  auto without = compare_model_dumps(spec, rank, reference, reference, true);
  ASSERT_TRUE(without.ok());
  EXPECT_EQ(without->stale(), std::vector{DumpExplanation::optimizer_common_state});
}

/// The entry of kind T keyed `key` in a dump.
template <class T>
const T& keyed(const std::vector<FlatEntry>& entries, const std::string& key) {
  for (const FlatEntry& e : entries)
    if (const auto* t = std::get_if<T>(&e.entry); t && t->key == key) return *t;
  ADD_FAILURE() << "no entry keyed " << key;
  static const T none;
  return none;
}
const ShardedTensor& tensor_keyed(const std::vector<FlatEntry>& entries, const std::string& key) {
  return keyed<ShardedTensor>(entries, key);
}

// Megatron GTP-wraps every parallel linear (make_tp_sharded_tensor_for_checkpoint and
// make_sharded_tensors_for_checkpoint_with_gtp_remat): worked example GPT at TP 2 x GTP 2, rank 3 (t 1, g 1,
// d 0), hidden 256, FFN 1024, qkv rows (8 + 2 x 8) x 32 = 768, no padding (p = 16).
TEST(ModelDumpCompare, UnderGtpEveryParallelLinearIsShardedAsMegatronShardsIt) {
  ModelDumpSpec spec = gpt(0, false, 2);
  spec.sizes.gtp = 2;
  spec.config.add_bias = true;
  const auto dump = reference_dump(spec, 3);
  // Column-parallel: TP-local rows 384 split over G, one composite axis (t*G + g = 3 of T*G = 4); the layer axis first.
  const ShardedTensor& qkv = tensor_keyed(dump, "decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(qkv.local_shape, (Shape{192, 256}));
  EXPECT_EQ(qkv.global_shape, (Shape{2, 768, 256}));
  EXPECT_EQ(qkv.global_offset, (Shape{0, 576, 0}));
  EXPECT_EQ(qkv.replica_id.to_string(), "(0, 0, 0)");
  // Row-parallel: TP on axis 1 (t 1 of 2), GTP on axis 0 (g 1 of 2).
  const ShardedTensor& fc2 = tensor_keyed(dump, "decoder.layers.mlp.linear_fc2.weight");
  EXPECT_EQ(fc2.local_shape, (Shape{128, 512}));
  EXPECT_EQ(fc2.global_offset, (Shape{0, 128, 512}));
  EXPECT_EQ(*fc2.axis_fragmentations, (Shape{2, 2, 2}));
  // A GTP module's bias: the GTP rank in the TP element, g for a TP-split bias, t*G + g for a replicated one.
  EXPECT_EQ(tensor_keyed(dump, "decoder.layers.self_attention.linear_qkv.bias").replica_id.to_string(), "(0, 1, 0)");
  EXPECT_EQ(tensor_keyed(dump, "decoder.layers.mlp.linear_fc2.bias").replica_id.to_string(), "(0, 3, 0)");
  EXPECT_EQ(keyed<ShardedObject>(dump, "decoder.layers.mlp.linear_fc1._extra_state").replica_id.to_string(),
            "(0, 3, 0)");
  // Outside GTP modules (a norm): saved over the GTP-inclusive DP group, rank g + G*d = 1.
  EXPECT_EQ(tensor_keyed(dump, "decoder.final_layernorm.weight").replica_id.to_string(), "(0, 1, 1)");
  // The embedding: the composite axis too, allow_shape_mismatch as ever.
  const ShardedTensor& embedding = tensor_keyed(dump, "embedding.word_embeddings.weight");
  EXPECT_EQ(embedding.local_shape, (Shape{256, 256}));
  EXPECT_EQ(embedding.global_offset, (Shape{768, 0}));
  EXPECT_TRUE(embedding.allow_shape_mismatch);
  // The last stage's copy of tied embeddings (PP 2, rank 7: t 1, g 1, d 0, p 1): GTP-sharded, with
  // LanguageModule's own replica id (1, 0, GTP-inclusive DP rank g + G*d).
  ModelDumpSpec tied = spec;
  tied.config.tied_embeddings = true, tied.sizes.pp = 2;
  const auto last_stage = reference_dump(tied, 7);
  const ShardedTensor& copy = tensor_keyed(last_stage, "embedding.word_embeddings.weight");
  EXPECT_EQ(copy.global_offset, (Shape{768, 0}));
  EXPECT_EQ(copy.replica_id.to_string(), "(1, 0, 1)");
  // Rows that do not fill G x p are padded: the saved global shape is the padded one, allow_shape_mismatch.
  spec.config.pad_alignment = 64;
  const auto aligned = reference_dump(spec, 3);
  const ShardedTensor& unpadded = tensor_keyed(aligned, "decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(unpadded.local_shape, (Shape{192, 256}));  // 384 rows: already a multiple of 2 x 64
  EXPECT_FALSE(unpadded.allow_shape_mismatch);
  spec.config.pad_alignment = 256;
  const auto padded = reference_dump(spec, 3);
  const ShardedTensor& pad = tensor_keyed(padded, "decoder.layers.self_attention.linear_qkv.weight");
  EXPECT_EQ(pad.local_shape, (Shape{256, 256}));  // 384 rows padded to 512
  EXPECT_EQ(pad.global_shape, (Shape{2, 1024, 256}));
  EXPECT_TRUE(pad.allow_shape_mismatch);
}

TEST(ModelDumpCompare, RulesAreExpectedWhereTheirConfigurationHoldsThem) {
  EXPECT_TRUE(expected_explanations(gpt(4)).empty());
  EXPECT_TRUE(expected_explanations(hybrid("M*")).empty());
  ModelDumpSpec with_optimizer = hybrid("M*");
  with_optimizer.optimizer = true, with_optimizer.sizes.gtp = 2;
  EXPECT_EQ(expected_explanations(with_optimizer), std::vector{DumpExplanation::optimizer_common_state});
}

// A difference names the `model dump` flags that print it: a DP or CP size asked for is one of them.
TEST(ModelDumpCompare, FlagsNameTheDpAndCpSizes) {
  ModelDumpSpec spec{.model = ModelKind::hybrid, .pattern = "M-"};
  spec.sizes.gtp = 2, spec.sizes.dp = 2, spec.sizes.cp = 2;
  EXPECT_EQ(model_dump_flags(spec), "--model hybrid --pattern 'M-' --gtp 2 --dp 2 --cp 2");
}

}  // namespace
}  // namespace ih
