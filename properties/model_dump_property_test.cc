// model_dump_agrees: its generator draws only configurations both sides build, over the whole space the
// issue names, and the property fails on a planted difference, shrunk to the least configuration that shows it.
#include <gtest/gtest.h>

#include <set>

#include "properties/suite.h"
#include "seam/reference_implementation.h"

namespace ih::props {
namespace {

std::vector<ModelDumpCase> sample(const WorldCapacity& capacity, int count) {
  std::vector<ModelDumpCase> out;
  const auto gen = genModelDumpCase(capacity);
  for (int i = 0; i < count; ++i) out.push_back(gen(rc::Random(1000 + i), i % 100).value());
  return out;
}

TEST(ModelDumpProperty, DrawsValidConfigurationsAcrossTheSpaceWithinTheWorld) {
  std::set<std::string> seen;
  for (const ModelDumpCase& c : sample({.max_model_ranks = 8}, 400)) {
    const ModelDumpSpec& s = c.spec;
    ASSERT_TRUE(validate_model_dump(s, c.rank).ok()) << c << ": " << validate_model_dump(s, c.rank).error().message;
    ASSERT_LE(world_size(s.sizes), 8) << c;
    if (s.model == ModelKind::hybrid) seen.insert("hybrid");
    if (s.model == ModelKind::hybrid && s.pattern.find('E') != std::string::npos) seen.insert("hybrid moe");
    if (s.config.ssm_mixer == "gdp" && s.pattern.find('M') != std::string::npos) seen.insert("gdp mixers");
    if (s.config.ssm_mixer == "gdp" && s.sizes.gtp > 1) seen.insert("gdp gtp");
    if (s.model == ModelKind::hybrid && std::count(s.pattern.begin(), s.pattern.end(), '|') + 1 > s.sizes.pp)
      seen.insert("virtual stages");
    if (s.model == ModelKind::gpt && s.config.num_experts == 1) seen.insert("gpt one expert");
    for (const auto& [what, size] : {std::pair{"tp", s.sizes.tp},
                                     {"pp", s.sizes.pp},
                                     {"ep", s.sizes.ep},
                                     {"etp", s.sizes.etp},
                                     {"gtp", s.sizes.gtp}})
      if (size > 1) seen.insert(what);
    if (s.sizes.tp == 4) seen.insert("tp 4");
    if (s.optimizer) seen.insert(to_string(s.optimizer_kind));
    if (s.sizes.gtp > 1 && s.optimizer) seen.insert("gtp optimizer");
    ASSERT_FALSE(s.sizes.gtp > 1 && s.config.gated_mlp) << c;
    ASSERT_FALSE(s.sizes.gtp > 1 && s.optimizer && s.model == ModelKind::hybrid) << c;
    if (s.config.gated_mlp && s.config.tied_embeddings && s.config.layer_norm) seen.insert("gated tied layernorm");
    if (c.rank > 0) seen.insert("rank > 0");
    if (s.config.add_bias && s.config.gated_mlp) seen.insert("bias gated");
    if (s.config.add_bias && s.config.num_experts > 0) seen.insert("bias moe");
  }
  for (const char* what : {"hybrid",
                           "hybrid moe",
                           "gdp mixers",
                           "gdp gtp",
                           "virtual stages",
                           "gpt one expert",
                           "tp",
                           "pp",
                           "ep",
                           "etp",
                           "gtp",
                           "tp 4",
                           "distributed",
                           "float16",
                           "fp32",
                           "gtp optimizer",
                           "gated tied layernorm",
                           "rank > 0",
                           "bias gated",
                           "bias moe"})
    EXPECT_TRUE(seen.count(what)) << "never drawn: " << what;
}

TEST(ModelDumpProperty, UnboundedDrawsAreValidToo) {
  for (const ModelDumpCase& c : sample({}, 200)) ASSERT_TRUE(validate_model_dump(c.spec, c.rank).ok()) << c;
}

/// The reference with one planted difference: GTP ranks other than 0 mark their tensors a DP replica
/// (the bug of the Megatron-side mutant gtp_replica_id_gtp_inclusive_dp).
class GtpReplicaFromGtpRank : public ReferenceImplementation {
 public:
  Result<std::vector<FlatEntry>> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) override {
    IH_TRY_ASSIGN(entries, ReferenceImplementation::model_state_dict(spec, rank));
    const std::int64_t gtp_rank = rank / spec.sizes.tp % spec.sizes.gtp;
    for (FlatEntry& e : entries)
      if (auto* t = std::get_if<ShardedTensor>(&e.entry); t && gtp_rank > 0 && t->replica_id.coords.size() == 3)
        t->replica_id.coords[2] += gtp_rank;
    return entries;
  }
};

TEST(ModelDumpProperty, FailsOnAPlantedDifferenceAndShrinksToTheLeastConfiguration) {
  GtpReplicaFromGtpRank planted;
  const Property& property = *find_property("model_dump_agrees");
  RunParams params;
  params.cases = 100;
  const PropertyRun run = property.run(planted, params);
  ASSERT_EQ(run.outcome, Outcome::failed) << run.description;
  EXPECT_EQ(run.counterexample, "model dump --model gpt --layers 1 --gtp 2 --rank 1");
  EXPECT_EQ(run.failure_kind, "differs");
  EXPECT_NE(run.description.find("replica_id=(0, 0, 1)"), std::string::npos) << run.description;
  // its spec case names the same bug
  const Replay spec = run_spec_case(planted, property, "gpt_gtp2_rank1");
  EXPECT_EQ(spec.outcome, Outcome::failed);
  // and the token's case replays to the same verdict
  ReproToken token{property_check_name(property.name), {}};
  add_case_options(token, params, run);
  const Replay replayed = replay(planted, property, token);
  EXPECT_EQ(replayed.outcome, Outcome::failed);
  EXPECT_EQ(replayed.printed_case, run.counterexample);
}

}  // namespace
}  // namespace ih::props
