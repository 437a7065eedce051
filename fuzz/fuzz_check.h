// Shared by the fuzz targets: a violated invariant is a finding, so it aborts with a message
// (libFuzzer then saves the input); oversized inputs are rejected early (OSS-Fuzz convention).
// The invariants themselves live in properties/invariants.h, shared with the properties.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#define IH_FUZZ_CHECK(condition, what)                                         \
  do {                                                                         \
    if (!(condition)) {                                                        \
      std::fprintf(stderr, "INVARIANT VIOLATED: %s (%s)\n", what, #condition); \
      std::abort();                                                            \
    }                                                                          \
  } while (0)

/// Runs an invariant of properties/invariants.h; a non-empty answer (what broke) is a finding.
#define IH_FUZZ_INVARIANT(expr)                                                             \
  do {                                                                                      \
    const std::string ih_broken_ = (expr);                                                  \
    if (!ih_broken_.empty()) {                                                              \
      std::fprintf(stderr, "INVARIANT VIOLATED: %s\n  by %s\n", ih_broken_.c_str(), #expr); \
      std::abort();                                                                         \
    }                                                                                       \
  } while (0)
