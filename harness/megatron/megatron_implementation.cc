#include "harness/megatron/megatron_implementation.h"

#include "harness/install/data_dir.h"
#include "harness/megatron/adapter_replies.h"

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <utility>

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

json::Json data_json(const TensorValue& value);

json::Json nullable(std::optional<std::string_view> text) {
  return text ? json::Json(std::string(*text)) : json::Json(nullptr);
}
json::Json nullable_int(std::optional<std::int64_t> v) { return v ? json::Json(*v) : json::Json(nullptr); }

json::Json keys_or_null(const std::optional<std::vector<std::string>>& keys) {
  return keys ? json::Json(*keys) : json::Json(nullptr);
}

Error protocol_error(const std::string& what, const json::Json& reply) {
  return make_error(seam_kind::harness_error, "adapter protocol: " + what + " in reply " + json::dump(reply));
}

}  // namespace

std::string default_megatron_python() {
  if (const char* venv = std::getenv("INTEROP_MEGATRON_VENV")) return std::string(venv) + "/bin/python";
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/root") + "/.cache/interop-harness/megatron-venv/bin/python";
}

bool is_known_candidate(const std::string& name) { return name == "shard-split"; }

std::string candidate_label(const std::string& name) { return "candidate " + name + " design, not Megatron's code"; }

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
  if (options.candidate) argv.insert(argv.end(), {"--candidate", *options.candidate});
  if (options.fix) argv.insert(argv.end(), {"--fix", *options.fix});
  IH_TRY_ASSIGN(process, LineSubprocess::start(argv));
  std::unique_ptr<MegatronImplementation> out(new MegatronImplementation(std::move(process), options));
  auto reply_text =
      out->process_.request(json::dump(json::Json{{"op", "hello"}, {"protocol", 1}}), options.startup_timeout);
  if (!reply_text.ok()) return reply_text.error().with_context("starting the Megatron adapter");
  IH_TRY_ASSIGN(reply, adapter_reply(*reply_text));
  if (!reply["ok"].get<bool>()) {
    const Error error = json::error_from_json(reply.value("error", json::Json::object()));
    return make_error(seam_kind::harness_error,
                      "the Megatron adapter cannot serve (is torch and megatron.core installed? "
                      "run `bash ci/install-megatron.sh`): " +
                          error.message + "\nadapter stderr:\n" + out->process_.stderr_tail());
  }
  for (const auto& op : reply.value("supports", json::Json::array())) out->supported_ops_.insert(op.get<std::string>());
  if (reply.contains("unsupported") && reply["unsupported"].is_object())
    for (const auto& [op, why] : reply["unsupported"].items())
      if (why.is_string()) out->unsupported_reasons_[op] = why.get<std::string>();
  // A candidate the adapter did not apply (the checkout has its own factory) is not in the name: the
  // checkout's design is what runs.
  const json::Json candidate = reply.contains("candidate") ? reply["candidate"] : json::Json(nullptr);
  const bool candidate_applied = candidate.is_object() && candidate.value("applied", false);
  std::string design_note;
  if (options.candidate)
    design_note = candidate_applied ? " [" + candidate_label(*options.candidate) + "]"
                                    : " [--candidate " + *options.candidate + " not applied: " +
                                          (candidate.is_object() ? candidate.value("reason", std::string("?"))
                                                                 : std::string("the adapter did not answer")) +
                                          "]";
  if (options.fix) design_note += " [fix " + *options.fix + ", not in Megatron's code]";
  const std::string version = reply.value("megatron_version", std::string("?"));
  const std::string path = reply.value("megatron_path", std::string("?"));
  const json::Json revision = reply.contains("megatron_revision") ? reply["megatron_revision"] : json::Json(nullptr);
  out->identity_ = json::Json{{"path", path},
                              {"version", version},
                              {"revision", revision},
                              {"torch_version", reply.value("torch_version", std::string("?"))},
                              {"source", options.megatron_path ? "checkout" : "installed package"}};
  out->target_ =
      "megatron-core " + version + " at " + path +
      (revision.is_string() ? " (revision " + revision.get<std::string>() + ")" : std::string(" (no revision)")) +
      (options.megatron_path ? "" : " [installed package]") + design_note;
  out->name_ = "megatron-core " + version +
               (revision.is_string() ? " @" + revision.get<std::string>().substr(0, 10) : std::string()) + " (torch " +
               reply.value("torch_version", std::string("?")) + ")" +
               (options.mutant ? " mutant:" + *options.mutant : "") + design_note;
  return out;
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
  IH_TRY_ASSIGN(text, process_.request(json::dump(fields), options_.reply_timeout));
  IH_TRY_ASSIGN(reply, adapter_reply(text));
  return adapter_result(reply);
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
  IH_TRY_ASSIGN(result, call("select_segment", {{"pattern", std::string(main)},
                                                {"pp_rank", r.pp_rank},
                                                {"pp_size", r.pp_size},
                                                {"vp_stage", nullable_int(r.vp_stage)},
                                                {"first", nullable_int(r.first_stage_layers)},
                                                {"last", nullable_int(r.last_stage_layers)}}));
  return pattern::SegmentSelection{result.value("layers", std::string()), result.value("offset", std::int64_t{0})};
}

