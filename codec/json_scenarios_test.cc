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
}

TEST(JsonScenarios, BrokenRepliesAreHarnessErrors) {
  for (const char* text : {R"({})", R"({"ranks": 3})", R"({"ranks": [{"ok": true}]})",
                           R"({"ranks": [{"ok": true, "rows": [[1]], "keys": []}]})"}) {
    auto answer = all_padding_load_from_json(Json::parse(text));
    ASSERT_FALSE(answer.ok()) << text;
    EXPECT_EQ(answer.error().kind, seam_kind::harness_error) << text;
  }
}

TEST(JsonScenarios, OptimizerResumeReply) {
  const std::string keys = R"("saved_keys": ["p.w"], "requested_keys": ["p.w.b", "p.w.a"])";
  auto held = optimizer_resume_from_json(Json::parse("{\"ok\": true, " + keys + "}"));
  ASSERT_TRUE(held.ok());
  EXPECT_FALSE(held->refused);
  EXPECT_TRUE(held->mismatches.empty());
  EXPECT_TRUE(held->unexplained.empty());
  EXPECT_EQ(held->saved_keys, std::vector<std::string>{"p.w"});
  EXPECT_EQ(held->requested_keys, (std::vector<std::string>{"p.w.a", "p.w.b"}));  // sorted
  EXPECT_EQ(held->key, "p.w.{a,b}");
  auto refused = optimizer_resume_from_json(
      Json::parse("{\"ok\": false, " + keys +
                  R"(, "load_error": "CheckpointException: KeyError: 'p.w'", "megatron_frame": "f.py:1"})"));
  ASSERT_TRUE(refused.ok() && refused->refused);
  EXPECT_EQ(refused->refused->message, "CheckpointException: KeyError: 'p.w' (at f.py:1)");
  auto rows = optimizer_resume_from_json(Json::parse(
      "{\"ok\": false, " + keys + R"(, "exp_avg_mismatches": 120, "first_exp_avg_mismatches": [1, 2, 3]})"));
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->mismatches.size(), 1u);
  EXPECT_EQ(rows->mismatches[0].tensor, "exp_avg");
  EXPECT_EQ(rows->mismatches[0].count, 120);
  EXPECT_EQ(rows->mismatches[0].first, "[1,2]");
  auto silent = optimizer_resume_from_json(Json::parse("{\"ok\": false, " + keys + "}"));
  ASSERT_TRUE(silent.ok());
  EXPECT_FALSE(silent->unexplained.empty());  // not held, and no reason: never read as a pass
  EXPECT_FALSE(optimizer_resume_from_json(Json::parse(R"({"ok": true})")).ok());  // no keys: a protocol error
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
