#include "harness/megatron/megatron_implementation.h"

#include <cstdlib>
#include <filesystem>

#ifndef IH_SOURCE_DIR_PATH
#define IH_SOURCE_DIR_PATH "."
#endif

namespace ih {
namespace {

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
    case Operation::gtp_pieces: return "gtp_split";  // the PR's _gtp_split_tensor_factory
    case Operation::gtp_merge:
    case Operation::gtp_param_entry:
    case Operation::load_state:
    case Operation::integrity: return "";
  }
  return "";
}

json::Json nullable(std::optional<std::string_view> text) { return text ? json::Json(std::string(*text)) : json::Json(nullptr); }
json::Json nullable_int(std::optional<std::int64_t> v) { return v ? json::Json(*v) : json::Json(nullptr); }

json::Json keys_or_null(const std::optional<std::vector<std::string>>& keys) { return keys ? json::Json(*keys) : json::Json(nullptr); }

Error protocol_error(const std::string& what, const json::Json& reply) {
  return make_error(ErrorKind::harness_error, "adapter protocol: " + what + " in reply " + json::dump(reply));
}

}  // namespace

std::string default_megatron_python() {
  if (const char* venv = std::getenv("INTEROP_MEGATRON_VENV")) return std::string(venv) + "/bin/python";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/interop-harness/megatron-venv/bin/python";
}

Result<std::unique_ptr<MegatronImplementation>> MegatronImplementation::start(MegatronOptions options) {
  if (options.python.empty()) options.python = default_megatron_python();
  if (options.adapter.empty()) options.adapter = std::string(IH_SOURCE_DIR_PATH) + "/harness/megatron/adapter/adapter.py";
  if (!std::filesystem::exists(options.python))
    return make_error(ErrorKind::harness_error, "no Python for the Megatron adapter at " + options.python +
                                                    "; run `bash ci/install-megatron.sh` (or set INTEROP_MEGATRON_VENV)");
  if (!std::filesystem::exists(options.adapter))
    return make_error(ErrorKind::harness_error, "adapter script not found: " + options.adapter);
  std::vector<std::string> argv = {options.python, options.adapter};
  if (options.megatron_path) argv.insert(argv.end(), {"--megatron-path", *options.megatron_path});
  if (options.mutant) argv.insert(argv.end(), {"--mutant", *options.mutant});
  IH_TRY_ASSIGN(process, LineSubprocess::start(argv));
  std::unique_ptr<MegatronImplementation> out(new MegatronImplementation(std::move(process), options));
  auto reply_text = out->process_.request(json::dump(json::Json{{"op", "hello"}, {"protocol", 1}}), options.startup_timeout);
  if (!reply_text.ok()) return reply_text.error().with_context("starting the Megatron adapter");
  IH_TRY_ASSIGN(reply, json::parse(*reply_text));
  if (!reply.value("ok", false)) {
    const Error error = json::error_from_json(reply.value("error", json::Json::object()));
    return make_error(ErrorKind::harness_error, "the Megatron adapter cannot serve (is torch and megatron.core installed? "
                                                "run `bash ci/install-megatron.sh`): " + error.message +
                                                "\nadapter stderr:\n" + out->process_.stderr_tail());
  }
  for (const auto& op : reply.value("supports", json::Json::array())) out->supported_ops_.insert(op.get<std::string>());
  out->name_ = "megatron-core " + reply.value("megatron_version", std::string("?")) + " (torch " +
               reply.value("torch_version", std::string("?")) + ")" + (options.mutant ? " mutant:" + *options.mutant : "");
  return out;
}

bool MegatronImplementation::supports(Operation op) const { return supported_ops_.count(op_name(op)) > 0; }

Result<json::Json> MegatronImplementation::call(const std::string& op, json::Json fields) {
  fields["op"] = op;
  IH_TRY_ASSIGN(text, process_.request(json::dump(fields), options_.reply_timeout));
  IH_TRY_ASSIGN(reply, json::parse(text));
  if (!reply.is_object() || !reply.contains("ok")) return protocol_error("no \"ok\"", reply);
  if (!reply["ok"].get<bool>()) {
    Error error = json::error_from_json(reply.value("error", json::Json::object()));
    if (reply.value("unsupported", false)) {
      error.kind = ErrorKind::unsupported;
      error.message = "unsupported: " + error.message;  // survives into property verdict texts
    }
    return error;
  }
  if (!reply.contains("result")) return protocol_error("no \"result\"", reply);
  return reply["result"];
}

Result<pattern::ParsedPattern> MegatronImplementation::parse_pattern(std::optional<std::string_view> text) {
  IH_TRY_ASSIGN(result, call("parse_pattern", {{"pattern", nullable(text)}}));
  pattern::ParsedPattern out;
  if (!result["main"].is_null()) out.main = result["main"].get<std::string>();
  if (!result["mtp"].is_null()) out.mtp = result["mtp"].get<std::string>();
  out.mtp_depth = result.value("depth", 0);
  return out;
}

Result<GptCompatLayerMaps> MegatronImplementation::layer_maps(std::optional<std::string_view> text) {
  IH_TRY_ASSIGN(result, call("pattern_maps", {{"pattern", nullable(text)}}));
  return json::layer_maps_from_json(result);
}

Result<pattern::SegmentSelection> MegatronImplementation::select_segment(std::string_view main,
                                                                         const pattern::SegmentRequest& r) {
  IH_TRY_ASSIGN(result, call("select_segment", {{"pattern", std::string(main)}, {"pp_rank", r.pp_rank}, {"pp_size", r.pp_size},
                                                {"vp_stage", nullable_int(r.vp_stage)}, {"first", nullable_int(r.first_stage_layers)},
                                                {"last", nullable_int(r.last_stage_layers)}}));
  return pattern::SegmentSelection{result.value("layers", std::string()), result.value("offset", std::int64_t{0})};
}

