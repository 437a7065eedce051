// The repro token is an interface: printed by every failing check, replayed on other machines.
#include "seam/repro_token.h"

#include <gtest/gtest.h>

namespace ih {
namespace {

TEST(ReproToken, RoundTripsEveryOptionAndEncodesShellSpecials) {
  const ReproToken token{
      "gate/pinned-layer-maps/'M*-|E' x:y",
      {{"target", "megatron"}, {"mutant", "maps_accept_mixed"}, {"megatron-path", "/tmp/a b"}, {"cases", "5"}}};
  const std::string text = to_string(token);
  EXPECT_EQ(text.find(' '), std::string::npos);
  EXPECT_EQ(text.find('\''), std::string::npos);
  EXPECT_EQ(text.find('|'), std::string::npos);
  EXPECT_EQ(text.rfind("ih1:gate/pinned-layer-maps/", 0), 0u) << text;
  const auto parsed = parse_repro_token(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, token);
}

TEST(ReproToken, OneCaseHasOneText) {
  ReproToken a{"property/p", {{"seed", "1"}, {"rc", "AB"}}};
  ReproToken b{"property/p", {{"rc", "AB"}, {"seed", "1"}}};
  EXPECT_EQ(to_string(a), to_string(b));
  EXPECT_EQ(to_string(a), "ih1:property/p:rc=AB:seed=1");
}

TEST(ReproToken, BadTokensNameWhatIsWrong) {
  const auto error = [](std::string_view text) {
    const auto parsed = parse_repro_token(text);
    return parsed.ok() ? std::string("parsed") : parsed.error().message;
  };
  EXPECT_NE(error("ih2:property/p").find("format version 'ih2'"), std::string::npos);
  EXPECT_NE(error("prop:p:reference:rc=x").find("not a repro token"), std::string::npos);
  EXPECT_NE(error("reference:-:3").find("not a repro token"), std::string::npos);
  EXPECT_NE(error("ih1:").find("empty check name"), std::string::npos);
  EXPECT_NE(error("ih1:other/x").find("neither property"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:colour=red").find("unknown option 'colour'"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:seed=1:seed=2").find("given twice"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:seed").find("not <option>=<value>"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:rc=%4").find("bad %-escape"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:rc=%zz").find("bad %-escape"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:rc=a b").find("unencoded ' '"), std::string::npos);
}

TEST(PinnedCase, NeedsATokenAndAReason) {
  const PinnedCase pinned{ReproToken{"property/p", {{"spec", "x"}}}, "why"};
  const auto parsed = parse_pinned(format_pinned(pinned));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->token, pinned.token);
  EXPECT_EQ(parsed->reason, "why");
  EXPECT_FALSE(parse_pinned("token: ih1:property/p\n").ok());
  EXPECT_FALSE(parse_pinned("reason: r\n").ok());
}

TEST(GateCheckName, SlugsTheGroupAndKeepsTheName) {
  EXPECT_EQ(gate_check_name("Pinned layer maps", "'M*-'"), "gate/pinned-layer-maps/'M*-'");
}

}  // namespace
}  // namespace ih
