// Small string helpers shared by the model (no I/O).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "models/result.h"

namespace ih {

/// "1, 2, 3" style joining of integers.
std::string join_ints(const std::vector<std::int64_t>& values, std::string_view sep);
/// Python's str.split(sep) for a single-character separator (keeps empty parts).
std::vector<std::string> split(std::string_view text, char sep);
/// split() without copies: the parts are views into `text`.
std::vector<std::string_view> split_views(std::string_view text, char sep);
/// Parses a base-10 integer that must fill the text (optional leading '-'); names the text on error.
Result<std::int64_t> parse_int(std::string_view text);
/// Parses "1.2.3" style lists.
Result<std::vector<std::int64_t>> parse_int_list(std::string_view text, char sep);
/// The UTF-8 character starting at byte `pos` (whole multi-byte sequence), for error messages.
std::string utf8_char_at(std::string_view text, std::size_t pos);
/// Python repr of a str: single-quoted, with escapes (used in error messages Megatron formats with !r).
std::string py_repr(std::string_view text);

}  // namespace ih
