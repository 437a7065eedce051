// Strict input (docs/state-dict-json.md, "Strict input"): what retarget refuses in a user's state
// dict, with the JSON place named, and that the codec's own output is never refused.
#include <gtest/gtest.h>

#include "codec/json_codec.h"

namespace ih::json {
namespace {

std::string strict_error(std::string_view text) {
  auto document = parse_without_duplicate_keys(text, "entries");
  if (!document.ok()) return std::string(to_string(document.error().kind)) + ": " + document.error().message;
  const Status checked = check_state_dict_input(*document, "entries");
  return checked.ok() ? "ok" : std::string(to_string(checked.error().kind)) + ": " + checked.error().message;
}

std::string with_tensor(const std::string& fields) {
  return R"([{"path": "p", "entry": {"kind": "tensor", "key": "w", )" + fields +
         R"(, "axis_fragmentations": [1, 1], "replica_id": [0, 0], "prepend_axis_num": 0}}])";
}

TEST(JsonStrictInput, AcceptsAPlainTensor) {
  EXPECT_EQ(strict_error(with_tensor(R"("global_shape": [8, 4], "global_offset": [4, 0], "local_shape": [4, 4])")),
            "ok");
}

TEST(JsonStrictInput, RefusesNegativeSizesNamingThePlace) {
  EXPECT_EQ(strict_error(with_tensor(R"("global_shape": [8, -4], "global_offset": [0, 0], "local_shape": [4, 4])")),
            "bad_json: entries[0].entry.global_shape[1]: must be at least 0, got -4");
  EXPECT_EQ(strict_error(with_tensor(R"("global_shape": [8, 4], "global_offset": [-4, 0], "local_shape": [4, 4])")),
            "bad_json: entries[0].entry.global_offset[0]: must be at least 0, got -4");
  EXPECT_EQ(
      strict_error(R"([{"path": "o", "entry": {"kind": "object", "key": "o", "global_shape": [1], "global_offset": [0],
                       "replica_id": -2}}])"),
      "bad_json: entries[0].entry.replica_id: must be at least 0, got -2");
}

TEST(JsonStrictInput, RefusesOverflowingShapesAndEnds) {
  EXPECT_NE(strict_error(with_tensor(R"("global_shape": [4294967296, 4294967296], "global_offset": [0, 0],
                                        "local_shape": [1, 1])"))
                .find("entries[0].entry.global_shape: the element count overflows 64 bits"),
            std::string::npos);
  EXPECT_NE(strict_error(with_tensor(R"("global_shape": [8, 4], "global_offset": [9223372036854775807, 0],
                                        "local_shape": [4, 4])"))
                .find("entries[0].entry.global_offset[0]: offset + local_shape[0] overflows"),
            std::string::npos);
}

TEST(JsonStrictInput, RefusesRepeatedKeysAtAnyDepth) {
  EXPECT_EQ(strict_error(R"([{"path": "a", "path": "b", "entry": {"kind": "local"}}])"),
            "bad_json: entries[0].path: the key is given twice in one object (a JSON object names each field once)");
  EXPECT_NE(strict_error(R"([{"path": "a", "entry": {"kind": "plain"}},
                             {"path": "b", "entry": {"kind": "plain", "value": {"x": [1, {"y": 1, "y": 2}]}}}])")
                .find("entries[1].entry.value.x[1].y: the key is given twice"),
            std::string::npos);
  EXPECT_EQ(strict_error(R"([{"path": "a", "entry": {"kind": "plain", "value": [{"y": 1}, {"y": 2}]}}])"), "ok");
}

TEST(JsonStrictInput, RefusesUnknownFields) {
  EXPECT_EQ(strict_error(R"([{"path": "a", "entry": {"kind": "local"}, "note": 1}])"),
            "bad_json: entries[0].note: unknown field (this object takes path, entry)");
  EXPECT_NE(strict_error(with_tensor(R"("global_shape": [8, 4], "global_offset": [0, 0], "local_shape": [4, 4],
                                        "flattened_range": null)"))
                .find("entries[0].entry.flattened_range: unknown field"),
            std::string::npos);
  EXPECT_NE(strict_error(R"([{"path": "a", "entry": {"kind": "local", "value": {"object": 1, "extra": 2}}}])")
                .find("entries[0].entry.value.extra: unknown field"),
            std::string::npos);
}

TEST(JsonStrictInput, NeverRefusesTheCodecsOwnOutput) {
  ShardedTensor t;
  t.key = "decoder.layers.1.mlp.linear_fc1.weight";
  t.local_shape = {4, 8};
  t.global_shape = {2, 8, 8};
  t.global_offset = {1, 4, 0};
  t.axis_fragmentations = Shape{2, 2, 1};
  t.replica_id = ReplicaId::tuple({0, 1, 0});
  t.prepend_axis_num = 1;
  t.data = TensorValue{{4, 8}, "float32", {{3, 0, 4}}};
  const std::vector<FlatEntry> entries = {{"a", Leaf(t)},
                                          {"b", Leaf(ShardedObject{"o", ObjectRef{7}, {2}, {1}, ReplicaId::scalar(1)})},
                                          {"c", Leaf(LocalNonpersistent{})},
                                          {"d", Leaf(PlainValue{R"({"lr": [1, 2]})"})}};
  EXPECT_EQ(strict_error(dump(entries_to_json(entries))), "ok");
}

}  // namespace
}  // namespace ih::json
