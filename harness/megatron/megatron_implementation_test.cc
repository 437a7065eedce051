// The Megatron client's reading of adapter replies, against a stand-in adapter (a few lines of Python that
// answer the handshake, then every request with the reply the test gives): which failures carry a verdict.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <fstream>
#include <string>

#include "harness/megatron/megatron_implementation.h"

namespace ih {
namespace {

/// Starts a client whose adapter answers the handshake, then `reply` (one JSON line) to every request.
std::unique_ptr<MegatronImplementation> client_replying(const std::string& reply) {
  char dir[] = "/tmp/ih-fake-adapter-XXXXXX";
  if (!mkdtemp(dir)) return nullptr;
  const std::string script = std::string(dir) + "/adapter.py";
  std::ofstream(script) << "import sys\n"
                           "sys.stdin.readline()\n"
                           "print('{\"ok\": true, \"supports\": [\"pattern_maps\"], \"megatron_version\": \"0\"}',"
                           " flush=True)\n"
                           "for line in sys.stdin:\n"
                           "    print('"
                        << reply << "', flush=True)\n";
  MegatronOptions options;
  options.python = "/usr/bin/python3";
  options.adapter = script;
  auto started = MegatronImplementation::start(options);
  if (!started.ok()) {
    ADD_FAILURE() << started.error().message;
    return nullptr;
  }
  return std::move(*started);
}

TEST(MegatronClient, AnAdapterBugIsAHarnessErrorNeverAVerdict) {
  auto client = client_replying(R"({"ok": false, "error": {"kind": "internal", "message": "WorldError: world worker )"
                                R"(pipe broken"}})");
  ASSERT_NE(client, nullptr);
  const auto answer = client->layer_maps("M*-");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().kind, seam_kind::harness_error);
  EXPECT_NE(answer.error().message.find("world worker pipe broken"), std::string::npos);
}

TEST(MegatronClient, MegatronsOwnKindsStayMegatrons) {
  auto client = client_replying(R"({"ok": false, "error": {"kind": "mixed_mlp_kinds", "message": "mixes dense"}})");
  ASSERT_NE(client, nullptr);
  const auto answer = client->layer_maps("M*-E");
  ASSERT_FALSE(answer.ok());
  EXPECT_NE(answer.error().kind, seam_kind::harness_error);
  EXPECT_FALSE(is_no_answer(answer.error().kind));
}

}  // namespace
}  // namespace ih
