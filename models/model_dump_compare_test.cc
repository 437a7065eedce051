#include "models/model_dump_compare.h"

#include <gtest/gtest.h>

#include "models/split_factory.h"

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

/// The reference's hybrid dump with its Mamba in_proj and conv1d saved the way Megatron does outside
/// GTP: split factories over the Mamba sections.
std::vector<FlatEntry> as_split_factories(std::vector<FlatEntry> entries, std::int64_t tp) {
  const ModelConfig c;
  const MambaDims dims{c.mamba_heads * c.mamba_head_dim / tp, c.mamba_groups * c.mamba_state / tp, c.mamba_heads / tp};
  for (FlatEntry& e : entries) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    if (!t || t->key.find(".mixer.") == std::string::npos) continue;
    const bool in_proj = t->key.ends_with("in_proj.weight");
    if (!in_proj && !t->key.ends_with("conv1d.weight") && !t->key.ends_with("conv1d.bias")) continue;
    auto layout = in_proj ? mamba_in_proj_layout(dims) : mamba_conv_layout(dims);
    auto factory = make_split_factory(*t, *layout);
    EXPECT_TRUE(factory.ok()) << factory.error().message;
    e.entry = *factory;
  }
  return entries;
}

TEST(ModelDumpCompare, MambaSplitFactoriesAreMergedBackAndTheRuleIsStaleWithoutThem) {
  const ModelDumpSpec spec = hybrid("M*-M*-", 2);
  for (std::int64_t rank : {0, 1}) {
    const auto reference = reference_dump(spec, rank);
    const auto real = as_split_factories(reference, 2);
    EXPECT_FALSE(differences(reference, real).empty());
    auto compared = compare_model_dumps(spec, rank, reference, real, true);
    ASSERT_TRUE(compared.ok());
    EXPECT_TRUE(compared->differences.empty()) << compared->differences.front();
    ASSERT_EQ(compared->explained.size(), 1u);
    EXPECT_EQ(compared->explained[0].second, 6);  // two Mamba layers: in_proj, conv1d weight and bias
    EXPECT_TRUE(compared->stale().empty());
    auto unsplit = compare_model_dumps(spec, rank, reference, reference, true);
    ASSERT_TRUE(unsplit.ok());
    EXPECT_EQ(unsplit->stale(), std::vector{DumpExplanation::mamba_split_factory});
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

TEST(ModelDumpCompare, GtpShardedLinearsAndReplicaIdsAreMappedBackAndTheRuleIsStaleWithoutThem) {
  ModelDumpSpec spec = gpt();
  spec.sizes.gtp = 2;
  for (std::int64_t rank : {0, 1}) {  // GTP rank = rank (TP 1)
    const auto reference = reference_dump(spec, rank);
    auto real = reference;
    // Megatron's form: fc2's weight as one of G = 2 shards of its rows, the GTP rank in its offset.
    ShardedTensor& fc2 = first_tensor(real, "linear_fc2.weight");
    const std::size_t axis = fc2.global_shape.size() - 2, local_axis = fc2.local_shape.size() - 2;
    fc2.local_shape[local_axis] /= 2;
    fc2.global_offset[axis] = fc2.global_offset[axis] * 2 + rank * fc2.local_shape[local_axis];
    (*fc2.axis_fragmentations)[axis] *= 2;
    EXPECT_FALSE(differences(reference, real).empty());
    auto compared = compare_model_dumps(spec, rank, reference, real, true);
    ASSERT_TRUE(compared.ok());
    EXPECT_TRUE(compared->differences.empty()) << compared->differences.front();
    EXPECT_TRUE(compared->stale().empty());
    // The other GTP rank's shard is not this rank's: left as it is, it differs.
    if (rank == 0) {
      auto other = real;
      first_tensor(other, "linear_fc2.weight").global_offset[axis] += fc2.local_shape[local_axis];
      auto wrong = compare_model_dumps(spec, rank, reference, other, true);
      ASSERT_TRUE(wrong.ok());
      EXPECT_FALSE(wrong->differences.empty());
    }
  }
  auto unmapped = compare_model_dumps(spec, 1, reference_dump(spec, 1), reference_dump(spec, 1), true);
  ASSERT_TRUE(unmapped.ok());
  EXPECT_EQ(unmapped->stale(), std::vector{DumpExplanation::gtp_not_modelled});
}

TEST(ModelDumpCompare, GdpConvPiecesUnderGtpAreUnfoldedAndOtherFactoriesAreNot) {
  ModelDumpSpec spec = hybrid("M*-");
  spec.config.ssm_mixer = "gdp";
  spec.sizes.gtp = 2;
  const std::int64_t rank = 1;  // GTP rank 1 at TP 1: Megatron folds it into the pieces' DP slot, g + G*d = 1
  const auto reference = reference_dump(spec, rank);
  const auto folded = [&](std::int64_t dp_slot) {
    auto real = reference;
    std::int64_t factories = 0;
    for (FlatEntry& e : real)
      if (auto* f = std::get_if<ShardedTensorFactory>(&e.entry); f && f->key.ends_with("mixer.conv1d.weight"))
        f->replica_id.coords[2] = dp_slot, ++factories;
    EXPECT_EQ(factories, 1);
    EXPECT_FALSE(differences(reference, real).empty());
    return real;
  };
  auto compared = compare_model_dumps(spec, rank, reference, folded(1), true);
  ASSERT_TRUE(compared.ok());
  EXPECT_TRUE(compared->differences.empty()) << compared->differences.front();
  EXPECT_TRUE(compared->stale().empty());
  // Another GTP rank's slot (2 = g 0 + G x d 1) is not this rank's fold: left as it is, it differs.
  auto other = compare_model_dumps(spec, rank, reference, folded(2), true);
  ASSERT_TRUE(other.ok());
  EXPECT_FALSE(other->differences.empty());
}

TEST(ModelDumpCompare, RulesAreExpectedWhereTheirConfigurationHoldsThem) {
  EXPECT_TRUE(expected_explanations(gpt(4), reference_dump(gpt(4), 0)).empty());
  EXPECT_TRUE(expected_explanations(gpt(), reference_dump(gpt(), 0)).empty());
  EXPECT_EQ(expected_explanations(hybrid("M*"), reference_dump(hybrid("M*"), 0)),
            std::vector{DumpExplanation::mamba_split_factory});
  EXPECT_TRUE(expected_explanations(hybrid("*-"), reference_dump(hybrid("*-"), 0)).empty());
  // A pipeline stage without a Mamba layer needs no merge, the other stage does.
  const ModelDumpSpec staged = hybrid("*-|M-", 1, 2);
  EXPECT_TRUE(expected_explanations(staged, reference_dump(staged, 0)).empty());
  EXPECT_EQ(expected_explanations(staged, reference_dump(staged, 1)),
            std::vector{DumpExplanation::mamba_split_factory});
}

}  // namespace
}  // namespace ih
