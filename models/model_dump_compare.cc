#include "models/model_dump_compare.h"

#include <algorithm>
#include <map>
#include <regex>
#include <tuple>

#include "models/text.h"

namespace ih {
namespace {

// The real optimizer's common state: torch's param_groups (one dict per optimizer of a chain), under the
// wrapper's `optimizer.` (distributed, float16) or at the top (FP32Optimizer's state dict is torch's).
const std::regex& optimizer_common_path() {
  static const std::regex re(R"(^optimizer\.(\d+\.)?(optimizer\.)?param_groups\.)");
  return re;
}

std::string shape_text(const Shape& shape) { return "[" + join_ints(shape, ", ") + "]"; }

std::string tensor_row(const std::string& kind, const ShardedTensor& t) {
  return kind + " key=" + t.key + " global_shape=" + shape_text(t.global_shape) +
         " local_shape=" + shape_text(t.local_shape) + " global_offset=" + shape_text(t.global_offset) +
         " axis_fragmentations=" + (t.axis_fragmentations ? shape_text(*t.axis_fragmentations) : "uneven") +
         " replica_id=" + t.replica_id.to_string() +
         " allow_shape_mismatch=" + (t.allow_shape_mismatch ? "true" : "false");
}

std::string object_row(const std::string& kind, const ShardedObject& o) {
  return kind + " key=" + o.key + " global_shape=" + shape_text(o.global_shape) +
         " global_offset=" + shape_text(o.global_offset) + " replica_id=" + o.replica_id.to_string();
}

/// One leaf's row (not a factory): a sharded entry by its compared fields, anything else by kind and path.
std::string leaf_row(const std::string& prefix, const std::string& path, const Leaf& leaf) {
  if (const auto* t = std::get_if<ShardedTensor>(&leaf)) return tensor_row(prefix + "tensor", *t);
  if (const auto* o = std::get_if<ShardedObject>(&leaf)) return object_row(prefix + "object", *o);
  const char* kind = std::holds_alternative<LocalNonpersistent>(leaf) ? "local"
                     : std::holds_alternative<PlainValue>(leaf)       ? "plain"
                     : std::holds_alternative<TensorValue>(leaf)      ? "tensor_value"
                     : std::holds_alternative<ObjectRef>(leaf)        ? "object_ref"
                                                                      : "factory";
  return prefix + kind + " path=" + path;
}

std::int64_t drop_optimizer_common_state(std::vector<FlatEntry>& real) {
  const auto common = [](const FlatEntry& e) { return std::regex_search(e.path, optimizer_common_path()); };
  const auto dropped = std::count_if(real.begin(), real.end(), common);
  real.erase(std::remove_if(real.begin(), real.end(), common), real.end());
  return dropped;
}

std::map<std::string, std::int64_t> counted(const std::vector<std::string>& rows) {
  std::map<std::string, std::int64_t> out;
  for (const std::string& row : rows) ++out[row];
  return out;
}

}  // namespace

std::string model_dump_flags(const ModelDumpSpec& s) {
  std::string out = s.model == ModelKind::gpt ? "--model gpt --layers " + std::to_string(s.layers)
                                              : "--model hybrid --pattern '" + s.pattern + "'";
  const std::tuple<const char*, std::int64_t, std::int64_t> sizes[] = {
      {" --tp ", s.sizes.tp, 1},   {" --pp ", s.sizes.pp, 1},
      {" --ep ", s.sizes.ep, 1},   {" --etp ", s.sizes.etp, 1},
      {" --gtp ", s.sizes.gtp, 1}, {" --dp ", s.sizes.dp, 1},
      {" --cp ", s.sizes.cp, 1},   {" --experts ", s.config.num_experts, 0}};
  for (const auto& [flag, value, default_value] : sizes)
    if (value != default_value) out += flag + std::to_string(value);
  if (s.config.gated_mlp) out += " --gated";
  if (s.config.add_bias) out += " --bias";
  if (s.config.tied_embeddings) out += " --tied";
  if (s.config.layer_norm) out += " --norm layer";
  if (s.config.ssm_mixer != "mamba") out += " --mixer " + s.config.ssm_mixer;
  if (s.optimizer) out += " --optimizer";
  if (s.optimizer && s.optimizer_kind != OptimizerKind::distributed)
    out += std::string(" --optimizer-kind ") + to_string(s.optimizer_kind);
  return out;
}

std::string to_string(DumpExplanation rule) {
  switch (rule) {
    case DumpExplanation::optimizer_common_state: return "optimizer_common_state";
  }
  return "?";
}

std::vector<DumpExplanation> expected_explanations(const ModelDumpSpec& spec) {
  std::vector<DumpExplanation> out;
  if (spec.optimizer) out.push_back(DumpExplanation::optimizer_common_state);
  return out;
}

Result<std::int64_t> apply_explanation(DumpExplanation rule, const ModelDumpSpec& spec, std::int64_t rank,
                                       std::vector<FlatEntry>& real) {
  switch (rule) {
    case DumpExplanation::optimizer_common_state: return drop_optimizer_common_state(real);
  }
  return make_error(ErrorKind::invalid_argument, "unknown explained difference");
}

Result<std::vector<std::string>> dump_rows(const std::vector<FlatEntry>& entries) {
  std::vector<std::string> rows;
  for (const FlatEntry& item : entries) {
    const auto* factory = std::get_if<ShardedTensorFactory>(&item.entry);
    if (!factory) {
      rows.push_back(leaf_row("", item.path, item.entry));
      continue;
    }
    auto built = factory->build();
    if (!built.ok()) return built.error().with_context("factory " + factory->key + " at " + item.path);
    for (const FlatEntry& piece : flatten(*built)) rows.push_back(leaf_row("factory/", piece.path, piece.entry));
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

Result<std::vector<std::string>> dump_differences(const std::vector<FlatEntry>& reference,
                                                  const std::vector<FlatEntry>& target) {
  IH_TRY_ASSIGN(reference_rows, dump_rows(reference));
  IH_TRY_ASSIGN(target_rows, dump_rows(target));
  const auto a = counted(reference_rows), b = counted(target_rows);
  std::map<std::string, std::int64_t> surplus;  // > 0: the reference has more of the row
  for (const auto& [row, n] : a) surplus[row] += n;
  for (const auto& [row, n] : b) surplus[row] -= n;
  std::vector<std::string> out;
  for (const auto& [row, n] : surplus) {
    if (n == 0) continue;
    const std::int64_t times = n > 0 ? n : -n;
    out.push_back(std::string(n > 0 ? "reference only" : "target only") +
                  (times > 1 ? " (" + std::to_string(times) + "x)" : "") + ": " + row);
  }
  return out;
}

std::vector<DumpExplanation> DumpComparison::stale() const {
  std::vector<DumpExplanation> out;
  for (const auto& [rule, rewrites] : explained)
    if (rewrites == 0) out.push_back(rule);
  return out;
}

Result<DumpComparison> compare_model_dumps(const ModelDumpSpec& spec, std::int64_t rank,
                                           const std::vector<FlatEntry>& reference, std::vector<FlatEntry> target,
                                           bool explain) {
  DumpComparison out;
  if (explain)
    for (DumpExplanation rule : expected_explanations(spec)) {
      IH_TRY_ASSIGN(rewrites, apply_explanation(rule, spec, rank, target));
      out.explained.emplace_back(rule, rewrites);
    }
  IH_TRY_ASSIGN(differences, dump_differences(reference, target));
  out.differences = std::move(differences);
  return out;
}

}  // namespace ih