namespace {

/// A factory as Megatron's retargeting returned it (its build is Megatron's wrapped build), which
/// remembers how it was made: the pattern and the original factory entry with its recipe, so that
/// load_state can have Megatron rebuild, retarget, load and merge the real one.
class RetargetedFactory : public FactoryBuilder {
 public:
  RetargetedFactory(StateNode built, std::string pattern, json::Json original)
      : built_(std::move(built)), pattern_(std::move(pattern)), original_(std::move(original)) {}
  std::string name() const override { return "megatron-retargeted"; }
  Result<StateNode> build(const std::string&, const std::optional<TensorValue>&, const ReplicaId&) const override {
    return built_;
  }
  Result<TensorValue> merge(const StateNode&) const override {
    return unsupported("megatron", "a retargeted factory's merge outside Megatron's load");
  }
  const std::string& pattern() const { return pattern_; }
  const json::Json& original() const { return original_; }

 private:
  StateNode built_;
  std::string pattern_;
  json::Json original_;
};

}  // namespace

Result<std::vector<FlatEntry>> MegatronImplementation::retarget(std::string_view pattern,
                                                                const std::vector<FlatEntry>& entries) {
  json::Json encoded = json::entries_to_json(entries);
  // The codec leaves a factory's own data out; Megatron's retargeting wraps it (LNP(factory.data))
  // for fresh layers, so it travels with the factory entry.
  for (std::size_t i = 0; i < entries.size() && i < encoded.size(); ++i)
    if (const auto* f = std::get_if<ShardedTensorFactory>(&entries[i].entry); f && f->data)
      encoded[i]["entry"]["data"] = data_json(*f->data);
  IH_TRY_ASSIGN(result, call("retarget", {{"pattern", std::string(pattern)}, {"entries", encoded}}));
  IH_TRY_ASSIGN(out, json::entries_from_json(result.value("entries", json::Json())));
  // A factory that stays a factory keeps its recipe (when it has one) for load_state.
  for (std::size_t i = 0; i < entries.size() && i < out.size() && i < encoded.size(); ++i) {
    const auto* before = std::get_if<ShardedTensorFactory>(&entries[i].entry);
    auto* after = std::get_if<ShardedTensorFactory>(&out[i].entry);
    if (!before || !after || !encoded[i]["entry"].contains("factory")) continue;
    IH_TRY_ASSIGN(built, after->build());
    after->builder = std::make_shared<RetargetedFactory>(std::move(built), std::string(pattern), encoded[i]["entry"]);
  }
  return out;
}

Result<std::optional<std::string>> MegatronImplementation::fsdp_key(
    std::string_view pattern, std::string_view key, const std::optional<std::vector<std::string>>& keys) {
  IH_TRY_ASSIGN(result, call("fsdp_key", {{"pattern", std::string(pattern)},
                                          {"key", std::string(key)},
                                          {"checkpoint_keys", keys_or_null(keys)}}));
  if (!result.contains("key") || result["key"].is_null()) return std::optional<std::string>();
  return std::optional<std::string>(result["key"].get<std::string>());
}

