// The Megatron client's requests and its reading of replies, against a stand-in adapter
// (testdata/fake_adapter.py: the line protocol of docs/adapter-protocol.md as each test scripts it, no
// torch): the handshake, answers, error replies, lines that break the protocol, an adapter that hangs or
// dies. Each way a reply can go wrong must give the error kind, and so the Outcome, that says who broke:
// Megatron (a finding), the operation missing here (not run), or the harness (no verdict).
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "harness/megatron/adapter_mutants.h"
#include "harness/megatron/megatron_implementation.h"
#include "seam/outcome.h"

#ifndef IH_FAKE_ADAPTER
#error "IH_FAKE_ADAPTER names testdata/fake_adapter.py (harness/CMakeLists.txt)"
#endif

namespace ih {
namespace {

using namespace std::chrono_literals;

/// A stand-in adapter scripted by one test: its hello, its replies in turn, and the log of what it got.
class FakeAdapter {
 public:
  FakeAdapter() {
    char dir[] = "/tmp/ih-fake-adapter-XXXXXX";
    dir_ = mkdtemp(dir) ? dir : "/tmp";
    options.python = "/usr/bin/python3";
    options.adapter = IH_FAKE_ADAPTER;
    options.startup_timeout = 20s;
    options.reply_timeout = 20s;
  }
  ~FakeAdapter() {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }

  std::optional<std::string> hello;  // the first request's answer (default: serves pattern_maps)
  std::vector<std::string> replies;  // every later request's, in turn; the last repeats
  MegatronOptions options;

  Result<std::unique_ptr<MegatronImplementation>> start() {
    json::Json script{{"log", log_path()}, {"replies", replies}};
    if (hello) script["hello"] = *hello;
    setenv("IH_FAKE_ADAPTER", json::dump(script).c_str(), 1);  // the adapter's environment: read at its start
    return MegatronImplementation::start(options);
  }
  /// A started client (a failed start fails the test).
  std::unique_ptr<MegatronImplementation> started() {
    auto client = start();
    if (!client.ok()) {
      ADD_FAILURE() << to_string(client.error().kind) << ": " << client.error().message;
      return nullptr;
    }
    return std::move(*client);
  }
  /// A scratch folder of this test's own.
  const std::string& folder() const { return dir_; }
  /// The adapter's arguments (JSON), then every request line it read.
  std::vector<std::string> logged() const {
    std::ifstream in(log_path());
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  }

