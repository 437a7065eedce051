// Megatron Core behind the seam: a Python adapter subprocess (harness/megatron/adapter) answers
// each question with Megatron's own functions over the JSON-lines protocol of
// docs/adapter-protocol.md. Every reply is awaited with a timeout.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>

#include "codec/json_codec.h"
#include "codec/json_scenarios.h"
#include "harness/megatron/adapter_replies.h"
#include "harness/megatron/candidates.h"
#include "harness/process/line_subprocess.h"
#include "seam/implementation.h"

namespace ih {

struct MegatronOptions {
  std::string python;                        // default: the venv of ci/install-megatron.sh
  std::string adapter;                       // default: harness/megatron/adapter/adapter.py in the source tree
  std::optional<std::string> megatron_path;  // a Megatron-LM checkout instead of the installed package
  std::optional<std::string> mutant;         // an adapter-side mutant (adapter/megatron_adapter/mutants/)
  Candidate candidate = Candidate::none;     // a candidate design (adapter/candidates/), e.g. shard-split
  std::optional<std::string> fix;            // a declared optional fix (the adapter's patch family fix)
  // Start-up is importing torch and Megatron, no verdict: on a 2-core CI runner beside mpirun worlds
  // of importing ranks it has taken over 120 s, so the limit only guards against a hung adapter.
  std::chrono::milliseconds startup_timeout{420000};
  std::chrono::milliseconds reply_timeout{60000};
};

/// The venv python that ci/install-megatron.sh creates ($INTEROP_MEGATRON_VENV or ~/.cache/...).
std::string default_megatron_python();

/// The declared optional fixes of Megatron's code (never on by default).
bool is_known_fix(const std::string& name);

class MegatronImplementation : public Implementation {
 public:
  /// Starts the adapter and performs the version handshake; errors say what is missing.
  static Result<std::unique_ptr<MegatronImplementation>> start(MegatronOptions options);

