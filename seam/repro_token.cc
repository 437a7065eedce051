#include "seam/repro_token.h"

#include <array>
#include <cctype>
#include <vector>

namespace ih {
namespace {

// Every option a token may carry; anything else is a stale or foreign token.
constexpr std::array<std::string_view, 10> kOptions = {"target", "mutant", "seed",   "cases",         "size",
                                                       "rc",     "spec",   "corpus", "megatron-path", "budget"};

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
  return out;
}

Result<ReproToken> parse_repro_token(std::string_view text) {
  const auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::invalid_argument, "repro token '" + std::string(text.substr(0, 200)) + "': " + why +
                                                       " (form: ih1:<check>[:<option>=<value>]...)");
  };
  if (text.substr(0, ReproToken::kPrefix.size()) != ReproToken::kPrefix) {
    const auto colon = text.find(':');
    if (text.size() > 2 && text[0] == 'i' && text[1] == 'h' && colon != std::string_view::npos)
      return bad("format version '" + std::string(text.substr(0, colon)) +
                 "' is not known to this harness (it reads ih1)");
    return bad("not a repro token of this harness (tokens start with ih1:)");
  }
  const auto parts = split_view(text.substr(ReproToken::kPrefix.size()), ':');
  ReproToken token;
  IH_TRY_ASSIGN(check, decode(parts[0], "the check name"));
  if (check.empty()) return bad("empty check name");
  if (check.rfind("property/", 0) != 0 && check.rfind("gate/", 0) != 0)
    return bad("check '" + check + "' is neither property/<name> nor gate/<group>/<name>");
  token.check = check;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string_view::npos) return bad("field '" + std::string(parts[i]) + "' is not <option>=<value>");
    const std::string name(parts[i].substr(0, eq));
    bool known = false;
    for (std::string_view option : kOptions) known = known || option == name;
    if (!known) return bad("unknown option '" + name + "'");
    if (token.options.count(name)) return bad("option '" + name + "' given twice");
    IH_TRY_ASSIGN(value, decode(parts[i].substr(eq + 1), "option '" + name + "'"));
    token.options[name] = value;
  }
  return token;
}

Result<PinnedCase> parse_pinned(std::string_view text) {
  std::optional<ReproToken> token;
  std::string reason;
  for (const std::string_view line : split_view(text, '\n')) {
    if (line.substr(0, 7) == "token: ") {
      IH_TRY_ASSIGN(parsed, parse_repro_token(line.substr(7)));
      token = parsed;
    } else if (line.substr(0, 8) == "reason: ") {
      reason = std::string(line.substr(8));
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
