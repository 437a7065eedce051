// The target's words read once at the edge: the candidate design (a token's and a command line's) and the
// adapter's mutant listing (tier and whose code), each a typed value or an error naming what was wrong.
#include "harness/targets/targets.h"

#include <gtest/gtest.h>

#include <sstream>

namespace ih {
namespace {

TEST(TargetCandidate, AWordIsReadIntoTheEnumAndBackAndAnUnknownOneIsRefusedNamingIt) {
  const auto parsed = parse_candidate("shard-split");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, Candidate::shard_split);
  EXPECT_EQ(to_string(Candidate::shard_split), "shard-split");
  EXPECT_EQ(candidate_label(Candidate::shard_split), "candidate shard-split design, not Megatron's code");
  const auto unknown = parse_candidate("shard_split");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(unknown.error().message.find("'shard_split' (known: shard-split)"), std::string::npos)
      << unknown.error().message;
}

TEST(TargetCandidate, ATokensCandidateIsParsedAndWrittenBackTheSame) {
  ReproToken token{"gate/x", {{"target", "megatron"}, {"candidate", "shard-split"}}};
  const auto spec = target_of(token);
  ASSERT_TRUE(spec.ok()) << spec.error().message;
  EXPECT_EQ(spec->candidate, Candidate::shard_split);
  ReproToken written{"gate/x", {}};
  add_target_options(written, *spec);
  EXPECT_EQ(written.option("candidate"), "shard-split");
  ReproToken without{"gate/x", {{"target", "megatron"}}};
  add_target_options(without, *target_of(without));
  EXPECT_EQ(without.option("candidate"), std::nullopt);  // none is no word
  token.options["candidate"] = "other";
  const auto bad = target_of(token);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().kind, ErrorKind::invalid_argument);
}

TEST(CrossVersionToken, ACrossChecksTokenCarriesTheBaseTreeAndReadsItBack) {
  TargetSpec spec{TargetKind::megatron, std::nullopt, "/trees/new", Candidate::none, std::nullopt, "/trees/base"};
  ReproToken written{"gate/real-roundtrip-cross/base-to-new_real_gpt_4_to_2", {}};
  add_target_options(written, spec);
  EXPECT_EQ(written.option("base-megatron-path"), std::nullopt);  // every check's options: no base tree
  add_base_tree(written, spec);
  const auto parsed = parse_repro_token(to_string(written));
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_TRUE(is_cross_version_token(*parsed));
  const auto read = target_of(*parsed);
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->base_megatron_path, "/trees/base");
  EXPECT_EQ(read->megatron_path, "/trees/new");
  EXPECT_FALSE(is_cross_version_token(ReproToken{"gate/real-roundtrips/gpt_4_to_2", {}}));
  EXPECT_FALSE(is_cross_version_token(ReproToken{"gate/real-roundtrip-crossing/x", {}}));
}

TEST(CrossVersionToken, AReplayWithoutEitherTreeIsRefusedNamingTheMissingOne) {
  std::ostringstream notes;
  ReproToken token{"gate/real-roundtrip-cross/base-to-new_real_gpt_4_to_2", {{"target", "megatron"}}};
  const auto no_base = replay_target_of(token, std::nullopt, notes);
  ASSERT_FALSE(no_base.ok());
  EXPECT_EQ(no_base.error().kind, ErrorKind::invalid_argument);
  EXPECT_NE(no_base.error().message.find("base-megatron-path=DIR"), std::string::npos) << no_base.error().message;
  token.options["base-megatron-path"] = "/no/such/base";
  const auto not_here = replay_target_of(token, std::nullopt, notes);
  ASSERT_FALSE(not_here.ok());
  EXPECT_NE(not_here.error().message.find("/no/such/base"), std::string::npos) << not_here.error().message;
  EXPECT_TRUE(notes.str().empty()) << notes.str();  // no fallback to the installed package
}

TEST(TargetCandidate, TheCommandLinesCandidateIsRefusedWhenUnknownOrOnTheReference) {
  const auto unknown = validated_target("megatron", std::nullopt, std::nullopt, "gather", std::nullopt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().kind, ErrorKind::invalid_argument);
  const auto on_reference = validated_target("reference", std::nullopt, std::nullopt, "shard-split", std::nullopt);
  ASSERT_FALSE(on_reference.ok());
  EXPECT_EQ(on_reference.error().kind, ErrorKind::invalid_argument);
}

TEST(RealRoundTripSelection, ADirectionRunsOnlyTheScenariosWhoseChecksWereSelected) {
  const std::vector<std::string> all = gate_real_scenarios();
  ASSERT_GE(all.size(), 2u);
  EXPECT_EQ(direction_scenarios(4, 2, std::nullopt, std::nullopt), all);
  const std::string check = gate_check_name(gate::kRealRoundTripGroup, gate::real_roundtrip_check(all[1], 4, 2));
  EXPECT_EQ(direction_scenarios(4, 2, std::nullopt, std::set<std::string>{check, "gate/model_dump/gpt_dense"}),
            std::vector<std::string>{all[1]});
  // The same scenario's check of another direction, or of the cross-version group, selects nothing here.
  EXPECT_TRUE(direction_scenarios(2, 4, std::nullopt, std::set<std::string>{check}).empty());
  EXPECT_TRUE(direction_scenarios(4, 2, CrossVersion::base_to_new, std::set<std::string>{check}).empty());
  const std::string cross = gate_check_name(gate::kRealRoundTripCrossGroup,
                                            gate::real_roundtrip_cross_check(true, gate_cross_scenarios()[0], 4, 2));
  EXPECT_EQ(direction_scenarios(4, 2, CrossVersion::base_to_new, std::set<std::string>{cross}),
            std::vector<std::string>{gate_cross_scenarios()[0]});
}

TEST(MegatronMutantListing, TierAndDesignAreReadOnceIntoEnums) {
  const auto listed = megatron_mutants_from_json(json::parse(R"({"mutants": [
      {"name": "maps_accept_mixed", "spec_bug_class": 3, "description": "d", "applicable": true, "of": "megatron"},
      {"name": "reverse_gpt_layers", "applicable": true, "tier": "real", "of": "megatron"},
      {"name": "candidate_piece_copies", "applicable": false, "not_applicable": "no candidate", "of": "candidate"}]})")
                                                     .value());
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  ASSERT_EQ(listed->size(), 3u);
  EXPECT_EQ((*listed)[0].tier, MutantTier::checks);  // no tier: the seam's checks
  EXPECT_EQ((*listed)[0].of, MutantOf::megatron);
  EXPECT_EQ((*listed)[0].bug_class, 3);
  EXPECT_EQ((*listed)[1].tier, MutantTier::real);
  EXPECT_EQ((*listed)[1].bug_class, "-");
  EXPECT_EQ((*listed)[2].of, MutantOf::candidate);
  EXPECT_EQ((*listed)[2].not_applicable, "no candidate");
  EXPECT_TRUE((*listed)[0].not_applicable.empty());
}

TEST(MegatronMutantListing, ARowTheHarnessCannotReadIsAHarnessErrorNamingIt) {
  for (const char* listing :
       {R"({"mutants": [{"name": "m", "tier": "gpu"}]})", R"({"mutants": [{"name": "m", "of": "someone"}]})",
        R"({"mutants": [{"tier": "real"}]})", R"({"mutants": {"name": "m"}})", R"({})"}) {
    const auto listed = megatron_mutants_from_json(json::parse(listing).value());
    ASSERT_FALSE(listed.ok()) << listing;
    EXPECT_EQ(listed.error().kind, seam_kind::harness_error) << listing;
  }
}

}  // namespace
}  // namespace ih