Result<StateNode> MegatronImplementation::fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                                        const std::optional<std::vector<std::string>>& keys,
                                                        std::string_view prefix) {
  IH_TRY_ASSIGN(result, call("fsdp_retarget", {{"pattern", std::string(pattern)},
                                               {"tree", json::tree_to_json(tree)},
                                               {"checkpoint_keys", keys_or_null(keys)},
                                               {"prefix", std::string(prefix)}}));
  return json::tree_from_json(result.value("tree", json::Json::object()));
}

Result<std::vector<ShardedTensor>> MegatronImplementation::split_chunks(const ShardedTensor& orig,
                                                                        const SplitLayout& layout) {
  if (orig.local_shape.empty() || !orig.axis_fragmentations || orig.prepend_axis_num != 0)
    return make_error(ErrorKind::invalid_argument,
                      "split_chunks needs a regular TP-sharded tensor without prepended axes");
  const std::int64_t rows = orig.local_shape[0];
  json::Json request{{"key", orig.key},
                     {"local_rows", rows},
                     {"tp_rank", rows ? orig.global_offset[0] / rows : 0},
                     {"tp_size", (*orig.axis_fragmentations)[0]},
                     {"sections", layout.sections},
                     {"names", layout.names},
                     {"dtype", orig.dtype},
                     {"replica_id", json::leaf_to_json(orig)["replica_id"]}};
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
  for (const RankedTensor& t : metadata.tensors)
    entries.push_back({{"rank", t.rank}, {"entry", json::leaf_to_json(t.tensor)}});
  for (const RankedObject& o : metadata.objects)
    entries.push_back({{"rank", o.rank}, {"entry", json::leaf_to_json(o.object)}});
  IH_TRY_ASSIGN(result, call("integrity", {{"entries", std::move(entries)}, {"world_size", metadata.world_size}}));
  MegatronValidation out;
  // PyTorch DCP's save planning of the same entries (torch's own _validate_global_plan), when this torch has it.
  if (result.contains("dcp_plan_errors") && result["dcp_plan_errors"].is_array())
    out.dcp_plan_errors = result["dcp_plan_errors"].get<std::vector<std::string>>();
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

Result<IntegrityReport> MegatronImplementation::integrity(
    const GlobalMetadata& metadata, const std::optional<std::vector<std::string>>& reference_keys) {
  json::Json entries = json::Json::array();
  for (const RankedTensor& t : metadata.tensors)
    entries.push_back({{"rank", t.rank}, {"entry", json::leaf_to_json(t.tensor)}});
  for (const RankedObject& o : metadata.objects)
    entries.push_back({{"rank", o.rank}, {"entry", json::leaf_to_json(o.object)}});
  json::Json request{{"entries", std::move(entries)}};
  if (reference_keys) request["reference_keys"] = *reference_keys;
  IH_TRY_ASSIGN(result, call("integrity_report", std::move(request)));
  IntegrityReport out;
  for (const json::Json& p : result.value("problems", json::Json::array())) {
    const std::string kind = p.value("kind", std::string());
    std::optional<ProblemKind> parsed;
    for (int k = 0; k <= static_cast<int>(ProblemKind::missing_object); ++k)
      if (to_string(static_cast<ProblemKind>(k)) == kind) parsed = static_cast<ProblemKind>(k);
    if (!parsed) return protocol_error("unknown problem kind '" + kind + "'", p);
    IntegrityProblem problem{
        *parsed, p.value("key", std::string()), std::nullopt, {}, p.value("message", std::string())};
    for (const json::Json& r : p.value("ranks", json::Json::array())) problem.ranks.push_back(r.get<std::int64_t>());
    out.problems.push_back(std::move(problem));
  }
  return out;
}

Result<GtpPadding> MegatronImplementation::gtp_padding(std::int64_t rows, std::int64_t gtp_size,
                                                       std::int64_t pad_alignment) {
  IH_TRY_ASSIGN(result,
                call("gtp_padding", {{"rows", rows}, {"gtp_size", gtp_size}, {"pad_for_alignment", pad_alignment}}));
  GtpPadding out;
  out.rows = rows, out.gtp_size = gtp_size, out.pad_alignment = pad_alignment;
  out.align_block = pad_alignment * gtp_size;
  out.shard_rows = result.value("shard_rows", std::int64_t{-1});
  out.pad = result.value("pad_length", std::int64_t{-1});
  out.padded_rows = rows + out.pad;
  return out;
}

namespace {

std::uint64_t gather_storage(const GtpFactoryParams& p) {
  if (p.gather_storage != 0) return p.gather_storage;
  const std::uint64_t base = p.shard && !p.shard->blocks.empty() ? p.shard->blocks.front().storage : 1;
  return base | (std::uint64_t{1} << 62);  // as the reference: a new buffer, never the shard's storage
}

/// The GtpFactoryParams fields every gtp_* request carries.
json::Json gtp_request(const GtpFactoryParams& p, GtpSaveDesign design) {
  json::Json out{{"design", design == GtpSaveDesign::gather ? "gather" : "shard-split"},
                 {"key", p.key},
                 {"sections", p.layout.sections},
                 {"names", p.layout.names},
                 {"tp_size", p.tp_size},
                 {"tp_rank", p.tp_rank},
                 {"gtp_size", p.gtp_size},
                 {"gtp_rank", p.gtp_rank},
                 {"pad_for_alignment", p.pad_alignment},
                 {"cols", p.cols},
                 {"dtype", p.dtype},
                 {"gather_storage", gather_storage(p)},
                 {"mixer", p.mixer == GtpMixer::mamba ? "mamba" : "gdp"}};
  if (p.shard && p.shard->blocks.size() == 1 && p.shard->blocks.front().first_row == 0 &&
      !p.shard->blocks.front().is_zero())
    out["shard_storage"] = p.shard->blocks.front().storage;
  return out;
}

/// Tensor data as the codec writes it ({"shape", "dtype", "blocks"}).
json::Json data_json(const TensorValue& value) {
  return json::leaf_to_json(Leaf(LocalNonpersistent{Payload(value)}))["value"];
}

Result<TensorValue> data_from_json(const json::Json& value) {
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "local"}, {"value", value}}));
  const auto* lnp = std::get_if<LocalNonpersistent>(&leaf);
  const auto* t = lnp ? std::get_if<TensorValue>(&lnp->payload) : nullptr;
  if (!t) return make_error(seam_kind::harness_error, "adapter protocol: not tensor data: " + json::dump(value));
  return *t;
}

}  // namespace

