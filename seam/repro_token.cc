#include "seam/repro_token.h"

#include <array>
#include <cctype>
#include <cstdint>
#include <vector>

namespace ih {
namespace {

// Every option a token may carry; anything else is a stale or foreign token.
constexpr std::array<std::string_view, 16> kOptions = {"target",
                                                       "mutant",
                                                       "seed",
                                                       "cases",
                                                       "size",
                                                       "rc",
                                                       "spec",
                                                       "corpus",
                                                       "budget",
                                                       "megatron-path",
                                                       "megatron-version",
                                                       "megatron-revision",
                                                       "candidate",
                                                       "fix",
                                                       "model-dumps",
                                                       "base-megatron-path"};

/// Separates the checksum from the text it covers; "crc" is no option name.
constexpr std::string_view kChecksumField = ":crc=";
constexpr std::size_t kChecksumDigits = 8;

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'; }

/// A token copied from a terminal, a CRLF file or a chat client may carry a trailing CR or spaces.
std::string_view trimmed(std::string_view text) {
  while (!text.empty() && is_space(text.back())) text.remove_suffix(1);
  while (!text.empty() && is_space(text.front())) text.remove_prefix(1);
  return text;
}

bool plain(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '/' || c == '+' || c == '-';
}

std::string encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char c : text) {
    if (plain(c)) {
      out += c;
    } else {
      const auto byte = static_cast<unsigned char>(c);
      out += '%', out += kHex[byte >> 4], out += kHex[byte & 15];
    }
  }
  return out;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

Result<std::string> decode(std::string_view text, std::string_view what) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      if (!plain(text[i]))
        return make_error(ErrorKind::invalid_argument,
                          std::string(what) + " has an unencoded '" + std::string(1, text[i]) + "'");
      out += text[i];
      continue;
    }
    const int high = i + 2 < text.size() ? hex_value(text[i + 1]) : -1;
    const int low = i + 2 < text.size() ? hex_value(text[i + 2]) : -1;
    if (i + 2 >= text.size() || high < 0 || low < 0)
      return make_error(ErrorKind::invalid_argument, std::string(what) + " has a bad %-escape");
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

std::vector<std::string_view> split_view(std::string_view text, char separator) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (std::size_t end; (end = text.find(separator, start)) != std::string_view::npos; start = end + 1)
    out.push_back(text.substr(start, end - start));
  out.push_back(text.substr(start));
  return out;
}

}  // namespace

std::optional<std::string> ReproToken::option(const std::string& name) const {
  const auto it = options.find(name);
  return it == options.end() ? std::nullopt : std::optional<std::string>(it->second);
}

std::string to_string(const ReproToken& token) {
  std::string out = std::string(ReproToken::kPrefix) + encode(token.check);
  for (const auto& [name, value] : token.options) out += ":" + name + "=" + encode(value);
  return out + std::string(kChecksumField) + token_checksum(out);
}

namespace {

/// Why a token is refused, framed with its text: every refusal says "damaged token", since a
/// token that fails here was, as far as the harness can tell, altered on its way from the log.
Error damaged(std::string_view text, const std::string& why) {
  return make_error(ErrorKind::invalid_argument,
                    "damaged token '" + std::string(text.substr(0, 200)) + "': " + why +
                        " (form: ih2:<check>[:<option>=<value>]...:crc=<checksum>; copy the whole REPRO line "
                        "again; nothing was replayed)");
}

/// The fields after the version prefix (ih1 and ih2 share them); errors carry only what is wrong.
Result<ReproToken> parse_fields(std::string_view fields) {
  const auto why = [](std::string text) { return make_error(ErrorKind::invalid_argument, std::move(text)); };
  const auto parts = split_view(fields, ':');
  ReproToken token;
  IH_TRY_ASSIGN(check, decode(parts[0], "the check name"));
  if (check.empty()) return why("empty check name");
  if (check.rfind("property/", 0) != 0 && check.rfind("gate/", 0) != 0)
    return why("check '" + check + "' is neither property/<name> nor gate/<group>/<name>");
  token.check = check;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string_view::npos) return why("field '" + std::string(parts[i]) + "' is not <option>=<value>");
    const std::string name(parts[i].substr(0, eq));
    bool known = false;
    for (std::string_view option : kOptions) known = known || option == name;
    if (!known) return why("unknown option '" + name + "'");
    if (token.options.count(name)) return why("option '" + name + "' given twice");
    IH_TRY_ASSIGN(value, decode(parts[i].substr(eq + 1), "option '" + name + "'"));
    token.options[name] = value;
  }
  return token;
}

}  // namespace