 private:
  std::string log_path() const { return dir_ + "/requests.log"; }
  std::string dir_;
};

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

/// A logged line read as JSON, compared field by field (the order of fields is not the protocol's).
nlohmann::json request(const std::string& line) { return nlohmann::json::parse(line); }

// ---- the handshake ---------------------------------------------------------------------------------------

TEST(MegatronClientHandshake, AsksForProtocolOneAndPassesTheTargetOptions) {
  FakeAdapter fake;
  fake.options.mutant = "maps_accept_mixed";
  fake.options.candidate = Candidate::shard_split;
  fake.options.fix = "to_state_dict_order";
  ASSERT_NE(fake.started(), nullptr);
  const auto logged = fake.logged();
  ASSERT_EQ(logged.size(), 2u);
  EXPECT_EQ(request(logged[0]), nlohmann::json({"--mutant", "maps_accept_mixed", "--candidate", "shard-split", "--fix",
                                                "to_state_dict_order"}));
  EXPECT_EQ(request(logged[1]), (nlohmann::json{{"op", "hello"}, {"protocol", 1}}));
}

TEST(MegatronClientHandshake, TheHelloNamesTheTargetAndWhatItServes) {
  FakeAdapter fake;
  fake.options.mutant = "maps_accept_mixed";
  fake.hello = R"({"ok": true, "protocol": 1, "megatron_version": "0.19.2", "megatron_path": "/site/megatron",)"
               R"( "megatron_revision": "d98e8a64dd00", "torch_version": "2.15.0", "supports": ["pattern_maps"],)"
               R"( "unsupported": {"gtp_pieces": "needs gdp: no module gated_delta_product"}})";
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  EXPECT_TRUE(client->supports(Operation::layer_maps));
  EXPECT_FALSE(client->supports(Operation::gtp_pieces));
  EXPECT_EQ(client->unsupported_reason(Operation::layer_maps), "");
  EXPECT_EQ(client->unsupported_reason(Operation::gtp_pieces), "needs gdp: no module gated_delta_product");
  EXPECT_EQ(client->unsupported_reason(Operation::retarget), "retarget is not served by this adapter");
  EXPECT_EQ(client->describe_target(),
            "megatron-core 0.19.2 at /site/megatron (revision d98e8a64dd00) [installed package]");
  EXPECT_EQ(client->name(), "megatron-core 0.19.2 @d98e8a64dd (torch 2.15.0) mutant:maps_accept_mixed");
  EXPECT_EQ(client->code_identity().version, "0.19.2");
  EXPECT_EQ(client->code_identity().revision, "d98e8a64dd00");
}

TEST(MegatronClientHandshake, AnAdapterThatCannotServeIsAHarnessErrorSayingWhatToInstall) {
  FakeAdapter fake;
  fake.hello = R"({"ok": false, "error": {"kind": "megatron_import", "message": "No module named 'megatron'"}})";
  const auto started = fake.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(started.error().message, "No module named 'megatron'")) << started.error().message;
  EXPECT_TRUE(contains(started.error().message, "ci/install-megatron.sh")) << started.error().message;
}

TEST(MegatronClientHandshake, AMegatronWhoseOwnModuleRaisesAtImportDoesNotImportAVerdictOnMegatron) {
  FakeAdapter fake;
  fake.hello = R"j({"ok": false, "error": {"kind": "megatron_error", "message": "NameError: name 'X' is not )j"
               R"j(defined (at megatron/core/dist_checkpointing/mapping.py:9 in <module>)"}})j";
  const auto started = fake.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().kind, seam_kind::does_not_import);
  EXPECT_EQ(started.error().message,
            "Megatron does not import: NameError: name 'X' is not defined (at "
            "megatron/core/dist_checkpointing/mapping.py:9 in <module>)");
}

TEST(MegatronClientHandshake, AHelloThatNeverComesIsATimeout) {
  FakeAdapter fake;
  fake.hello = "!hang";
  fake.options.startup_timeout = 300ms;
  const auto started = fake.start();
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.error().kind, seam_kind::timeout);
  EXPECT_TRUE(contains(started.error().message, "starting the Megatron adapter")) << started.error().message;
}

TEST(MegatronClientHandshake, AnAdapterThatDiesStartingIsAHarnessErrorWithItsStderr) {
  for (const std::string way : {"!crash", "!close"}) {
    FakeAdapter fake;
    fake.hello = way;
    const auto started = fake.start();
    ASSERT_FALSE(started.ok()) << way;
    EXPECT_EQ(started.error().kind, seam_kind::harness_error) << way;
    if (way == "!crash")
      EXPECT_TRUE(contains(started.error().message, "crashed on purpose")) << started.error().message;
  }
}

TEST(MegatronClientHandshake, AHelloThatBreaksTheProtocolIsAHarnessError) {
  for (const std::string hello :
       {"Traceback (most recent call last):", "[1, 2]", R"({"ok": "yes"})",
        R"({"ok": true, "protocol": 1, "supports": [1]})",  // an ok hello whose fields are of another type
        R"({"ok": true, "protocol": 1, "supports": "pattern_maps"})",
        R"({"ok": true, "protocol": 1, "supports": [], "megatron_version": 19})"}) {
    FakeAdapter fake;
    fake.hello = hello;
    const auto started = fake.start();
    ASSERT_FALSE(started.ok()) << hello;
    EXPECT_EQ(started.error().kind, seam_kind::harness_error) << hello << ": " << started.error().message;
  }
}

TEST(MegatronClientHandshake, NoPythonOrNoAdapterScriptIsAHarnessErrorNamingIt) {
  FakeAdapter no_python;
  no_python.options.python = "/nonexistent/venv/bin/python";
  const auto without_python = no_python.start();
  ASSERT_FALSE(without_python.ok());
  EXPECT_EQ(without_python.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(without_python.error().message, "/nonexistent/venv/bin/python"));
  EXPECT_TRUE(contains(without_python.error().message, "ci/install-megatron.sh"));
  FakeAdapter no_script;
  no_script.options.adapter = "/nonexistent/adapter.py";
  const auto without_script = no_script.start();
  ASSERT_FALSE(without_script.ok());
  EXPECT_EQ(without_script.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(without_script.error().message, "/nonexistent/adapter.py"));
}