Result<StateNode> MegatronImplementation::gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& p) {
  last_gtp_build_ = std::make_pair(design, p);  // what a factory asked for, read by load_state
  IH_TRY_ASSIGN(result, call("gtp_pieces", gtp_request(p, design)));
  StateList pieces;
  for (json::Json piece : result.value("pieces", json::Json::array())) {
    if (piece.value("kind", "") == "tensor" && !piece.contains("data") && p.shard) {
      // The adapter gives a piece's data only where it views a storage it was told of (the shard,
      // the gathered buffer): any other piece is a copy. Describe it as a fresh buffer so the
      // properties judge it (gtp_pieces_are_views fails), as for the parameter entry.
      const Shape local = piece.value("local_shape", Shape{});
      piece["data"] = data_json(TensorValue::of_storage(gather_storage(p) ^ (std::uint64_t{3} << 60), local, p.dtype));
    }
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(piece));
    // Pieces always carry their data (the properties judge views and pad rows on it); an
    // adapter answer without it is a protocol error, never an empty optional downstream.
    if (const auto* t = std::get_if<ShardedTensor>(&leaf); t && !t->data)
      return protocol_error("a piece without its data (" + t->key + ")", piece);
    if (const auto* l = std::get_if<LocalNonpersistent>(&leaf); l && std::holds_alternative<std::monostate>(l->payload))
      return protocol_error("a LocalNonpersistentObject without its payload", piece);
    pieces.push_back(StateNode(std::move(leaf)));
  }
  if (pieces.size() == 1 && pieces.front().leaf_if<LocalNonpersistent>()) return pieces.front();
  return StateNode(std::move(pieces));
}

