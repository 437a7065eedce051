// The JSON codec through its public API (codec/json_codec.h): round trips of every value kind,
// syntax errors, and strictness (types, missing fields, 64-bit bounds, metadata checks), with the
// error text docs/state-dict-json.md promises.
#include "codec/json_codec.h"

#include <gtest/gtest.h>

#include <limits>

namespace ih::json {
namespace {

constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMin = std::numeric_limits<std::int64_t>::min();

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

Json must_parse(std::string_view text) {
  auto parsed = parse(text);
  EXPECT_TRUE(parsed.ok()) << text << ": " << (parsed.ok() ? "" : parsed.error().message);
  return parsed.ok() ? *parsed : Json();
}

// encode -> text -> parse -> decode, the way a value crosses a process boundary.
Result<Leaf> through_text(const Leaf& leaf) {
  IH_TRY_ASSIGN(parsed, parse(dump(leaf_to_json(leaf))));
  return leaf_from_json(parsed);
}

ShardedTensor full_tensor() {
  ShardedTensor t;
  t.key = "decoder.layers.1.self_attention.linear_qkv.weight";
  t.local_shape = {384, 256};
  t.global_shape = {3, 768, 256};
  t.global_offset = {2, 384, 0};
  t.axis_fragmentations = Shape{3, 2, 1};
  t.replica_id = ReplicaId::tuple({0, 1, 0});
  t.prepend_axis_num = 1;
  t.dtype = "bfloat16";
  t.allow_shape_mismatch = true;
  t.data = TensorValue{{384, 256}, "bfloat16", {{7, 10, 300}, {0, 0, 84}}};
  return t;
}

// A tensor entry for strictness tests; fields are replaced one at a time.
Json tensor_json() {
  return must_parse(R"({"kind": "tensor", "key": "w", "global_shape": [768, 256], "global_offset": [384, 0],
                        "local_shape": [384, 256], "axis_fragmentations": [2, 1], "replica_id": [0, 0, 0],
                        "prepend_axis_num": 0})");
}

std::string error_of(const Result<Leaf>& r) {
  return r.ok() ? "ok" : std::string(to_string(r.error().kind)) + ": " + r.error().message;
}

// ---------------------------------------------------------------------------------------------
// parse and dump

TEST(JsonParse, ValidDocuments) {
  EXPECT_EQ(must_parse("[1, -2, 3.5, true, null, \"x\", {}]").size(), 7u);
  EXPECT_EQ(must_parse("{\"b\": 1, \"a\": 2}").begin().key(), "b");  // ordered: insertion order kept
  EXPECT_EQ(must_parse("9223372036854775807").get<std::int64_t>(), kMax);
  EXPECT_EQ(must_parse("-9223372036854775808").get<std::int64_t>(), kMin);
  EXPECT_EQ(must_parse("  \n\t{}  \n").size(), 0u);
}

TEST(JsonParse, SyntaxErrorsAreBadJson) {
  for (const char* text : {"", "{", "[1, 2", "{\"a\" 1}", "[1,]", "{} x", "'a'", "NaN", "[Infinity]", "/* c */ {}",
                           "{\"a\": 01}", "\"unterminated", "[\"\\x\"]", "tru"}) {
    auto r = parse(text);
    ASSERT_FALSE(r.ok()) << "accepted: " << text;
    EXPECT_EQ(r.error().kind, ErrorKind::bad_json) << text;
    EXPECT_TRUE(contains(r.error().message, "not valid JSON")) << r.error().message;
  }
}

TEST(JsonParse, DeepNestingIsAnErrorOrAValueNeverACrash) {
  EXPECT_TRUE(parse(std::string(50, '[') + std::string(50, ']')).ok());
  const std::size_t deep = 200000;
  auto r = parse(std::string(deep, '[') + std::string(deep, ']'));
  if (!r.ok()) {
    EXPECT_EQ(r.error().kind, ErrorKind::bad_json);
  }
  // An unbalanced deep document is always an error.
  auto unbalanced = parse(std::string(deep, '['));
  ASSERT_FALSE(unbalanced.ok());
  EXPECT_EQ(unbalanced.error().kind, ErrorKind::bad_json);
}

TEST(JsonDump, InvalidUtf8IsReplacedNotThrown) {
  const std::string text =
      dump(Json("a\xff"
                "b"));
  EXPECT_EQ(text,
            "\"a\xEF\xBF\xBD"
            "b\"");  // U+FFFD
  EXPECT_TRUE(parse(text).ok());
  EXPECT_EQ(dump(must_parse("{\"k\": [1, \"\xC3\xA9\"]}")), "{\"k\":[1,\"\xC3\xA9\"]}");  // compact, UTF-8 kept
}

// ---------------------------------------------------------------------------------------------
// Round trips of every leaf kind

TEST(JsonRoundTrip, ShardedTensorWithEveryField) {
  const ShardedTensor t = full_tensor();
  ASSERT_TRUE(t.validate_metadata_integrity().ok());
  EXPECT_EQ(through_text(t).value(), Leaf(t));
}

TEST(JsonRoundTrip, ShardedTensorDefaultsAndIrregular) {
  ShardedTensor t = ShardedTensor::from_rank_offsets("w", {5, 3}, {{0, 1, 4}}, ReplicaId::scalar(2)).value();
  EXPECT_EQ(through_text(t).value(), Leaf(t));
  t.axis_fragmentations.reset();  // uneven: null on the wire
  t.global_offset = {7, 0};
  const Json j = leaf_to_json(t);
  EXPECT_TRUE(j.at("axis_fragmentations").is_null());
  EXPECT_EQ(j.at("replica_id"), Json(2));  // an int stays an int
  EXPECT_FALSE(j.contains("dtype"));       // float32 is the default
  EXPECT_FALSE(j.contains("allow_shape_mismatch"));
  EXPECT_FALSE(j.contains("data"));
  EXPECT_EQ(through_text(t).value(), Leaf(t));
}

TEST(JsonRoundTrip, SixtyFourBitExtremes) {
  ShardedTensor t;
  t.key = "big";
  t.local_shape = {kMax};
  t.global_shape = {kMax};
  t.global_offset = {0};
  t.axis_fragmentations = Shape{1};
  t.replica_id = ReplicaId::tuple({kMax, kMin});
  EXPECT_EQ(through_text(t).value(), Leaf(t));
}

TEST(JsonRoundTrip, ShardedObject) {
  const ShardedObject with_data{"layer._extra_state", ObjectRef{42}, {4, 2}, {3, 1}, ReplicaId::tuple({0, 2})};
  EXPECT_EQ(through_text(with_data).value(), Leaf(with_data));
  const ShardedObject bare{"x", std::nullopt, {1}, {0}, {}};
  EXPECT_EQ(through_text(bare).value(), Leaf(bare));
  EXPECT_EQ(dump(leaf_to_json(bare)),
            R"({"kind":"object","key":"x","global_shape":[1],"global_offset":[0],"replica_id":0})");
  // A one-element tuple replica id is not the int: (3,) stays [3], 3 stays 3.
  const ShardedObject one_tuple{"x", std::nullopt, {1}, {0}, ReplicaId::tuple({3})};
  EXPECT_EQ(leaf_to_json(one_tuple).at("replica_id"), must_parse("[3]"));
  EXPECT_EQ(through_text(one_tuple).value(), Leaf(one_tuple));
  const ShardedObject scalar{"x", std::nullopt, {1}, {0}, ReplicaId::scalar(3)};
  EXPECT_EQ(through_text(scalar).value(), Leaf(scalar));
  EXPECT_NE(through_text(scalar).value(), Leaf(one_tuple));
}

TEST(JsonRoundTrip, LocalNonpersistentEveryPayload) {
  for (const Payload& payload :
       {Payload(), Payload(TensorValue::of_storage(3, {2, 2}, "int64")), Payload(ObjectRef{9})}) {
    const LocalNonpersistent local{payload};
    EXPECT_EQ(through_text(local).value(), Leaf(local)) << payload.index();
  }
  EXPECT_EQ(dump(leaf_to_json(LocalNonpersistent{})), R"({"kind":"local"})");  // docs/state-dict-json.md form
  EXPECT_EQ(leaf_from_json(must_parse(R"({"kind": "local"})")).value(), Leaf(LocalNonpersistent{}));
}

TEST(JsonRoundTrip, PlainValuesCarryAnyJson) {
  for (const char* repr : {"1", "-3", "true", "null", "\"text\"", "[1,[2,{\"a\":null}]]", "{\"b\":1,\"a\":2}", "1.5"}) {
    const PlainValue plain{repr};
    EXPECT_EQ(through_text(plain).value(), Leaf(plain)) << repr;
  }
  // A repr that is not JSON travels as a JSON string, and is stable from then on.
  const Leaf once = through_text(PlainValue{"<object at 0x1>"}).value();
  EXPECT_EQ(once, Leaf(PlainValue{"\"<object at 0x1>\""}));
  EXPECT_EQ(through_text(once).value(), once);
  EXPECT_EQ(leaf_from_json(must_parse(R"({"kind": "plain"})")).value(), Leaf(PlainValue{"null"}));
}

// A builder with a Megatron recipe whose build gives two data-free halves.
class RecipeBuilder : public FactoryBuilder {
 public:
  std::string name() const override { return "test"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>&, const ReplicaId&) const override {
    if (key == "broken") return make_error(ErrorKind::split_sections_mismatch, "planted");
    StateList out;
    for (std::int64_t k = 0; k < 2; ++k)
      out.push_back(
          StateNode(ShardedTensor::from_rank_offsets(key + "." + std::to_string(k), {2, 3}, {{0, k, 2}}).value()));
    return StateNode(std::move(out));
  }
  Result<TensorValue> merge(const StateNode&) const override { return TensorValue::zeros({4, 3}); }
  std::optional<FactoryRecipe> recipe(const ShardedTensorFactory& f) const override {
    return FactoryRecipe{"swiglu", ShardedTensor::from_rank_offsets(f.key, {4, 3}, {}).value(), {{0, 1, 2}}};
  }
};

TEST(JsonRoundTrip, FactoryCarriesItsBuildAndRecipe) {
  const ShardedTensorFactory f{"fc1", std::nullopt, {}, std::make_shared<RecipeBuilder>(), {}};
  const Json j = leaf_to_json(f);
  EXPECT_EQ(j.at("kind"), "factory");
  EXPECT_EQ(j.at("factory"), "swiglu");
  EXPECT_EQ(j.at("sharded_offsets"), must_parse("[[0, 1, 2]]"));
  EXPECT_EQ(j.at("tensor").at("key"), "fc1");
  ASSERT_EQ(j.at("built").size(), 2u);
  EXPECT_EQ(j.at("built")[1].at("entry").at("key"), "fc1.1");
  // Decoded, it builds the same entries (factory equality compares builds) but cannot merge.
  const Leaf back = through_text(f).value();
  const auto& decoded = std::get<ShardedTensorFactory>(back);
  EXPECT_EQ(decoded, f);
  EXPECT_EQ(decoded.build().value(), f.build().value());
  EXPECT_EQ(decoded.merge(StateNode()).error().kind, seam_kind::unsupported);
}

TEST(JsonRoundTrip, DecodedFactoryBuiltUnderANewKeyRenamesItsPieces) {
  // Retargeting renames a factory; a decoded one (a real model's, built elsewhere) must then build its
  // pieces under the new key, as Megatron's build functions derive piece keys from the key they get.
  const ShardedTensorFactory f{"fc1", std::nullopt, {}, std::make_shared<RecipeBuilder>(), {}};
  auto decoded = std::get<ShardedTensorFactory>(through_text(f).value());
  decoded.key = "decoder.layers.fc1";
  const auto built = decoded.build();
  ASSERT_TRUE(built.ok()) << built.error().message;
  const auto pieces = flatten(*built);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(std::get<ShardedTensor>(pieces[0].entry).key, "decoder.layers.fc1.0");
  EXPECT_EQ(std::get<ShardedTensor>(pieces[1].entry).key, "decoder.layers.fc1.1");
}

TEST(JsonRoundTrip, FactoryWhoseBuildFailsReportsTheError) {
  const ShardedTensorFactory f{"broken", std::nullopt, {}, std::make_shared<RecipeBuilder>(), {}};
  const Json j = leaf_to_json(f);
  EXPECT_EQ(j.at("built").at("error").at("kind"), "split_sections_mismatch");
  EXPECT_EQ(leaf_from_json(j).error().kind, ErrorKind::bad_json);  // "built" is not a list of entries
}

TEST(JsonRoundTrip, EntriesKeepPathsAndOrder) {
  const std::vector<FlatEntry> entries{{"z.weight", full_tensor()},
                                       {"a._extra_state", ShardedObject{"a._extra_state", std::nullopt, {2}, {1}, {}}},
                                       {"opt.step", PlainValue{"12"}},
                                       {"rng", LocalNonpersistent{ObjectRef{1}}}};
  auto back = entries_from_json(must_parse(dump(entries_to_json(entries))));
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(*back, entries);
  EXPECT_TRUE(entries_from_json(Json::array()).value().empty());
}

TEST(JsonRoundTrip, TreesOfDictsListsAndPlainValues) {
  const Json doc = must_parse(R"({"model": {"b": [1, {"c": "x"}, []], "a": {}}, "step": 3, "none": null})");
  const StateNode tree = tree_from_json(doc);
  ASSERT_TRUE(tree.is_dict());
  ASSERT_NE(tree.find("model"), nullptr);
  EXPECT_TRUE(tree.find("model")->find("b")->is_list());
  EXPECT_EQ(*tree.find("step")->leaf_if<PlainValue>(), PlainValue{"3"});
  EXPECT_EQ(tree_to_json(tree), doc);  // order and empty containers kept
  // Int dict keys become strings; sharded leaves are written as entries.
  StateDict dict;
  dict.push_back({std::int64_t{0}, StateNode(PlainValue{"1"})});
  dict.push_back({"o", StateNode(ShardedObject{"o", std::nullopt, {1}, {0}, {}})});
  const Json written = tree_to_json(StateNode(std::move(dict)));
  EXPECT_EQ(written.at("0"), Json(1));
  EXPECT_EQ(written.at("o").at("kind"), "object");
}

TEST(JsonRoundTrip, ErrorsOfEveryKind) {
  for (const ErrorKind kind : all_error_kinds()) {
    const Error e{kind, "message " + std::string(to_string(kind))};
    const Error back = error_from_json(must_parse(dump(error_to_json(e))));
    EXPECT_EQ(back.kind, e.kind) << to_string(e.kind);
    EXPECT_EQ(back.message, e.message);
  }
  const Error unknown = error_from_json(must_parse(R"({"kind": "ValueError", "message": "bad"})"));
  EXPECT_EQ(unknown.kind, ErrorKind::invalid_argument);
  EXPECT_EQ(unknown.message, "[ValueError] bad");
  const Error not_object = error_from_json(Json(5));
  EXPECT_EQ(not_object.kind, ErrorKind::invalid_argument);
  EXPECT_TRUE(contains(not_object.message, "5"));
}

TEST(JsonRoundTrip, LayerMaps) {
  // "M*-M*-" by hand: '*' at 1, 4; '-' at 2, 5; 'M' at 0, 3; two GPT layers.
  GptCompatLayerMaps maps;
  maps.attention_to_gpt = {{1, 0}, {4, 1}};
  maps.mlp_to_gpt = {{2, 0}, {5, 1}};
  maps.fresh_init = {0, 3};
  maps.num_gpt_layers = 2;
  const Json j = layer_maps_to_json("M*-M*-", maps);
  EXPECT_EQ(dump(j), R"({"pattern":"M*-M*-","ok":true,"num_gpt_layers":2,"attention_to_gpt":[[1,0],[4,1]],)"
                     R"("mlp_to_gpt":[[2,0],[5,1]],"fresh_init":[0,3]})");
  EXPECT_EQ(layer_maps_from_json(must_parse(dump(j))).value(), maps);
  const Json failed = layer_maps_to_json("M", Result<GptCompatLayerMaps>(make_error(ErrorKind::mixed_mlp_kinds, "no")));
  EXPECT_EQ(failed.at("ok"), false);
  const auto back = layer_maps_from_json(failed);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.error().kind, ErrorKind::mixed_mlp_kinds);
  EXPECT_EQ(back.error().message, "no");
  EXPECT_EQ(layer_maps_from_json(Json::object()).error().kind, ErrorKind::bad_json);
  EXPECT_EQ(layer_maps_from_json(must_parse(R"({"ok": true, "attention_to_gpt": [[1, 0, 2]], "mlp_to_gpt": [],
                                                "fresh_init": [], "num_gpt_layers": 1})"))
                .error()
                .kind,
            ErrorKind::bad_json);
}