// ---- requests and their answers --------------------------------------------------------------------------

TEST(MegatronClientReplies, ARequestCarriesItsOpAndFieldsAndTheResultIsRead) {
  FakeAdapter fake;
  fake.replies = {R"({"ok": true, "result": {"ok": true, "num_gpt_layers": 2, "attention_to_gpt": [[1, 0], [4, 1]],)"
                  R"( "mlp_to_gpt": [[2, 0], [5, 1]], "fresh_init": [0, 3]}})"};
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  const auto maps = client->layer_maps("M*-M*-");
  ASSERT_TRUE(maps.ok()) << maps.error().message;
  EXPECT_EQ(maps->num_gpt_layers, 2);
  EXPECT_EQ(maps->attention_to_gpt, (std::vector<std::pair<std::int64_t, std::int64_t>>{{1, 0}, {4, 1}}));
  EXPECT_EQ(maps->fresh_init, (std::vector<std::int64_t>{0, 3}));
  const auto logged = fake.logged();
  ASSERT_EQ(logged.size(), 3u);
  EXPECT_EQ(request(logged[2]), (nlohmann::json{{"op", "pattern_maps"}, {"pattern", "M*-M*-"}}));
}

TEST(MegatronClientReplies, EachErrorReplyIsTypedByWhoBroke) {
  struct Case {
    std::string error;  // the reply's "error" object and any field beside it
    ErrorKind kind;
    Outcome outcome;
  };
  const std::vector<Case> cases = {
      // Megatron's own refusal of the input: its kind, a finding when the reference disagrees.
      {R"("error": {"kind": "mixed_mlp_kinds", "message": "mixes dense"})", ErrorKind::mixed_mlp_kinds,
       Outcome::failed},
      // Megatron raised something untyped: still Megatron's, never the harness's.
      {R"("error": {"kind": "unknown", "message": "RuntimeError: boom"})", ErrorKind::invalid_argument,
       Outcome::failed},
      // The operation this Megatron lacks: not run.
      {R"("unsupported": true, "error": {"kind": "unsupported", "message": "needs gdp"})", seam_kind::unsupported,
       Outcome::not_run},
      {R"("unsupported": true, "error": {"kind": "megatron_error", "message": "no GTP group"})", seam_kind::unsupported,
       Outcome::not_run},  // the flag alone says so
      // The adapter's own limit: this target cannot answer it here, not run.
      {R"("error": {"kind": "too_large", "message": "over 50 M cells"})", seam_kind::unsupported, Outcome::not_run},
      {R"("error": {"kind": "timeout", "message": "rank 3 did not answer"})", seam_kind::timeout, Outcome::timeout},
      // The harness broke (the adapter, its worlds, the client's request): no verdict.
      {R"("error": {"kind": "internal", "message": "WorldError: world worker pipe broken"})", seam_kind::harness_error,
       Outcome::harness_error},
      {R"("error": {"kind": "harness_error", "message": "[world_failed] gloo"})", seam_kind::harness_error,
       Outcome::harness_error},
      {R"("error": {"kind": "bad_request", "message": "missing field pattern"})", seam_kind::harness_error,
       Outcome::harness_error},
      {R"("error": {"kind": "mutant_failed", "message": "target not found"})", seam_kind::harness_error,
       Outcome::harness_error},
      {R"("error": {"kind": "protocol_mismatch", "message": "protocol 2"})", seam_kind::harness_error,
       Outcome::harness_error}};
  for (const Case& c : cases) {
    FakeAdapter fake;
    fake.replies = {R"({"ok": false, )" + c.error + "}"};
    const auto client = fake.started();
    ASSERT_NE(client, nullptr);
    const auto answer = client->layer_maps("M*-");
    ASSERT_FALSE(answer.ok()) << c.error;
    EXPECT_EQ(answer.error().kind, c.kind) << c.error << " -> " << to_string(answer.error().kind);
    EXPECT_EQ(outcome_of_error(answer.error().kind), c.outcome) << c.error;
    const std::string message = json::parse("{" + c.error + "}").value()["error"]["message"].get<std::string>();
    EXPECT_TRUE(contains(answer.error().message, message)) << answer.error().message;
  }
}

