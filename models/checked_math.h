// 64-bit size arithmetic that reports overflow instead of wrapping.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "models/result.h"

namespace ih {

inline Result<std::int64_t> checked_add(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_add_overflow(a, b, &out))
    return make_error(ErrorKind::overflow,
                      std::string(what) + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows 64 bits");
  return out;
}

inline Result<std::int64_t> checked_mul(std::int64_t a, std::int64_t b, std::string_view what) {
  std::int64_t out = 0;
  if (__builtin_mul_overflow(a, b, &out))
    return make_error(ErrorKind::overflow,
                      std::string(what) + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows 64 bits");
  return out;
}

/// Python's floor division and modulo (spec 0: `//` and `%` follow Python).
inline std::int64_t floor_div(std::int64_t a, std::int64_t b) {
  std::int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
inline std::int64_t floor_mod(std::int64_t a, std::int64_t b) { return a - floor_div(a, b) * b; }

}  // namespace ih
