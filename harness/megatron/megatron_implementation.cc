// The Megatron client's process side: starting the adapter (the version handshake), which operations it
// serves, and one request and its reply. The operations themselves: megatron_model_ops.cc (patterns,
// retargeting, splits, integrity, model dumps), megatron_gtp_ops.cc, megatron_load_state.cc and
// megatron_scenarios.cc; what they share on the wire: megatron_wire.h.
#include "harness/megatron/megatron_implementation.h"

#include <cstdlib>
#include <filesystem>
#include <utility>

#include "harness/coverage/coverage_context.h"
#include "harness/install/data_dir.h"
#include "harness/megatron/adapter_replies.h"
#include "harness/megatron/megatron_wire.h"

namespace ih {
namespace {

// What an adapter gets to close its worlds (each waits up to 5 s for its workers) and write its coverage data.
constexpr std::chrono::milliseconds kCoverageStopGrace{60000};

const char* op_name(Operation op) {
  switch (op) {
    case Operation::parse_pattern: return "parse_pattern";
    case Operation::layer_maps: return "pattern_maps";
    case Operation::select_segment: return "select_segment";
    case Operation::retarget: return "retarget";
    case Operation::fsdp_key: return "fsdp_key";
    case Operation::fsdp_retarget: return "fsdp_retarget";
    case Operation::split_chunks: return "split_chunks";
    case Operation::megatron_validation: return "integrity";
    case Operation::gtp_padding: return "gtp_padding";
    case Operation::model_state_dict: return "model_dump";
    case Operation::gtp_pieces: return "gtp_pieces";  // gather: the GDP mixer; shard split: the PR's factory
    case Operation::gtp_merge: return "gtp_merge";
    case Operation::gtp_param_entry: return "gtp_param_entry";
    case Operation::load_state: return "load_state";
    case Operation::integrity: return "integrity_report";
    case Operation::optimizer_resume: return "optimizer_resume";
    case Operation::fresh_retarget: return "gtp_fresh_retarget";
    case Operation::load_orderings: return "load_orderings";
    case Operation::all_padding_load: return "gtp_all_padding_load";
    case Operation::single_expert_load: return "single_expert_load";
  }
  return "";
}

}  // namespace

std::string default_megatron_python() {
  if (const char* venv = std::getenv("INTEROP_MEGATRON_VENV")) return std::string(venv) + "/bin/python";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/interop-harness/megatron-venv/bin/python";
}

bool is_known_fix(const std::string& name) { return name == "to_state_dict_order"; }

Result<std::unique_ptr<MegatronImplementation>> MegatronImplementation::start(MegatronOptions options) {
  if (options.python.empty()) options.python = default_megatron_python();
  if (options.adapter.empty())
    options.adapter = (ih::install::adapter_dir() / "adapter.py").string();  // installed or source tree
  if (!std::filesystem::exists(options.python))
    return make_error(seam_kind::harness_error,
                      "no Python for the Megatron adapter at " + options.python +
                          "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)");
  if (!std::filesystem::exists(options.adapter))
    return make_error(seam_kind::harness_error, "adapter script not found: " + options.adapter);
  if (options.megatron_path) {
    // Never fall back to the installed package: a wrong path must not gate something else.
    std::error_code ec;
    const std::filesystem::path core =
        std::filesystem::path(*options.megatron_path) / "megatron" / "core" / "__init__.py";
    if (!std::filesystem::is_regular_file(core, ec))
      return make_error(ErrorKind::invalid_argument,
                        "--megatron-path " + *options.megatron_path +
                            " is not a Megatron-LM checkout: no megatron/core/__init__.py there");
  }
  std::vector<std::string> argv = {options.python, options.adapter};
  if (options.megatron_path) argv.insert(argv.end(), {"--megatron-path", *options.megatron_path});
  if (options.mutant) argv.insert(argv.end(), {"--mutant", *options.mutant});
  if (options.candidate != Candidate::none)
    argv.insert(argv.end(), {"--candidate", std::string(to_string(options.candidate))});
  if (options.fix) argv.insert(argv.end(), {"--fix", *options.fix});
  IH_TRY_ASSIGN(process, LineSubprocess::start(argv));
  // With coverage on, the adapter saves its data after its worlds' workers saved theirs (gate --coverage).
  if (coverage::collection()) process.set_stop_grace(kCoverageStopGrace);
  std::unique_ptr<MegatronImplementation> out(new MegatronImplementation(std::move(process), options));
  auto reply_text =
      out->process_.request(json::dump(json::Json{{"op", "hello"}, {"protocol", 1}}), options.startup_timeout);
  if (!reply_text.ok()) return reply_text.error().with_context("starting the Megatron adapter");
  IH_TRY_ASSIGN(reply, adapter_reply(*reply_text));
  if (!reply["ok"].get<bool>()) {
    const json::Json why = reply.value("error", json::Json::object());
    const Error error = json::error_from_json(why);
    // Megatron's own module raised while being imported (the adapter tells it from a missing dependency).
    if (why.value("kind", "") == "megatron_error")
      return make_error(seam_kind::does_not_import,
                        std::string(kDoesNotImport) + ": " + why.value("message", std::string()));
    return make_error(seam_kind::harness_error,
                      "the Megatron adapter cannot serve (is torch and megatron.core installed? "
                      "run `bash ci/install-megatron.sh`): " +
                          error.message + "\nadapter stderr:\n" + out->process_.stderr_tail());
  }
  IH_TRY_STATUS(decode_result("hello", reply, [&](const json::Json& hello) { return out->read_hello(hello); }));
  return out;
}

Status MegatronImplementation::read_hello(const json::Json& hello) {
  for (const std::string& op : hello.at("supports").get<std::vector<std::string>>()) supported_ops_.insert(op);
  if (hello.contains("unsupported") && hello["unsupported"].is_object())
    for (const auto& [op, why] : hello["unsupported"].items())
      if (why.is_string()) unsupported_reasons_[op] = why.get<std::string>();
  // A candidate the adapter did not apply (the checkout has its own factory) is not in the name: the
  // checkout's design is what runs.
  const json::Json candidate = hello.contains("candidate") ? hello["candidate"] : json::Json(nullptr);
  const bool candidate_applied = candidate.is_object() && candidate.value("applied", false);
  std::string design_note;
  if (options_.candidate != Candidate::none)
    design_note = candidate_applied ? " [" + candidate_label(options_.candidate) + "]"
                                    : " [--candidate " + std::string(to_string(options_.candidate)) + " not applied: " +
                                          (candidate.is_object() ? candidate.value("reason", std::string("?"))
                                                                 : std::string("the adapter did not answer")) +
                                          "]";
  if (options_.fix) design_note += " [fix " + *options_.fix + ", not in Megatron's code]";
  const std::string version = hello.value("megatron_version", std::string("?"));
  const std::string path = hello.value("megatron_path", std::string("?"));
  const json::Json revision = hello.contains("megatron_revision") ? hello["megatron_revision"] : json::Json(nullptr);
  identity_ = json::Json{{"path", path},
                         {"version", version},
                         {"revision", revision},
                         {"torch_version", hello.value("torch_version", std::string("?"))},
                         {"source", options_.megatron_path ? "checkout" : "installed package"}};
  target_ = "megatron-core " + version + " at " + path +
            (revision.is_string() ? " (revision " + revision.get<std::string>() + ")" : std::string(" (no revision)")) +
            (options_.megatron_path ? "" : " [installed package]") + design_note;
  name_ = "megatron-core " + version +
          (revision.is_string() ? " @" + revision.get<std::string>().substr(0, 10) : std::string()) + " (torch " +
          hello.value("torch_version", std::string("?")) + ")" +
          (options_.mutant ? " mutant:" + *options_.mutant : "") + design_note;
  return Ok{};
}

bool MegatronImplementation::supports(Operation op) const { return supported_ops_.count(op_name(op)) > 0; }

std::string MegatronImplementation::unsupported_reason(Operation op) const {
  if (supports(op)) return "";
  const std::string name = op_name(op);
  if (name.empty()) return "the Megatron client does not implement this operation yet";
  auto it = unsupported_reasons_.find(name);
  return it != unsupported_reasons_.end() ? it->second : name + " is not served by this adapter";
}

Result<json::Json> MegatronImplementation::call(const std::string& op, json::Json fields) {
  fields["op"] = op;
  if (coverage::collection()) fields["coverage_context"] = coverage::context();  // the check this request serves
  IH_TRY_ASSIGN(text, process_.request(json::dump(fields), options_.reply_timeout));
  IH_TRY_ASSIGN(reply, adapter_reply(text));
  return adapter_result(reply);
}

CodeIdentity MegatronImplementation::code_identity() const {
  const auto text = [&](const char* field) {
    return identity_.contains(field) && identity_[field].is_string() ? identity_[field].get<std::string>()
                                                                     : std::string();
  };
  return {text("version"), text("revision")};
}

}  // namespace ih