TEST(MegatronClientReplies, AReplyThatBreaksTheProtocolIsAHarnessError) {
  for (const std::string reply : {"Warning: torch is old", "", "[1, 2]", R"({"result": {}})", R"({"ok": "yes"})",
                                  R"({"ok": true})", R"({"ok": false, "error": "just text"})"}) {
    FakeAdapter fake;
    fake.replies = {reply};
    const auto client = fake.started();
    ASSERT_NE(client, nullptr);
    const auto answer = client->list_mutants();
    ASSERT_FALSE(answer.ok()) << reply;
    EXPECT_EQ(answer.error().kind, seam_kind::harness_error)
        << "reply '" << reply << "': " << to_string(answer.error().kind) << ": " << answer.error().message;
  }
}

/// The error a client answer carries, if any (for answers of any type).
template <class T>
std::optional<Error> error_of(const Result<T>& answer) {
  return answer.ok() ? std::nullopt : std::optional<Error>(answer.error());
}

TEST(MegatronClientReplies, AnOkReplyMissingAFieldOrOfAnotherTypeIsAHarnessErrorNamingTheOp) {
  using Ask = std::function<std::optional<Error>(MegatronImplementation&)>;
  const Ask parse = [](MegatronImplementation& c) { return error_of(c.parse_pattern("M*-")); };
  const Ask segment = [](MegatronImplementation& c) { return error_of(c.select_segment("M*-", {})); };
  const Ask maps = [](MegatronImplementation& c) { return error_of(c.layer_maps("M*-")); };
  const Ask problems = [](MegatronImplementation& c) { return error_of(c.integrity(GlobalMetadata{}, std::nullopt)); };
  const Ask validation = [](MegatronImplementation& c) { return error_of(c.megatron_validation(GlobalMetadata{})); };
  const Ask padding = [](MegatronImplementation& c) { return error_of(c.gtp_padding(10, 2, 1)); };
  const Ask key = [](MegatronImplementation& c) { return error_of(c.fsdp_key("M*-", "decoder.x", std::nullopt)); };
  const std::vector<std::pair<std::string, Ask>> cases = {
      {R"({"mtp": null, "depth": 0})", parse},                   // no main pattern: not "no main"
      {R"({"main": 7, "mtp": null, "depth": 0})", parse},        // a number for a string
      {R"({"main": "M*-", "mtp": null, "depth": "1"})", parse},  // a string for a number
      {R"({"offset": 0})", segment},                             // no layers: not an empty stage
      {R"({"layers": "M*", "offset": null})", segment},          // no offset number
      {R"({"ok": true, "num_gpt_layers": "2"})", maps},          // the codec's bad_json, retyped
      {R"({"ok": true})", problems},                             // no problems list: not "no problems"
      {R"({"problems": [{"kind": "missing_key"}]})", problems},  // a problem without its key
      {R"({"problems": {"kind": "missing_key"}})", problems},    // an object for a list
      {R"({"details": [{"kind": "assertion", "key": 1, "message": "m"}]})", validation},
      {R"({"dcp_plan_errors": [1]})", validation},  // and no details
      {R"({"shard_rows": 5})", padding},            // no pad length: not -1
      {R"({"shard_rows": 5, "pad_length": [0]})", padding},
      {R"({"key": 3})", key}};
  FakeAdapter fake;
  for (const auto& [result, ask] : cases) fake.replies.push_back(R"({"ok": true, "result": )" + result + "}");
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  for (const auto& [result, ask] : cases) {
    std::optional<Error> error;
    try {
      error = ask(*client);
    } catch (const std::exception& e) {  // what the client must never let escape
      ADD_FAILURE() << "an ok result " << result << " threw " << e.what();
      continue;
    }
    if (!error) {
      ADD_FAILURE() << "an ok result " << result << " was read as an answer";
      continue;
    }
    EXPECT_EQ(error->kind, seam_kind::harness_error) << result << ": " << to_string(error->kind);
    EXPECT_TRUE(contains(error->message, "adapter protocol")) << error->message;
  }
}