// ---------------------------------------------------------------------------------------------
// Strictness

TEST(JsonStrict, TheBaseTensorEntryIsValid) { EXPECT_EQ(error_of(leaf_from_json(tensor_json())), "ok"); }

TEST(JsonStrict, MissingFieldsAreNamed) {
  for (const char* field :
       {"key", "global_shape", "global_offset", "local_shape", "prepend_axis_num", "axis_fragmentations"}) {
    Json j = tensor_json();
    j.erase(field);
    const std::string e = error_of(leaf_from_json(j));
    EXPECT_TRUE(contains(e, "bad_json")) << e;
    EXPECT_TRUE(contains(e, std::string("missing field \"") + field + "\"")) << e;
  }
  // Optional fields have defaults: replica_id 0, dtype float32, allow_shape_mismatch false.
  Json j = tensor_json();
  j.erase("replica_id");
  const Leaf leaf = leaf_from_json(j).value();
  EXPECT_EQ(std::get<ShardedTensor>(leaf).replica_id, ReplicaId::scalar(0));
  EXPECT_EQ(std::get<ShardedTensor>(leaf).dtype, "float32");
  EXPECT_FALSE(std::get<ShardedTensor>(leaf).allow_shape_mismatch);
}

TEST(JsonStrict, WrongTypesAreBadJson) {
  const std::vector<std::pair<const char*, const char*>> cases{
      {"key", "1"},
      {"global_shape", "768"},
      {"global_shape", "[768, \"256\"]"},
      {"global_shape", "[768, 256.0]"},
      {"global_shape", "[768, true]"},
      {"global_shape", "[768, null]"},
      {"prepend_axis_num", "\"0\""},
      {"prepend_axis_num", "0.5"},
      {"prepend_axis_num", "false"},
      {"replica_id", "\"0\""},
      {"replica_id", "1.0"},
      {"replica_id", "[0, \"1\"]"},
      {"axis_fragmentations", "2"},
      {"dtype", "7"},
      {"allow_shape_mismatch", "1"},
      {"data", "{\"shape\": [384, 256], \"dtype\": \"float32\"}"},
      {"data", "{\"shape\": [384, 256], \"dtype\": \"float32\", \"blocks\": [[1, 0]]}"},
      {"data", "{\"shape\": [384, 256], \"dtype\": \"float32\", \"blocks\": [[-1, 0, 384]]}"},
      {"data", "{\"shape\": [384, 256], \"blocks\": []}"},
  };
  for (const auto& [field, value] : cases) {
    Json j = tensor_json();
    j[field] = must_parse(value);
    const std::string e = error_of(leaf_from_json(j));
    EXPECT_TRUE(contains(e, "bad_json")) << field << " = " << value << " gave " << e;
  }
}

