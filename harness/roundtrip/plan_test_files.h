// What the round trip's file-writing unit tests share (world_plan_test.cc, world_handshake_test.cc): a fresh folder
// per test and a JSON file read back.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "codec/json_codec.h"

namespace ih {

/// A fresh folder under $TMPDIR (else /tmp), removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& prefix = "ih-world-plan-test") {
    const char* base = std::getenv("TMPDIR");
    std::string templ = std::string(base && *base ? base : "/tmp") + "/" + prefix + "-XXXXXX";
    if (mkdtemp(templ.data())) path = templ;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

/// The JSON file at `path` (fails the test when it does not parse).
inline json::Json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  auto parsed = json::parse(text.str());
  EXPECT_TRUE(parsed.ok()) << path;
  return parsed.ok() ? *parsed : json::Json();
}

}  // namespace ih
