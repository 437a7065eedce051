// Load strictness (addendum C): unexpected keys per rank, missing keys from every rank's request,
// and what each StrictHandling mode does with them.
#include "models/strict_load.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

ShardedTensor whole(const std::string& key, std::uint64_t storage) {
  return ShardedTensor::from_rank_offsets(key, {4}, {}, ReplicaId::tuple({0, 0, 0}), 0,
                                          TensorValue::of_storage(storage, {4}))
      .value();
}

Checkpoint saved_ab() {
  StateDict tree{{std::string("a"), StateNode(whole("a", 1))}, {std::string("b"), StateNode(whole("b", 2))}};
  tree.push_back(
      {std::string("so"), StateNode(ShardedObject{"obj", ObjectRef{3}, {1}, {0}, ReplicaId::tuple({0, 0, 0})})});
  return save_checkpoint({StateNode(std::move(tree))}).value();
}

// This rank asks for a and c; b is in the checkpoint but nobody asks for it.
StateNode request_ac() {
  return StateNode(
      StateDict{{std::string("a"), StateNode(whole("a", 0))}, {std::string("c"), StateNode(whole("c", 0))}});
}

TEST(StrictLoad, CheckpointKeysIncludeObjects) {
  EXPECT_EQ(checkpoint_keys(saved_ab()), (std::set<std::string>{"a", "b", "obj"}));
}

TEST(StrictLoad, AssumeOkLeavesTheRequestAlone) {
  const StrictOutcome o = apply_strict_handling(saved_ab(), request_ac(), StrictHandling::assume_ok_unexpected).value();
  EXPECT_EQ(o.request, request_ac());
  EXPECT_TRUE(o.unexpected.empty());
  // ... and the load itself then fails on the unexpected key.
  EXPECT_EQ(load_checkpoint(saved_ab(), request_ac(), LoadOrder::serialization_load).error().kind,
            ErrorKind::load_not_covered);
}

TEST(StrictLoad, UnexpectedKeysLeaveTheRequestInEveryOtherMode) {
  const std::set<std::string> all = {"a", "c"};
  for (StrictHandling mode :
       {StrictHandling::log_unexpected, StrictHandling::log_all, StrictHandling::return_unexpected,
        StrictHandling::return_all, StrictHandling::ignore_all}) {
    const StrictOutcome o = apply_strict_handling(saved_ab(), request_ac(), mode, all).value();
    EXPECT_EQ(o.request.find(std::string("c")), nullptr) << to_string(mode);
    EXPECT_NE(o.request.find(std::string("a")), nullptr) << to_string(mode);
    EXPECT_TRUE(load_checkpoint(saved_ab(), o.request, LoadOrder::serialization_load).ok()) << to_string(mode);
  }
  const StrictOutcome log = apply_strict_handling(saved_ab(), request_ac(), StrictHandling::log_unexpected).value();
  EXPECT_EQ(log.unexpected, (std::set<std::string>{"c"}));
  EXPECT_TRUE(log.missing.empty());  // *_unexpected modes never compute missing keys
  EXPECT_EQ(log.warnings.size(), 1u);
  const StrictOutcome ret = apply_strict_handling(saved_ab(), request_ac(), StrictHandling::return_all, all).value();
  EXPECT_TRUE(ret.returned);
  EXPECT_EQ(ret.missing, (std::set<std::string>{"b", "obj"}));
  const StrictOutcome ignored =
      apply_strict_handling(saved_ab(), request_ac(), StrictHandling::ignore_all, all).value();
  EXPECT_TRUE(ignored.missing.empty() && ignored.unexpected.empty());
}

TEST(StrictLoad, RaiseModes) {
  const auto unexpected = apply_strict_handling(saved_ab(), request_ac(), StrictHandling::raise_unexpected);
  ASSERT_FALSE(unexpected.ok());
  EXPECT_EQ(unexpected.error().kind, ErrorKind::strict_load_keys);
  EXPECT_NE(unexpected.error().message.find("requested keys not in the checkpoint: {c}"), std::string::npos);
  // raise_all also names checkpoint keys nobody requests, even when nothing is unexpected.
  const StateNode only_a(StateDict{{std::string("a"), StateNode(whole("a", 0))}});
  EXPECT_TRUE(apply_strict_handling(saved_ab(), only_a, StrictHandling::raise_unexpected).ok());
  const auto all =
      apply_strict_handling(saved_ab(), only_a, StrictHandling::raise_all, std::set<std::string>{"a", "obj"});
  ASSERT_FALSE(all.ok());
  EXPECT_NE(all.error().message.find("missing from the request: {b}"), std::string::npos);
  EXPECT_EQ(apply_strict_handling(saved_ab(), only_a, StrictHandling::raise_all).error().kind,
            ErrorKind::invalid_argument);
  EXPECT_EQ(parse_strict_handling("raise_all").value(), StrictHandling::raise_all);
  EXPECT_EQ(parse_strict_handling("strict").error().kind, ErrorKind::invalid_argument);
}

}  // namespace
}  // namespace ih