TEST(JsonStrict, SixtyFourBitBounds) {
  const auto with_offset = [](const char* value) {
    Json j = must_parse(R"({"kind": "object", "key": "o", "global_shape": [1], "global_offset": [0]})");
    j["global_offset"] = must_parse(std::string("[") + value + "]");
    return error_of(leaf_from_json(j));
  };
  EXPECT_EQ(with_offset("9223372036854775807"), "ok");
  EXPECT_EQ(with_offset("-9223372036854775808"), "ok");
  EXPECT_TRUE(contains(with_offset("9223372036854775808"), "bad_json"));   // 2^63
  EXPECT_TRUE(contains(with_offset("18446744073709551615"), "bad_json"));  // 2^64 - 1
  EXPECT_TRUE(contains(with_offset("1e3"), "bad_json"));
  Json j = tensor_json();
  j["prepend_axis_num"] = must_parse("9223372036854775808");
  EXPECT_TRUE(contains(error_of(leaf_from_json(j)), "must be a 64-bit integer"));
}

TEST(JsonStrict, MetadataChecksRunOnDecode) {
  Json j = tensor_json();
  j["global_offset"] = must_parse("[383, 0]");  // 383 % 384 != 0 on a regular grid
  auto r = leaf_from_json(j);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::metadata_integrity);
  EXPECT_TRUE(contains(r.error().message, "Global offset (383) must be divisible by local shape (384)"));
  j = tensor_json();
  j["prepend_axis_num"] = 1;
  EXPECT_TRUE(contains(error_of(leaf_from_json(j)), "metadata_integrity"));
  j = tensor_json();
  j["data"] = must_parse(R"({"shape": [384, 255], "dtype": "float32", "blocks": [[1, 0, 384]]})");
  EXPECT_TRUE(contains(error_of(leaf_from_json(j)), "metadata_integrity"));
  const Json object = must_parse(R"({"kind": "object", "key": "o", "global_shape": [1, 2], "global_offset": [0]})");
  EXPECT_TRUE(contains(error_of(leaf_from_json(object)), "metadata_integrity"));
}