  std::string name() const override { return name_; }
  bool supports(Operation op) const override;
  /// The adapter runs one process per rank: worlds of at most MAX_WORLD_RANKS ranks (ops/gtp_world_cases.py);
  /// a bigger one answers unsupported, so the properties draw within this.
  static constexpr std::int64_t kMaxWorldRanks = 32;
  /// A model dump's world builds a real model per rank: at most MAX_RANKS (ops/model_dump.py).
  static constexpr std::int64_t kMaxModelRanks = 8;
  WorldCapacity capacity() const override { return {kMaxWorldRanks, kMaxModelRanks}; }
  /// Why `op` is not supported by this Megatron ("" when it is).
  std::string unsupported_reason(Operation op) const;
  /// The Megatron under test, for the gate's first line: "megatron-core V at PATH (revision R)".
  std::string describe_target() const { return target_; }
  /// The hello reply's identity fields: path, version, revision (null when none), torch version.
  const json::Json& identity() const { return identity_; }
  CodeIdentity code_identity() const override;
  /// The adapter-side mutants: [{"name", "description"}, ...].
  Result<json::Json> list_mutants() { return call("mutants", json::Json::object()); }
  /// What the adapter wrote on stderr (for reports).
  std::string adapter_stderr() const { return process_.stderr_tail(); }

  Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) override;
  Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) override;
  Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                   const pattern::SegmentRequest& request) override;
  Result<std::vector<FlatEntry>> retarget(std::string_view pattern, const std::vector<FlatEntry>& entries) override;
  Result<std::optional<std::string>> fsdp_key(std::string_view pattern, std::string_view key,
                                              const std::optional<std::vector<std::string>>& checkpoint_keys) override;
  Result<StateNode> fsdp_retarget(std::string_view pattern, const StateNode& tree,
                                  const std::optional<std::vector<std::string>>& checkpoint_keys,
                                  std::string_view prefix) override;
  Result<std::vector<ShardedTensor>> split_chunks(const ShardedTensor& orig, const SplitLayout& layout) override;
  Result<MegatronValidation> megatron_validation(const GlobalMetadata& metadata) override;
  /// Megatron's per-key validation and DCP's global save-plan validation, as typed problems.
  Result<IntegrityReport> integrity(const GlobalMetadata& metadata,
                                    const std::optional<std::vector<std::string>>& reference_keys) override;
  Result<GtpPadding> gtp_padding(std::int64_t rows, std::int64_t gtp_size, std::int64_t pad_alignment) override;
  Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) override;
  Result<TensorValue> gtp_merge(GtpSaveDesign design, const GtpFactoryParams& params, const StateNode& loaded) override;
  Result<ShardedTensor> gtp_param_entry(const GtpFactoryParams& params) override;
  /// `request` loaded from `checkpoint` (written for real by Megatron) along serialization.load or
  /// Megatron's MCoreTensorAwareStateDict.to_state_dict (both to_state_dict orders of the seam: Megatron
  /// has one); a GTP in_proj factory is rebuilt, loaded and merged by Megatron in its layout's world.
  Result<StateNode> load_state(const Checkpoint& checkpoint, const StateNode& request, LoadOrder order) override;
  // Scenario operations (seam/scenarios.h): Megatron's own code in gloo worlds, the replies read by the
  // codec (codec/json_scenarios.h; docs/adapter-protocol.md).
  /// optimizer_resume: a real save and load of the GDP in_proj or a plain GTP linear with Megatron's own
  /// optimizer (its sharded_state_dict over the module's real entries).
  Result<OptimizerResumeAnswer> optimizer_resume(const OptimizerResumeCase& c) override;
  /// gtp_fresh_retarget: the mixer's own sharded_state_dict, retargeted with its layer fresh.
  Result<FreshRetargetAnswer> fresh_retarget(const FreshRetargetCase& c) override;
  /// load_orderings: serialization.load and MCoreTensorAwareStateDict.to_state_dict after a real save.
  Result<LoadOrderingsAnswer> load_orderings(const AllPaddingCase& c) override;
  /// gtp_all_padding_load: serialization.load whose factory builds one LocalNonpersistentObject on
  /// the all-padding ranks.
  Result<AllPaddingLoadAnswer> all_padding_load(const AllPaddingCase& c) override;
  /// single_expert_load: a real GPT save of the expert objects and a real GPT->Hybrid load.
  Result<SingleExpertAnswer> single_expert_load(const SingleExpertCase& c) override;
  /// The real GPTModel / HybridModel built on CPU in a gloo world (adapter real_models/), its rank's
  /// sharded_state_dict (and optimizer's) flattened (docs/adapter-protocol.md, model_dump).
  Result<std::vector<FlatEntry>> model_state_dict(const ModelDumpSpec& spec, std::int64_t rank) override;

 private:
  MegatronImplementation(LineSubprocess process, MegatronOptions options)
      : process_(std::move(process)), options_(std::move(options)) {}
  /// What the hello says: the ops served (and why not), the candidate's answer, the Megatron's identity and name.
  Status read_hello(const json::Json& hello);
  /// Sends {"op": op, ...fields}; returns the reply's "result" or its error as an Error.
  Result<json::Json> call(const std::string& op, json::Json fields);
  /// call, then its result read by `decode` (decode_result: what it cannot read is harness_error).
  template <class Decode>
  auto ask(const std::string& op, json::Json fields, Decode&& decode)
      -> decltype(decode(std::declval<const json::Json&>())) {
    auto result = call(op, std::move(fields));
    if (!result.ok()) return result.error();
    return decode_result(op, *result, std::forward<Decode>(decode));
  }

  LineSubprocess process_;
  MegatronOptions options_;
  std::string name_ = "megatron";
  std::string target_;
  json::Json identity_ = json::Json::object();
  std::set<std::string> supported_ops_;
  /// The last gtp_pieces request (design, parameters): how load_state learns a seam factory's
  /// parameters by building it.
  std::optional<std::pair<GtpSaveDesign, GtpFactoryParams>> last_gtp_build_;
  std::map<std::string, std::string> unsupported_reasons_;
};

}  // namespace ih