std::string token_checksum(std::string_view text) {
  std::uint32_t crc = 0xFFFFFFFFu;
  for (const char c : text) {
    crc ^= static_cast<unsigned char>(c);
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xFFFFFFFFu;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(kChecksumDigits, '0');
  for (std::size_t i = 0; i < kChecksumDigits; ++i) out[kChecksumDigits - 1 - i] = kHex[(crc >> (4 * i)) & 15];
  return out;
}

Result<ReproToken> parse_repro_token(std::string_view given) {
  const std::string_view text = trimmed(given);
  if (text.substr(0, ReproToken::kPrefix.size()) != ReproToken::kPrefix) {
    const auto colon = text.find(':');
    if (is_legacy_token(text))
      return damaged(text, "an ih1 token carries no checksum; only the ih1 text of a case pinned in corpus/ replays");
    if (text.size() > 2 && text[0] == 'i' && text[1] == 'h' && colon != std::string_view::npos)
      return damaged(text, "format version '" + std::string(text.substr(0, colon)) +
                               "' is not known to this harness (it reads ih2, and ih1 where pinned)");
    return damaged(text, "not a repro token of this harness (tokens start with ih2:)");
  }
  const auto field = text.rfind(kChecksumField);
  if (field == std::string_view::npos) return damaged(text, "no checksum (was it cut short?)");
  const std::string_view body = text.substr(0, field);
  const std::string_view checksum = text.substr(field + kChecksumField.size());
  if (checksum.size() != kChecksumDigits)
    return damaged(text, "the checksum has " + std::to_string(checksum.size()) + " characters, not " +
                             std::to_string(kChecksumDigits) + " (was it cut short?)");
  if (checksum != token_checksum(body))
    return damaged(text, "the checksum does not match the text (a character was changed, added or dropped)");
  auto token = parse_fields(body.substr(ReproToken::kPrefix.size()));
  if (!token.ok()) return damaged(text, token.error().message);
  // One case, one text: a hand-made token with the right checksum but another spelling is refused.
  if (to_string(*token) != text) return damaged(text, "not the canonical text of its case (options out of order?)");
  return token;
}

bool is_legacy_token(std::string_view text) {
  return trimmed(text).substr(0, ReproToken::kLegacyPrefix.size()) == ReproToken::kLegacyPrefix;
}

Result<ReproToken> parse_legacy_repro_token(std::string_view given) {
  const std::string_view text = trimmed(given);
  if (!is_legacy_token(text)) return damaged(text, "not an ih1 token");
  auto token = parse_fields(text.substr(ReproToken::kLegacyPrefix.size()));
  if (!token.ok())
    return make_error(ErrorKind::invalid_argument,
                      "ih1 token '" + std::string(text.substr(0, 200)) + "': " + token.error().message);
  return token;
}

Result<PinnedCase> parse_pinned(std::string_view text) {
  std::optional<ReproToken> token;
  std::string reason;
  for (const std::string_view line : split_view(text, '\n')) {
    if (line.substr(0, 7) == "token: ") {
      const std::string_view field = line.substr(7);
      IH_TRY_ASSIGN(parsed, is_legacy_token(field) ? parse_legacy_repro_token(field) : parse_repro_token(field));
      token = parsed;
    } else if (line.substr(0, 8) == "reason: ") {
      reason = std::string(trimmed(line.substr(8)));
    }
  }
  if (!token || reason.empty())
    return make_error(ErrorKind::invalid_argument, "a pinned case needs a 'token: ' and a 'reason: ' line");
  return PinnedCase{*token, reason};
}

std::string format_pinned(const PinnedCase& pinned) {
  return "token: " + to_string(pinned.token) + "\nreason: " + pinned.reason + "\n";
}

std::string gate_check_name(std::string_view group, std::string_view name) {
  std::string slug;
  for (char c : group) slug += c == ' ' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return "gate/" + slug + "/" + std::string(name);
}

}  // namespace ih