TEST(JsonStrict, KindsAndShapesOfEntries) {
  EXPECT_TRUE(contains(error_of(leaf_from_json(Json::array())), "bad_json"));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"key": "w"})"))), "missing field \"kind\""));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"kind": "tensorx"})"))), "unknown kind \"tensorx\""));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"kind": 3})"))), "bad_json"));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"kind": "local", "value": 3})"))), "bad_json"));
  EXPECT_TRUE(
      contains(error_of(leaf_from_json(must_parse(R"({"kind": "local", "value": {"object": "a"}})"))), "bad_json"));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"kind": "object", "key": "o", "global_shape": [1],
                                                              "global_offset": [0], "data": {"id": 1}})"))),
                       "bad_json"));
  EXPECT_TRUE(contains(error_of(leaf_from_json(must_parse(R"({"kind": "factory", "key": "f"})"))), "bad_json"));
}

// A real object's own value (a DistributedOptimizer's common state in a per-DP-group object) travels as
// {"value": ...}: read as a CarriedValue, written back as it came, and loaded as the plain value it is.
TEST(JsonEntries, AnObjectCarryingMegatronsOwnValueTravelsAsItsJson) {
  const Json object = must_parse(R"({"kind": "object", "key": "optimizer.distributed.dp_group_idx_0.optimizer",
                                     "global_shape": [1], "global_offset": [0], "replica_id": [0, 0, 1],
                                     "data": {"value": {"param_groups": [{"lr": 0.0001, "step": 1.0}]}}})");
  auto leaf = leaf_from_json(object);
  ASSERT_TRUE(leaf.ok()) << leaf.error().message;
  const auto& o = std::get<ShardedObject>(*leaf);
  ASSERT_TRUE(o.data && std::holds_alternative<CarriedValue>(*o.data));
  EXPECT_EQ(must_parse(std::get<CarriedValue>(*o.data).json), object["data"]["value"]);
  EXPECT_EQ(leaf_to_json(*leaf), object);
  // Its identity form stays what it was; LocalNonpersistentObject(a carried value) keeps the value.
  Json identity = object;
  identity["data"] = must_parse(R"({"object": 7})");
  auto ref = leaf_from_json(identity);
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(std::get<ShardedObject>(*ref).data, std::optional<ObjectData>(ObjectRef{7}));
  const Json local = must_parse(R"({"kind": "local", "value": {"value": [1, "a", null]}})");
  auto lnp = leaf_from_json(local);
  ASSERT_TRUE(lnp.ok()) << lnp.error().message;
  EXPECT_EQ(std::get<LocalNonpersistent>(*lnp).payload, Payload(CarriedValue{R"([1,"a",null])"}));
  EXPECT_EQ(leaf_to_json(*lnp), local);
  // Neither an identity nor a value: refused, naming it.
  Json both = object;
  both["data"]["object"] = 1;
  EXPECT_TRUE(contains(error_of(leaf_from_json(both)), "bad_json"));
}

