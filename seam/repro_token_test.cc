// The repro token is an interface: printed by every failing check, replayed on other machines.
#include "seam/repro_token.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

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
  EXPECT_EQ(text.rfind("ih2:gate/pinned-layer-maps/", 0), 0u) << text;
  const auto parsed = parse_repro_token(text);
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, token);
}

TEST(ReproToken, OneCaseHasOneText) {
  ReproToken a{"property/p", {{"seed", "1"}, {"rc", "AB"}}};
  ReproToken b{"property/p", {{"rc", "AB"}, {"seed", "1"}}};
  EXPECT_EQ(to_string(a), to_string(b));
  // zlib.crc32(b"ih2:property/p:rc=AB:seed=1"): anyone can check a token by hand.
  EXPECT_EQ(to_string(a), "ih2:property/p:rc=AB:seed=1:crc=" + token_checksum("ih2:property/p:rc=AB:seed=1"));
  EXPECT_EQ(token_checksum("123456789"), "cbf43926");  // the CRC-32 check value
}

/// `body` (an ih2 text without its checksum) signed as the harness signs it.
std::string signed_token(const std::string& body) { return body + ":crc=" + token_checksum(body); }

TEST(ReproToken, BadTokensNameWhatIsWrong) {
  const auto error = [](std::string_view text) {
    const auto parsed = parse_repro_token(text);
    return parsed.ok() ? std::string("parsed") : parsed.error().message;
  };
  EXPECT_NE(error("ih3:property/p").find("format version 'ih3'"), std::string::npos);
  EXPECT_NE(error("prop:p:reference:rc=x").find("not a repro token"), std::string::npos);
  EXPECT_NE(error("reference:-:3").find("not a repro token"), std::string::npos);
  EXPECT_NE(error("ih1:property/p:rc=AB").find("no checksum"), std::string::npos);
  EXPECT_NE(error("ih2:property/p:rc=AB").find("no checksum"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:")).find("empty check name"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:other/x")).find("neither property"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:colour=red")).find("unknown option 'colour'"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:seed=1:seed=2")).find("given twice"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:seed")).find("not <option>=<value>"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:rc=%4")).find("bad %-escape"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:rc=%zz")).find("bad %-escape"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:rc=a b")).find("unencoded ' '"), std::string::npos);
  // The right checksum over a text the harness would not print (options out of order) is refused too.
  EXPECT_NE(error(signed_token("ih2:property/p:seed=1:rc=AB")).find("not the canonical text"), std::string::npos);
  EXPECT_NE(error(signed_token("ih2:property/p:rc=%41B")).find("not the canonical text"), std::string::npos);
  for (const std::string_view text : {"ih3:property/p", "ih2:property/p:rc=AB", "x"})
    EXPECT_EQ(error(text).rfind("damaged token '", 0), 0u) << error(text);
}

TEST(ReproToken, TrailingWhitespaceAndCrAreTolerated) {
  const ReproToken token{"property/p", {{"rc", "AB"}, {"target", "reference"}}};
  for (const std::string& pasted : {to_string(token) + "\r", to_string(token) + " \t\r\n", "  " + to_string(token)}) {
    const auto parsed = parse_repro_token(pasted);
    ASSERT_TRUE(parsed.ok()) << parsed.error().message;
    EXPECT_EQ(*parsed, token);
  }
  const auto legacy = parse_legacy_repro_token("ih1:property/p:rc=AB:target=reference\r\n");
  ASSERT_TRUE(legacy.ok()) << legacy.error().message;
  EXPECT_EQ(*legacy, token);
}

/// Every single-character edit of `text`: a substitution by each printable ASCII character,
/// a deletion, and every truncation.
std::vector<std::string> single_character_edits(const std::string& text) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    for (char c = ' '; c <= '~'; ++c)
      if (c != text[i]) out.push_back(text.substr(0, i) + c + text.substr(i + 1));
    out.push_back(text.substr(0, i) + text.substr(i + 1));
    out.push_back(text.substr(0, i));
  }
  return out;
}

// CRC-32 catches every burst of at most 32 bits, so every substitution of one character is refused;
// a deletion or truncation changes the length the checksum covers, or removes the checksum.
TEST(ReproToken, NoSingleCharacterEditOfATokenParses) {
  const std::vector<ReproToken> tokens = {
      {"property/gtp_pieces_tile_chunks",
       {{"mutant", "gtp_offset_no_tp_term"},
        {"rc", "BYxZ0B3XwlWZjV2cfRXasV2XjhWdut2cAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAgACIEAoRGAAAAFAAAAEQA"},
        {"target", "reference"}}},
      {"gate/spec-invariants/optimizer_resume_gtp_to_no_gtp",
       {{"megatron-path", "/runner/Megatron-LM"},
        {"megatron-revision", "0123abcd"},
        {"megatron-version", "0.19.2"},
        {"target", "megatron"}}},
      {"property/load_orders_agree", {{"spec", "all_padding_rank"}, {"target", "reference"}}}};
  for (const ReproToken& token : tokens) {
    const std::string text = to_string(token);
    std::size_t edits = 0;
    for (const std::string& edited : single_character_edits(text)) {
      ++edits;
      const auto parsed = parse_repro_token(edited);
      EXPECT_FALSE(parsed.ok()) << "an edit of " << text << " parses: " << edited;
      if (!parsed.ok()) {
        EXPECT_EQ(parsed.error().message.rfind("damaged token '", 0), 0u) << parsed.error().message;
      }
    }
    EXPECT_GT(edits, 95 * text.size());
  }
}

TEST(PinnedCase, NeedsATokenAndAReason) {
  const PinnedCase pinned{ReproToken{"property/p", {{"spec", "x"}}}, "why"};
  const auto parsed = parse_pinned(format_pinned(pinned));
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(parsed->token, pinned.token);
  EXPECT_EQ(parsed->reason, "why");
  EXPECT_FALSE(parse_pinned("token: " + to_string(pinned.token) + "\n").ok());
  EXPECT_FALSE(parse_pinned("reason: r\n").ok());
  // A pinned file is its own record: an ih1 token (no checksum) is read there, CRLF or not.
  const auto legacy = parse_pinned("token: ih1:property/p:spec=x\r\nreason: why\r\n");
  ASSERT_TRUE(legacy.ok()) << legacy.error().message;
  EXPECT_EQ(legacy->token, pinned.token);
  EXPECT_EQ(legacy->reason, "why");
  EXPECT_FALSE(parse_pinned("token: ih2:property/p:spec=y:crc=00000000\nreason: why\n").ok());
}

TEST(GateCheckName, SlugsTheGroupAndKeepsTheName) {
  EXPECT_EQ(gate_check_name("Pinned layer maps", "'M*-'"), "gate/pinned-layer-maps/'M*-'");
}

}  // namespace
}  // namespace ih