Result<std::vector<FlatEntry>> MegatronImplementation::retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) {
  IH_TRY_ASSIGN(result, call("retarget", {{"pattern", std::string(pattern)}, {"entries", json::entries_to_json(entries)}}));
  return json::entries_from_json(result.value("entries", json::Json()));
}

Result<std::optional<std::string>> MegatronImplementation::fsdp_key(std::string_view pattern, std::string_view key,
                                                                    const std::optional<std::vector<std::string>>& keys) {
  IH_TRY_ASSIGN(result, call("fsdp_key", {{"pattern", std::string(pattern)}, {"key", std::string(key)}, {"checkpoint_keys", keys_or_null(keys)}}));
  if (!result.contains("key") || result["key"].is_null()) return std::optional<std::string>();
  return std::optional<std::string>(result["key"].get<std::string>());
}

Result<StateNode> MegatronImplementation::fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                                        const std::optional<std::vector<std::string>>& keys,
                                                        std::string_view prefix) {
  IH_TRY_ASSIGN(result, call("fsdp_retarget", {{"pattern", std::string(pattern)}, {"tree", json::tree_to_json(tree)},
                                               {"checkpoint_keys", keys_or_null(keys)}, {"prefix", std::string(prefix)}}));
  return json::tree_from_json(result.value("tree", json::Json::object()));
}

Result<std::vector<ShardedTensor>> MegatronImplementation::split_chunks(const ShardedTensor& orig, const SplitLayout& layout) {
  if (orig.local_shape.empty() || !orig.axis_fragmentations || orig.prepend_axis_num != 0)
    return make_error(ErrorKind::invalid_argument, "split_chunks needs a regular TP-sharded tensor without prepended axes");
  const std::int64_t rows = orig.local_shape[0];
  json::Json request{{"key", orig.key}, {"local_rows", rows}, {"tp_rank", rows ? orig.global_offset[0] / rows : 0},
                     {"tp_size", (*orig.axis_fragmentations)[0]}, {"sections", layout.sections}, {"names", layout.names},
                     {"dtype", orig.dtype}, {"replica_id", json::leaf_to_json(orig)["replica_id"]}};
  if (orig.local_shape.size() > 1) request["cols"] = orig.local_shape[1];
  IH_TRY_ASSIGN(result, call("split_chunks", std::move(request)));
  std::vector<ShardedTensor> out;
  for (json::Json chunk : result.value("chunks", json::Json::array())) {
    chunk["kind"] = "tensor";
    if (orig.dtype != "float32") chunk["dtype"] = orig.dtype;
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(chunk));
    if (!std::holds_alternative<ShardedTensor>(leaf)) return protocol_error("a chunk is not a tensor", chunk);
    out.push_back(std::get<ShardedTensor>(std::move(leaf)));
  }
  return out;
}

Result<MegatronValidation> MegatronImplementation::megatron_validation(const GlobalMetadata& metadata) {
  json::Json entries = json::Json::array();
  for (const RankedTensor& t : metadata.tensors) entries.push_back({{"rank", t.rank}, {"entry", json::leaf_to_json(t.tensor)}});
  for (const RankedObject& o : metadata.objects) entries.push_back({{"rank", o.rank}, {"entry", json::leaf_to_json(o.object)}});
  IH_TRY_ASSIGN(result, call("integrity", {{"entries", std::move(entries)}}));
  MegatronValidation out;
  for (const json::Json& detail : result.value("details", json::Json::array())) {
    const std::string kind = detail.value("kind", std::string());
    const std::string message = detail.value("key", std::string()) + ": " + detail.value("message", std::string());
    if (kind == "assertion" || kind == "exception") {
      if (!out.assertion) out.assertion = message;
    } else {
      out.errors.push_back(message);
    }
  }
  return out;
}

Result<GtpPadding> MegatronImplementation::gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) {
  IH_TRY_ASSIGN(result, call("gtp_padding", {{"rows", rows}, {"gtp_size", gtp_size}, {"pad_for_alignment", pad_alignment}}));
  GtpPadding out;
  out.rows = rows, out.gtp_size = gtp_size, out.pad_alignment = pad_alignment;
  out.align_block = pad_alignment * gtp_size;
  out.shard_rows = result.value("shard_rows", std::int64_t{-1});
  out.pad = result.value("pad_length", std::int64_t{-1});
  out.padded_rows = rows + out.pad;
  return out;
}

Result<StateNode> MegatronImplementation::gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& p) {
  if (design != GtpSaveDesign::shard_split) return unsupported(name_, "the gather design through the adapter");
  IH_TRY_ASSIGN(padding, gtp_padding_of(p));
  IH_TRY_ASSIGN(result, call("gtp_split", {{"key", p.key}, {"shard_rows", padding.shard_rows}, {"cols", p.cols},
                                           {"tp_rank", p.tp_rank}, {"tp_size", p.tp_size}, {"gtp_rank", p.gtp_rank},
                                           {"gtp_size", p.gtp_size}, {"sections", p.layout.sections}, {"names", p.layout.names},
                                           {"dtype", p.dtype}, {"replica_id", json::leaf_to_json(ShardedObject{"", {}, {1}, {0}, p.replica_id})["replica_id"]}}));
  if (result.value("local", false)) return StateNode(LocalNonpersistent{});
  StateList pieces;
  for (json::Json piece : result.value("pieces", json::Json::array())) {
    piece["kind"] = "tensor";
    if (p.dtype != "float32") piece["dtype"] = p.dtype;
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(piece));
    pieces.push_back(StateNode(std::move(leaf)));
  }
  return StateNode(std::move(pieces));
}

}  // namespace ih