TEST(JsonStrict, EntryListErrorsNameIndexPathAndField) {
  // The documented form: bad_json: entry 3 (path 'x'): entry: field "global_shape"[1] must be a 64-bit integer, got
  // "a".
  Json doc = Json::array();
  for (int i = 0; i < 3; ++i)
    doc.push_back({{"path", "p" + std::to_string(i)}, {"entry", {{"kind", "plain"}, {"value", i}}}});
  Json bad = tensor_json();
  bad["global_shape"] = must_parse(R"([768, "a"])");
  doc.push_back({{"path", "x"}, {"entry", bad}});
  auto r = entries_from_json(doc);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, ErrorKind::bad_json);
  EXPECT_EQ(r.error().message,
            R"(entry 3 (path 'x'): entry: field "global_shape"[1] must be a 64-bit integer, got "a")");

  EXPECT_EQ(entries_from_json(Json::object()).error().kind, ErrorKind::bad_json);
  EXPECT_TRUE(contains(
      entries_from_json(must_parse(R"([{"path": "a", "entry": {"kind": "plain"}}, 5])")).error().message, "entry 1"));
  EXPECT_TRUE(contains(entries_from_json(must_parse(R"([{"entry": {"kind": "plain"}}])")).error().message,
                       "missing field \"path\""));
  EXPECT_TRUE(contains(entries_from_json(must_parse(R"([{"path": "a"}])")).error().message, "missing field \"entry\""));
  EXPECT_TRUE(contains(entries_from_json(must_parse(R"([{"path": 1, "entry": {"kind": "plain"}}])")).error().message,
                       "\"path\""));
}

}  // namespace
}  // namespace ih::json
