#include "models/text.h"

#include <charconv>

namespace ih {

std::string join_ints(const std::vector<std::int64_t>& values, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < values.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(values[i]);
  }
  return out;
}

std::vector<std::string_view> split_views(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = text.find(sep, start);
    parts.push_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) return parts;
    start = pos + 1;
  }
}

std::vector<std::string> split(std::string_view text, char sep) {
  const std::vector<std::string_view> views = split_views(text, sep);
  return {views.begin(), views.end()};
}

Result<std::int64_t> parse_int(std::string_view text) {
  std::int64_t value = 0;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range)
    return make_error(ErrorKind::overflow, "integer '" + std::string(text) + "' does not fit in 64 bits");
  if (ec != std::errc() || ptr != text.data() + text.size() || text.empty())
    return make_error(ErrorKind::invalid_argument, "'" + std::string(text) + "' is not an integer");
  return value;
}

Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, char sep) {
  std::vector<std::int64_t> out;
  for (const std::string& part : split(text, sep)) {
    IH_TRY_ASSIGN(value, parse_int(part));
    out.push_back(value);
  }
  return out;
}

std::string utf8_char_at(std::string_view text, std::size_t pos) {
  const unsigned char lead = static_cast<unsigned char>(text[pos]);
  std::size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 1;
  if (pos + len > text.size()) len = 1;
  return std::string(text.substr(pos, len));
}

std::string py_repr(std::string_view text) {
  const bool use_double = text.find('\'') != std::string_view::npos && text.find('"') == std::string_view::npos;
  const char quote = use_double ? '"' : '\'';
  std::string out(1, quote);
  for (const char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == quote)
      out += std::string("\\") + quote;
    else if (c == '\n')
      out += "\\n";
    else if (c == '\t')
      out += "\\t";
    else if (c == '\r')
      out += "\\r";
    else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[(c >> 4) & 0xF];
      out += hex[c & 0xF];
    } else
      out += c;
  }
  return out + quote;
}

}  // namespace ih
