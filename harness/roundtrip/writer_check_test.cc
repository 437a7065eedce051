#include "harness/roundtrip/writer_check.h"

#include <gtest/gtest.h>

namespace {

using nlohmann::json;

// The save's metadata rows: [key, chunk offset, storage file of the writing rank].
json written(std::initializer_list<std::pair<std::vector<std::int64_t>, int>> chunks) {
  json out = json::array();
  for (const auto& [offset, rank] : chunks)
    out.push_back(json::array({"w", offset, "__" + std::to_string(rank) + "_0.distcp"}));
  return out;
}

TEST(WriterCheck, TheMainReplicasRankMustBeTheOnlyWriter) {
  const json expected = json::parse(R"([["w", [0, 0], 1], ["w", [4, 0], 0]])");
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 1}, {{4, 0}, 0}}), {"w"}).wrong, 0);
  const auto swapped = ih::check_writers(expected, written({{{0, 0}, 0}, {{4, 0}, 1}}), {"w"});
  EXPECT_EQ(swapped.wrong, 2);
  ASSERT_FALSE(swapped.notes.empty());
  EXPECT_NE(swapped.notes[0].find("expected exactly one writer, rank 1; checkpoint has writers 0"), std::string::npos)
      << swapped.notes[0];
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 1}, {{0, 0}, 2}, {{4, 0}, 0}}), {"w"}).wrong, 1);  // two
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 1}}), {"w"}).wrong, 1);                            // none
  const auto extra = ih::check_writers(expected, written({{{0, 0}, 1}, {{4, 0}, 0}, {{8, 0}, 3}}), {"w"});
  EXPECT_EQ(extra.wrong, 1);
  EXPECT_NE(extra.notes.at(0).find("written but no rank holds its main replica"), std::string::npos);
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 1}, {{4, 0}, 0}, {{8, 0}, 3}}), {"other"}).wrong, 2);
}

TEST(WriterCheck, AFullyParallelSaveMayHandAChunkToAnyOfItsHolders) {
  const json expected = json::parse(R"([["w", [0, 0], 0, [0, 1, 2, 3]]])");
  for (int rank : {0, 1, 2, 3}) EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, rank}}), {"w"}).wrong, 0);
  const auto outsider = ih::check_writers(expected, written({{{0, 0}, 4}}), {"w"});
  EXPECT_EQ(outsider.wrong, 1);
  EXPECT_NE(outsider.notes.at(0).find("one of ranks [0, 1, 2, 3]; checkpoint has writers 4"), std::string::npos)
      << outsider.notes[0];
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 1}, {{0, 0}, 2}}), {"w"}).wrong, 1);  // still exactly one
}

TEST(WriterCheck, AFullyParallelSaveOverSeveralDataParallelRanksHandsSomeChunkOnFromItsMainReplica) {
  const json expected = json::parse(R"([["w", [0, 0], 0, [0, 1]], ["w", [4, 0], 0, [0, 1]]])");
  const auto spread = ih::check_writers(expected, written({{{0, 0}, 0}, {{4, 0}, 1}}), {"w"}, true);
  EXPECT_EQ(spread.wrong, 0);
  EXPECT_EQ(spread.moved, 1);
  const auto plain = ih::check_writers(expected, written({{{0, 0}, 0}, {{4, 0}, 0}}), {"w"}, true);
  EXPECT_EQ(plain.wrong, 1);
  EXPECT_NE(plain.notes.at(0).find("handed no replicated chunk to another rank"), std::string::npos) << plain.notes[0];
  EXPECT_EQ(ih::check_writers(expected, written({{{0, 0}, 0}, {{4, 0}, 0}}), {"w"}).wrong, 0);  // not required
}

}  // namespace