Result<TensorValue> MegatronImplementation::gtp_merge(GtpSaveDesign design, const GtpFactoryParams& p,
                                                      const StateNode& loaded) {
  json::Json request = gtp_request(p, design);
  json::Json tensors = json::Json::array();
  const auto add = [&](const StateNode& node) -> Status {
    if (const auto* t = node.leaf_if<TensorValue>()) {
      tensors.push_back(data_json(*t));
      return Ok{};
    }
    if (const auto* st = node.leaf_if<ShardedTensor>(); st && st->data) {
      tensors.push_back(data_json(*st->data));
      return Ok{};
    }
    return make_error(ErrorKind::invalid_argument,
                      "gtp_merge: a loaded entry is neither a tensor nor a tensor with data");
  };
  if (loaded.is_list()) {
    for (const StateNode& n : loaded.list()) IH_TRY_STATUS(add(n));
    request["loaded"] = std::move(tensors);
  } else if (loaded.is_dict()) {
    for (const DictItem& item : loaded.dict()) IH_TRY_STATUS(add(item.value));
    request["loaded"] = std::move(tensors);
  } else {
    IH_TRY_STATUS(add(loaded));
    request["loaded"] = tensors[0];
    request["bare"] = true;
  }
  IH_TRY_ASSIGN(result, call("gtp_merge", std::move(request)));
  return data_from_json(result);
}

namespace {

bool default_orders(const WorldGrids& w) {
  const auto order = [](const char* text) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* c = text;; ++c) {
      if (*c == '-' || *c == 0) {
        out.push_back(cur), cur.clear();
        if (*c == 0) break;
      } else {
        cur += *c;
      }
    }
    return out;
  };
  return w.dense.order == order(kDenseGridOrder) && w.expert.order == order(kExpertGridOrder);
}

json::Json world_sizes(const WorldGrids& w) {
  return json::Json{{"tp", w.dense.size("tp")},          {"gtp", w.dense.size("gtp_remat")},
                    {"cp", w.dense.size("cp")},          {"dp", w.dense.size("dp")},
                    {"etp", w.expert.size("tp")},        {"ep", w.expert.size("ep")},
                    {"egtp", w.expert.size("gtp_remat")}};
}

}  // namespace

