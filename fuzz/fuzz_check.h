// Shared by the fuzz targets: a violated invariant is a finding, so it aborts with a message
// (libFuzzer then saves the input); oversized inputs are rejected early (OSS-Fuzz convention).
#pragma once

#include <cstdio>
#include <cstdlib>

#define IH_FUZZ_CHECK(condition, what)                                            \
  do {                                                                            \
    if (!(condition)) {                                                           \
      std::fprintf(stderr, "INVARIANT VIOLATED: %s (%s)\n", what, #condition);    \
      std::abort();                                                               \
    }                                                                             \
  } while (0)
