// The wire of the seam's scenario operations (codec/json_scenarios.h): adapter replies read into typed
// answers, and a reply that lacks what the protocol promises is a harness_error, never a verdict.
#include "codec/json_scenarios.h"

#include <gtest/gtest.h>

namespace ih::json {
namespace {

TEST(JsonScenarios, LoadOrderingsReplyIsTyped) {
  const Json reply = Json::parse(R"({"ranks": [
      {"serialization_load": {"ok": true, "rows": [[0, 0], null], "keys": ["iteration", "mixer"]},
       "to_state_dict": {"ok": false, "error": "ValueError: Different dict keys", "frame": "f.py:1"}}]})");
  auto answer = load_orderings_from_json(reply);
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  ASSERT_EQ(answer->ranks.size(), 1u);
  const OrderedLoad& a = answer->ranks[0].serialization_load;
  EXPECT_FALSE(a.refused);
  ASSERT_EQ(a.rows.size(), 2u);
  EXPECT_EQ(a.rows[0], (std::array<std::int64_t, 2>{0, 0}));
  EXPECT_FALSE(a.rows[1]);
  EXPECT_EQ(a.keys, (std::vector<std::string>{"iteration", "mixer"}));
  const OrderedLoad& b = answer->ranks[0].to_state_dict;
  ASSERT_TRUE(b.refused);
  EXPECT_EQ(b.refused->step, "to_state_dict");
  EXPECT_FALSE(b.refused->kind);  // Megatron's exceptions carry no typed kind
  EXPECT_EQ(b.refused->message, "ValueError: Different dict keys (at f.py:1)");
  EXPECT_EQ(rows_text(a.rows), "[[0,0],null]");
  EXPECT_TRUE(a.malformed.empty());
  auto wide = load_orderings_from_json(Json::parse(R"({"ranks": [{"serialization_load": {"ok": true, "rows": [],
      "keys": [], "malformed": "shape [16, 3], not the [16, 2] it was filled as"}, "to_state_dict": {"ok": true,
      "rows": [], "keys": []}}]})"));
  ASSERT_TRUE(wide.ok()) << wide.error().message;
  EXPECT_EQ(wide->ranks[0].serialization_load.malformed, "shape [16, 3], not the [16, 2] it was filled as");
}

TEST(JsonScenarios, BrokenRepliesAreHarnessErrors) {
  for (const char* text : {R"({})", R"({"ranks": 3})", R"({"ranks": [{"ok": true}]})",
                           R"({"ranks": [{"ok": true, "rows": [[1]], "keys": []}]})"}) {
    auto answer = all_padding_load_from_json(Json::parse(text));
    ASSERT_FALSE(answer.ok()) << text;
    EXPECT_EQ(answer.error().kind, seam_kind::harness_error) << text;
  }
}