Result<ShardedTensor> MegatronImplementation::gtp_param_entry(const GtpFactoryParams& p) {
  if (p.election) {
    const GtpElection& e = *p.election;
    if (e.explicit_replica_id || e.local_experts != 1 || !e.distributed)
      return unsupported(
          name_, "a writer election with an explicit replica_id, several local experts or no torch.distributed");
    json::Json election{{"expert", e.expert}, {"caller", e.caller.has_value()}, {"global_rank", e.global_rank}};
    if (e.caller && !default_orders(*e.caller))
      return unsupported(name_, "a writer election over non-default rank orders");
    if (e.globals && !default_orders(*e.globals))
      return unsupported(name_, "a writer election over non-default rank orders");
    if (e.caller) {
      election["world"] = world_sizes(*e.caller);
    } else if (e.globals) {
      election["world"] = world_sizes(*e.globals);
    } else {  // nothing to elect over: Megatron raises on every rank; a world of T x G ranks shows it
      election["world"] = json::Json{{"tp", p.tp_size},  {"gtp", p.gtp_size}, {"cp", 1},           {"dp", 1},
                                     {"etp", p.tp_size}, {"ep", 1},           {"egtp", p.gtp_size}};
      election["global_rank"] = p.tp_rank * p.gtp_size + p.gtp_rank;
    }
    election["globals"] = e.globals ? world_sizes(*e.globals) : json::Json(nullptr);
    IH_TRY_ASSIGN(rows, p.layout.total_rows());
    json::Json request{{"key", p.key},     {"rows", rows},
                       {"cols", p.cols},   {"pad_for_alignment", p.pad_alignment},
                       {"dtype", p.dtype}, {"election", std::move(election)}};
    if (p.shard && p.shard->blocks.size() == 1) request["shard_storage"] = p.shard->blocks.front().storage;
    IH_TRY_ASSIGN(result, call("gtp_param_entry", std::move(request)));
    json::Json entry = result.value("entry", json::Json::object());
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(entry));
    if (!std::holds_alternative<ShardedTensor>(leaf))
      return protocol_error("the parameter entry is not a tensor", entry);
    return std::get<ShardedTensor>(std::move(leaf));
  }
  IH_TRY_ASSIGN(result, call("gtp_param_entry", gtp_request(p, GtpSaveDesign::gather)));
  json::Json entry = result.value("entry", json::Json::object());
  if (!entry.contains("data") && p.shard) {
    // Megatron's entry does not view the parameter: describe its data as a fresh buffer so the
    // property reports it (a copy) instead of finding no data.
    TensorValue copy = TensorValue::of_storage(gather_storage(p) ^ (std::uint64_t{3} << 60), p.shard->shape, p.dtype);
    entry["data"] = data_json(copy);
  }
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(entry));
  if (!std::holds_alternative<ShardedTensor>(leaf)) return protocol_error("the parameter entry is not a tensor", entry);
  return std::get<ShardedTensor>(std::move(leaf));
}

namespace {

using FactoryJson = std::function<Result<json::Json>(const ShardedTensorFactory&)>;

Result<json::Json> node_json(const StateNode& node, const FactoryJson& factory_json) {
  if (node.is_dict()) {
    json::Json items = json::Json::array();
    for (const DictItem& item : node.dict()) {
      IH_TRY_ASSIGN(child, node_json(item.value, factory_json));
      json::Json key = std::holds_alternative<std::string>(item.key) ? json::Json(std::get<std::string>(item.key))
                                                                     : json::Json(std::get<std::int64_t>(item.key));
      items.push_back(json::Json::array({key, child}));
    }
    return json::Json::array({"dict", items});
  }
  if (node.is_list()) {
    json::Json items = json::Json::array();
    for (const StateNode& child : node.list()) {
      IH_TRY_ASSIGN(c, node_json(child, factory_json));
      items.push_back(c);
    }
    return json::Json::array({"list", items});
  }
  if (const auto* f = std::get_if<ShardedTensorFactory>(&node.leaf())) {
    IH_TRY_ASSIGN(entry, factory_json(*f));
    return json::Json::array({"leaf", entry});
  }
  return json::Json::array({"leaf", json::leaf_to_json(node.leaf())});
}

Result<StateNode> node_from_json(const json::Json& node, const std::string& dtype_hint) {
  if (!node.is_array() || node.empty() || !node[0].is_string())
    return make_error(seam_kind::harness_error, "adapter protocol: bad load_state tree node " + json::dump(node));
  const std::string kind = node[0].get<std::string>();
  if (kind == "dict") {
    StateDict out;
    for (const json::Json& item : node[1]) {
      IH_TRY_ASSIGN(child, node_from_json(item[1], dtype_hint));
      DictKey key = item[0].is_string() ? DictKey(item[0].get<std::string>()) : DictKey(item[0].get<std::int64_t>());
      out.push_back({std::move(key), std::move(child)});
    }
    return StateNode(std::move(out));
  }
  if (kind == "list") {
    StateList out;
    for (const json::Json& item : node[1]) {
      IH_TRY_ASSIGN(child, node_from_json(item, dtype_hint));
      out.push_back(std::move(child));
    }
    return StateNode(std::move(out));
  }
  if (kind == "tensor") return StateNode(Leaf(TensorValue{}));  // filled by the caller (needs the request's dtype)
  if (kind == "local") {
    IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "local"}, {"value", node[1]}}));
    const auto& payload = std::get<LocalNonpersistent>(leaf).payload;
    if (const auto* t = std::get_if<TensorValue>(&payload)) return StateNode(Leaf(*t));
    if (const auto* o = std::get_if<ObjectRef>(&payload)) return StateNode(Leaf(*o));
    return StateNode(Leaf(LocalNonpersistent{}));
  }
  if (kind == "object" && node[1].is_number_integer()) return StateNode(Leaf(ObjectRef{node[1].get<std::uint64_t>()}));
  IH_TRY_ASSIGN(leaf, json::leaf_from_json(json::Json{{"kind", "plain"}, {"value", node[1]}}));
  return StateNode(std::move(leaf));
}