TEST(MegatronClientReplies, AWellFormedOkReplyIsReadFieldByField) {
  FakeAdapter fake;
  fake.replies = {R"({"ok": true, "result": {"main": "M*-", "mtp": "*-", "depth": 2}})",
                  R"({"ok": true, "result": {"shard_rows": 5, "pad_length": 0}})"};
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  const auto parsed = client->parse_pattern("M*-/*-/*-");
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(parsed->main, "M*-");
  EXPECT_EQ(parsed->mtp, "*-");
  EXPECT_EQ(parsed->mtp_depth, 2);
  const auto padding = client->gtp_padding(10, 2, 1);
  ASSERT_TRUE(padding.ok()) << padding.error().message;
  EXPECT_EQ(padding->shard_rows, 5);
  EXPECT_EQ(padding->pad, 0);
  EXPECT_EQ(padding->padded_rows, 10);
}

TEST(MegatronClientReplies, AReplyThatNeverComesIsATimeoutAndTheAdapterIsEnded) {
  FakeAdapter fake;
  fake.replies = {"!hang"};
  fake.options.reply_timeout = 300ms;
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  const auto answer = client->layer_maps("M*-");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().kind, seam_kind::timeout);
  EXPECT_EQ(outcome_of_error(answer.error().kind), Outcome::timeout);
  const auto after = client->layer_maps("M*-");  // the hung adapter was killed: nothing answers now
  ASSERT_FALSE(after.ok());
  EXPECT_EQ(after.error().kind, seam_kind::harness_error);
}

TEST(MegatronClientReplies, AnAdapterThatDiesMidRequestIsAHarnessErrorWithItsStderr) {
  FakeAdapter fake;
  fake.replies = {"!crash"};
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  const auto answer = client->layer_maps("M*-");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(answer.error().message, "crashed on purpose")) << answer.error().message;
  EXPECT_TRUE(contains(client->adapter_stderr(), "crashed on purpose"));
}

TEST(MegatronClientReplies, LaterRequestsGetTheirOwnRepliesAfterAnError) {
  FakeAdapter fake;
  fake.replies = {R"({"ok": false, "error": {"kind": "mixed_mlp_kinds", "message": "mixes"}})",
                  R"({"ok": true, "result": {"mutants": [{"name": "maps_accept_mixed"}]}})"};
  const auto client = fake.started();
  ASSERT_NE(client, nullptr);
  EXPECT_FALSE(client->layer_maps("M*-E").ok());
  const auto listed = client->list_mutants();
  ASSERT_TRUE(listed.ok()) << listed.error().message;
  EXPECT_EQ((*listed)["mutants"][0]["name"], "maps_accept_mixed");
  EXPECT_EQ(request(fake.logged().back()), (nlohmann::json{{"op", "mutants"}}));
}

// ---- the mutant names, read without starting the adapter ---------------------------------------------------

TEST(AdapterMutantNames, AreTheTablesReadWithoutTorch) {
  MegatronOptions options;
  options.python = "/usr/bin/python3";               // no torch there: the listing must not need it
  const auto names = adapter_mutant_names(options);  // the source tree's adapter.py
  ASSERT_TRUE(names.ok()) << names.error().message;
  EXPECT_NE(std::find(names->begin(), names->end(), "maps_accept_mixed"), names->end());
  EXPECT_NE(std::find(names->begin(), names->end(), "candidate_no_zero_fill"), names->end());
  EXPECT_EQ(std::find(names->begin(), names->end(), ""), names->end());
}

TEST(AdapterMutantNames, AListingThatCannotRunIsAHarnessError) {
  MegatronOptions options;
  options.python = "/nonexistent/venv/bin/python";
  const auto no_python = adapter_mutant_names(options);
  ASSERT_FALSE(no_python.ok());
  EXPECT_EQ(no_python.error().kind, seam_kind::harness_error);
  EXPECT_TRUE(contains(no_python.error().message, "/nonexistent/venv/bin/python")) << no_python.error().message;
  options.python = "/usr/bin/python3";
  for (const std::string body : {"import sys\nprint('a broken table', file=sys.stderr)\nsys.exit(1)\n", "\n"}) {
    FakeAdapter scratch;  // for its folder
    options.adapter = scratch.folder() + "/adapter.py";
    std::ofstream(options.adapter) << body;
    const auto failing = adapter_mutant_names(options);
    ASSERT_FALSE(failing.ok()) << body;  // exit 1, or no names at all
    EXPECT_EQ(failing.error().kind, seam_kind::harness_error);
  }
}

}  // namespace
}  // namespace ih