TEST(JsonScenarios, OptimizerResumeReplySaysWhatEachRankLoaded) {
  const std::string keys = R"("saved_keys": ["p.w"], "requested_keys": ["p.w.b", "p.w.a"])";
  auto loaded = optimizer_resume_from_json(Json::parse("{" + keys + R"(, "ranks": [{"tp": 1, "gtp": 2,
      "first_row": 64, "weight": [[1, 3], null], "exp_avg": ["1.5", [0, 0]]}]})"));
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_FALSE(loaded->refused);
  EXPECT_TRUE(loaded->unexplained.empty());
  EXPECT_EQ(loaded->saved_keys, std::vector<std::string>{"p.w"});
  EXPECT_EQ(loaded->requested_keys, (std::vector<std::string>{"p.w.a", "p.w.b"}));  // sorted
  EXPECT_EQ(loaded->key, "p.w.{a,b}");
  ASSERT_EQ(loaded->ranks.size(), 1u);
  const ResumedRank& rank = loaded->ranks[0];
  EXPECT_EQ((std::array<std::int64_t, 3>{rank.tp_rank, rank.gtp_rank, rank.first_row}),
            (std::array<std::int64_t, 3>{1, 2, 64}));
  ASSERT_EQ(rank.tensors.size(), 2u);
  EXPECT_EQ(rank.tensors[0].tensor, "weight");
  EXPECT_EQ(rank.tensors[0].rows, (std::vector<LoadedRow>{{TpRow{1, 3}, ""}, {}}));
  EXPECT_EQ(rank.tensors[1].tensor, "exp_avg");
  EXPECT_EQ(rank.tensors[1].rows, (std::vector<LoadedRow>{{std::nullopt, "1.5"}, {TpRow{0, 0}, ""}}));
  auto refused = optimizer_resume_from_json(Json::parse(
      "{" + keys + R"(, "load_error": "CheckpointException: KeyError: 'p.w'", "megatron_frame": "f.py:1"})"));
  ASSERT_TRUE(refused.ok() && refused->refused);
  EXPECT_EQ(refused->refused->message, "CheckpointException: KeyError: 'p.w' (at f.py:1)");
  EXPECT_TRUE(refused->ranks.empty());
  auto misshapen = optimizer_resume_from_json(Json::parse(
      "{" + keys +
      R"(, "ranks": [], "unexplained": "rank (t=0, g=1): the loaded weight has shape [8, 5], not the [8, 4] it was filled as"})"));
  ASSERT_TRUE(misshapen.ok()) << misshapen.error().message;
  EXPECT_EQ(misshapen->unexplained,
            "rank (t=0, g=1): the loaded weight has shape [8, 5], not the [8, 4] it was filled as");
}

TEST(JsonScenarios, AnOptimizerResumeReplyWithoutItsRowsIsAHarnessError) {
  const std::string keys = R"("saved_keys": [], "requested_keys": [])";
  const std::string rank = R"("tp": 0, "gtp": 0, "first_row": 0, "weight": [])";
  for (const std::string& text : {std::string(R"({"ok": true})"), "{" + keys + "}", "{" + keys + R"(, "ok": true})",
                                  "{" + keys + R"(, "ranks": [{"tp": 0, "gtp": 0, "weight": [], "exp_avg": []}]})",
                                  "{" + keys + ", \"ranks\": [{" + rank + "}]}",
                                  "{" + keys + ", \"ranks\": [{" + rank + R"(, "exp_avg": [[1]]}]})",
                                  "{" + keys + ", \"ranks\": [{" + rank + R"(, "exp_avg": [""]}]})"}) {
    auto answer = optimizer_resume_from_json(Json::parse(text));
    ASSERT_FALSE(answer.ok()) << text;  // never read as a pass
    EXPECT_EQ(answer.error().kind, seam_kind::harness_error) << text;
  }
}

TEST(JsonScenarios, CompactKeys) {
  EXPECT_EQ(compact_keys({"a.b.z", "a.b.V0"}), "a.b.{z,V0}");
  EXPECT_EQ(compact_keys({"a.b"}), "a.b");
  EXPECT_EQ(compact_keys({"a.b", "c.d"}), "a.b, c.d");
  EXPECT_EQ(compact_keys({}), "");
}

TEST(JsonScenarios, SingleExpertReply) {
  auto loaded = single_expert_from_json(Json::parse(R"({"load": {"k#0": {"layer": 1, "expert": 0}, "k#1": 5}})"));
  ASSERT_TRUE(loaded.ok());
  ASSERT_TRUE(loaded->loads_objects);
  ASSERT_EQ(loaded->objects.size(), 2u);
  EXPECT_EQ(loaded->objects[0].loaded, (std::array<std::int64_t, 2>{1, 0}));
  EXPECT_FALSE(loaded->objects[1].loaded);
  auto refused = single_expert_from_json(Json::parse(R"({"load_error": "RuntimeError: Missing key"})"));
  ASSERT_TRUE(refused.ok() && refused->refused);
  EXPECT_EQ(refused->refused->step, "the GPT->Hybrid load");
}

}  // namespace
}  // namespace ih::json