/// Fills the tensors of `out` (decoded from `node`) with their row blocks, the dtype from the request.
void fill_tensors(StateNode& out, const json::Json& node, const StateNode* request) {
  const std::string kind = node[0].get<std::string>();
  if (kind == "dict" && out.is_dict()) {
    for (std::size_t i = 0; i < out.dict().size(); ++i)
      fill_tensors(out.dict()[i].value, node[1][i][1],
                   request && request->is_dict() ? request->find(out.dict()[i].key) : nullptr);
  } else if (kind == "list" && out.is_list()) {
    for (std::size_t i = 0; i < out.list().size(); ++i)
      fill_tensors(out.list()[i], node[1][i],
                   request && request->is_list() && i < request->list().size() ? &request->list()[i] : nullptr);
  } else if (kind == "tensor") {
    TensorValue t;
    t.shape = node[1].get<Shape>();
    // A tensor keeps its request entry's dtype; a factory's merge result its parameter's (the factory data's).
    const auto* st = request ? request->leaf_if<ShardedTensor>() : nullptr;
    const auto* factory = request ? request->leaf_if<ShardedTensorFactory>() : nullptr;
    t.dtype = st ? st->dtype : factory && factory->data ? factory->data->dtype : "float32";
    for (const json::Json& b : node[2])
      t.blocks.push_back({b[0].get<std::uint64_t>(), b[1].get<std::int64_t>(), b[2].get<std::int64_t>()});
    out = StateNode(Leaf(std::move(t)));
  }
}

}  // namespace

Result<StateNode> MegatronImplementation::load_state(const Checkpoint& checkpoint, const StateNode& request,
                                                     LoadOrder order) {
  // Megatron has one to_state_dict; which of spec 3.8's orders it follows is what the properties judge.
  const std::string adapter_order = order == LoadOrder::serialization_load ? "serialization_load" : "to_state_dict";
  json::Json chunks = json::Json::array();
  for (const auto& [id, list] : checkpoint.index.chunks)
    for (const StoredChunk& c : list) {
      if (!c.data) return unsupported(name_, "load_state of a checkpoint stored without data");
      Shape local;
      for (std::size_t a = static_cast<std::size_t>(c.prepend_axis_num); a < c.box.rank(); ++a)
        local.push_back(c.box.hi[a] - c.box.lo[a]);
      chunks.push_back({{"key", id.first},
                        {"global_shape", id.second},
                        {"global_offset", c.box.lo},
                        {"local_shape", local},
                        {"prepend_axis_num", c.prepend_axis_num},
                        {"data", data_json(*c.data)}});
    }
  json::Json objects = json::Json::array();
  for (const auto& [key, ref] : checkpoint.objects)
    objects.push_back(json::Json::array({key, ref ? json::Json(ref->id) : json::Json(nullptr)}));
  json::Json common = json::Json::object();
  if (checkpoint.common.is_dict())
    for (const DictItem& item : checkpoint.common.dict())
      if (const auto* p = item.value.leaf_if<PlainValue>(); p && std::holds_alternative<std::string>(item.key))
        common[std::get<std::string>(item.key)] = json::leaf_to_json(Leaf(*p))["value"];
  // A GTP in_proj factory crosses as the gtp_pieces request its build makes (the adapter rebuilds
  // Megatron's own factory from it in the layout's world; Megatron builds, loads and merges it).
  const FactoryJson factory_json = [this](const ShardedTensorFactory& f) -> Result<json::Json> {
    if (const auto* r = dynamic_cast<const RetargetedFactory*>(f.builder.get()))
      return json::Json{
          {"kind", "factory"}, {"key", f.key}, {"retargeted", {{"pattern", r->pattern()}, {"entry", r->original()}}}};
    last_gtp_build_.reset();
    if (auto built = f.build(); !built.ok()) return built.error();
    if (!last_gtp_build_)
      return unsupported(name_, "load_state of a factory other than a GTP in_proj factory (" + f.key +
                                    ": its Megatron construction does not cross the adapter)");
    const auto [design, params] = *last_gtp_build_;
    last_gtp_build_.reset();
    return json::Json{{"kind", "factory"}, {"key", f.key}, {"gtp", gtp_request(params, design)}};
  };
  IH_TRY_ASSIGN(tree, node_json(request, factory_json));
  IH_TRY_ASSIGN(result, call("load_state", {{"order", adapter_order},
                                            {"chunks", std::move(chunks)},
                                            {"objects", std::move(objects)},
                                            {"common", std::move(common)},
                                            {"request", std::move(tree)}}));
  const json::Json node = result.value("tree", json::Json::array());
  IH_TRY_ASSIGN(out, node_from_json(node, ""));
  fill_tensors(out, node, &request);
  return out;
}

Result<OptimizerResumeAnswer> MegatronImplementation::optimizer_resume(const OptimizerResumeCase& c) {
  IH_TRY_ASSIGN(reply, call("optimizer_resume", json::optimizer_resume_request(c)));
  return json::optimizer_resume_from_json(reply);
}

Result<FreshRetargetAnswer> MegatronImplementation::fresh_retarget(const FreshRetargetCase& c) {
  IH_TRY_ASSIGN(reply, call("gtp_fresh_retarget", json::fresh_retarget_request(c)));
  return json::fresh_retarget_from_json(reply);
}

Result<LoadOrderingsAnswer> MegatronImplementation::load_orderings(const AllPaddingCase& c) {
  IH_TRY_ASSIGN(reply, call("load_orderings", json::all_padding_request(c)));
  IH_TRY_ASSIGN(answer, json::load_orderings_from_json(reply));
  // to_state_dict that could not run here (its nvidia_resiliency_ext guard) is no answer, not a finding.
  for (const OrderingsRank& rank : answer.ranks)
    for (const OrderedLoad* x : {&rank.serialization_load, &rank.to_state_dict})
      if (x->refused && x->refused->message.find("nvidia_resiliency_ext") != std::string::npos)
        return unsupported(name_, "MCoreTensorAwareStateDict.to_state_dict without nvidia_resiliency_ext (" +
                                      x->refused->message + ")");
  return answer;
}

Result<AllPaddingLoadAnswer> MegatronImplementation::all_padding_load(const AllPaddingCase& c) {
  if (!supports(Operation::gtp_param_entry)) return unsupported(name_, "GTP (no GTP in this Megatron)");
  IH_TRY_ASSIGN(reply, call("gtp_all_padding_load", json::all_padding_request(c)));
  return json::all_padding_load_from_json(reply);
}

Result<SingleExpertAnswer> MegatronImplementation::single_expert_load(const SingleExpertCase& c) {
  IH_TRY_ASSIGN(reply, call("single_expert_load", json::single_expert_request(c)));
  return json::single_expert_from_json(reply);
}

CodeIdentity MegatronImplementation::code_identity() const {
  const auto text = [&](const char* field) {
    return identity_.contains(field) && identity_[field].is_string() ? identity_[field].get<std::string>()
                                                                     : std::string();
  };
  return {text("version"), text("revision")};
}

}  // namespace ih

namespace ih {

Result<std::vector<FlatEntry>> MegatronImplementation::model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) {
  IH_TRY_STATUS(validate_model_dump(spec, rank));
  IH_TRY_ASSIGN(result, call("model_dump", json::model_dump_spec_to_json(spec, rank)));
  return json::entries_from_json(result.value("entries", json::Json()));
}

}  // namespace ih
