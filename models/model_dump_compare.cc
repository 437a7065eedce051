#include "models/model_dump_compare.h"

#include <algorithm>
#include <map>
#include <regex>
#include <tuple>

#include "models/text.h"

namespace ih {
namespace {

// The keys Megatron saves through the Mamba mixer's split factory (outside GTP).
const std::regex& mamba_split_key() {
  static const std::regex re(R"(decoder\.layers\.\d+\.mixer\.(in_proj\.weight|conv1d\.weight|conv1d\.bias)$)");
  return re;
}

bool is_mamba_split_key(const std::string& key) { return std::regex_search(key, mamba_split_key()); }

// The real optimizer's common state: torch's param_groups (one dict per optimizer of a chain), under the
// wrapper's `optimizer.` (distributed, float16) or at the top (FP32Optimizer's state dict is torch's).
const std::regex& optimizer_common_path() {
  static const std::regex re(R"(^optimizer\.(\d+\.)?(optimizer\.)?param_groups\.)");
  return re;
}

// The weights Megatron GTP-shards on axis 0 (every parallel linear, the embedding and the output layer).
const std::regex& gtp_sharded_weight() {
  static const std::regex re(
      R"((linear_qkv|linear_proj|linear_fc1|linear_fc2|out_proj)\.weight$|^(optimizer\.state\.\w+\.)?(embedding\.word_embeddings|output_layer)\.weight$)");
  return re;
}

// The biases of the linears Megatron GTP-wraps: GTP replicates them, with the GTP rank in replica slot 1.
const std::regex& gtp_replicated_bias() {
  static const std::regex re(R"((linear_qkv|linear_proj|linear_fc1|linear_fc2|out_proj)\.bias$)");
  return re;
}

// The GDP mixer's conv1d, saved through _split_tensor_factory (its pieces TP-only, replicated over GTP).
const std::regex& gdp_conv_split_key() {
  static const std::regex re(R"(mixer\.conv1d\.(weight|bias)$)");
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

/// The TP-local tensor a split factory's pieces came from: pieces stacked on axis 0, each
/// TP-sharded there, so the merged tensor has their summed rows and piece 0's TP offset in them.
Result<ShardedTensor> merged_split(const ShardedTensorFactory& factory) {
  const auto bad = [&](const std::string& why) {
    return make_error(ErrorKind::invalid_argument, "split factory " + factory.key + ": " + why);
  };
  IH_TRY_ASSIGN(built, factory.build());
  std::vector<ShardedTensor> pieces;
  for (const FlatEntry& piece : flatten(built)) {
    const auto* t = std::get_if<ShardedTensor>(&piece.entry);
    if (!t || t->local_shape.empty() || t->global_offset.empty() || !t->axis_fragmentations)
      return bad("a built piece is not a regular tensor with rows");
    pieces.push_back(*t);
  }
  if (pieces.empty() || pieces[0].local_shape[0] < 1) return bad("no built piece with rows");
  std::int64_t rows = 0;
  for (const ShardedTensor& p : pieces) rows += p.local_shape[0];
  ShardedTensor out = pieces[0];
  out.key = factory.key;
  out.data.reset();
  out.global_shape[0] = rows * (*out.axis_fragmentations)[0];
  out.global_offset[0] = pieces[0].global_offset[0] / pieces[0].local_shape[0] * rows;
  out.local_shape[0] = rows;
  return out;
}

/// Under GTP (gtp > 1) the reference splits the gathered in_proj as Megatron does: only conv1d is merged.
Result<std::int64_t> merge_mamba_splits(std::vector<FlatEntry>& real, std::int64_t gtp) {
  std::int64_t merged = 0;
  for (FlatEntry& item : real) {
    const auto* factory = std::get_if<ShardedTensorFactory>(&item.entry);
    if (!factory || !is_mamba_split_key(factory->key)) continue;
    if (gtp > 1 && factory->key.ends_with("in_proj.weight")) continue;
    IH_TRY_ASSIGN(tensor, merged_split(*factory));
    item.entry = std::move(tensor);
    ++merged;
  }
  return merged;
}

std::int64_t drop_optimizer_common_state(std::vector<FlatEntry>& real) {
  const auto common = [](const FlatEntry& e) { return std::regex_search(e.path, optimizer_common_path()); };
  const auto dropped = std::count_if(real.begin(), real.end(), common);
  real.erase(std::remove_if(real.begin(), real.end(), common), real.end());
  return dropped;
}

/// Whether `id`'s `slot` holds this GTP rank folded in (g + G*d; an object's t*G + g), and so is rewritten.
bool gtp_folded(const ReplicaId& id, std::size_t slot, std::int64_t gtp, std::int64_t gtp_rank, bool object) {
  if (!id.is_tuple || id.coords.size() <= slot) return false;
  const std::int64_t value = id.coords[slot];
  return value % gtp == gtp_rank && (object || value > 0);
}

/// A factory's build with the GTP rank taken out of its pieces' replica ids (their DP slot g + G*d).
class GtpUnfoldedPieces : public FactoryBuilder {
 public:
  GtpUnfoldedPieces(std::shared_ptr<const FactoryBuilder> inner, std::int64_t gtp, std::int64_t gtp_rank)
      : inner_(std::move(inner)), gtp_(gtp), gtp_rank_(gtp_rank) {}
  std::string name() const override { return inner_->name(); }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica_id) const override {
    IH_TRY_ASSIGN(built, inner_->build(key, data, replica_id));
    if (built.is_list())
      for (StateNode& piece : built.list())
        if (auto* t = piece.leaf_if<ShardedTensor>(); t && gtp_folded(t->replica_id, 2, gtp_, gtp_rank_, false))
          t->replica_id.coords[2] /= gtp_;
    return built;
  }
  Result<TensorValue> merge(const StateNode& loaded) const override { return inner_->merge(loaded); }

 private:
  std::shared_ptr<const FactoryBuilder> inner_;
  std::int64_t gtp_, gtp_rank_;
};

/// The GDP conv1d split factory with its pieces' replica ids unfolded; how many pieces that rewrites.
Result<std::int64_t> undo_gtp_split(ShardedTensorFactory& factory, std::int64_t gtp, std::int64_t gtp_rank) {
  IH_TRY_ASSIGN(built, factory.build());
  std::int64_t folded = 0;
  for (const FlatEntry& piece : flatten(built))
    if (const auto* t = std::get_if<ShardedTensor>(&piece.entry);
        t && gtp_folded(t->replica_id, 2, gtp, gtp_rank, false))
      ++folded;
  if (folded > 0) factory.builder = std::make_shared<GtpUnfoldedPieces>(factory.builder, gtp, gtp_rank);
  return folded;
}

/// Each GTP-sharded weight of this GTP rank back to its TP-local form (its G shards as one), and the
/// GTP rank taken out of the replica ids that carry it (a tensor's DP slot g + G*d, an object's and a
/// linear's bias's TP slot t*G + g, the GDP conv1d split factory's pieces' DP slot); only entries of
/// exactly that form.
Result<std::int64_t> undo_gtp(std::vector<FlatEntry>& real, std::int64_t gtp, std::int64_t gtp_rank) {
  std::int64_t mapped = 0;
  for (FlatEntry& item : real) {
    if (auto* f = std::get_if<ShardedTensorFactory>(&item.entry)) {
      if (!std::regex_search(f->key, gdp_conv_split_key())) continue;
      IH_TRY_ASSIGN(pieces, undo_gtp_split(*f, gtp, gtp_rank));
      mapped += pieces;
      continue;
    }
    auto* t = std::get_if<ShardedTensor>(&item.entry);
    if (t && std::regex_search(t->key, gtp_sharded_weight()) && t->global_shape.size() >= 2 &&
        t->local_shape.size() >= 2 && t->axis_fragmentations) {
      const std::size_t axis = t->global_shape.size() - 2, local_axis = t->local_shape.size() - 2;
      const std::int64_t local = t->local_shape[local_axis], offset = t->global_offset[axis],
                         frag = (*t->axis_fragmentations)[axis];
      if (local < 1 || frag % gtp != 0 || (offset / local) % gtp != gtp_rank) continue;
      t->local_shape[local_axis] = local * gtp;
      t->global_offset[axis] = offset / local / gtp * local * gtp;
      (*t->axis_fragmentations)[axis] = frag / gtp;
      ++mapped;
      continue;
    }
    auto* o = std::get_if<ShardedObject>(&item.entry);
    ReplicaId* id = t ? &t->replica_id : o ? &o->replica_id : nullptr;
    // A GTP-replicated bias carries the GTP rank where an object does: slot 1, g (a TP-split bias) or
    // t*G + g (a TP-replicated one).
    const bool bias = t && std::regex_search(t->key, gtp_replicated_bias());
    const std::size_t slot = t && !bias ? 2 : 1;
    if (bias) {
      if (id->is_tuple && id->coords.size() > 1 && id->coords[1] % gtp == gtp_rank) id->coords[1] /= gtp, ++mapped;
      continue;
    }
    if (id && gtp_folded(*id, slot, gtp, gtp_rank, o != nullptr)) id->coords[slot] /= gtp, ++mapped;
  }
  return mapped;
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
      {" --tp ", s.sizes.tp, 1},   {" --pp ", s.sizes.pp, 1},   {" --ep ", s.sizes.ep, 1},
      {" --etp ", s.sizes.etp, 1}, {" --gtp ", s.sizes.gtp, 1}, {" --experts ", s.config.num_experts, 0}};
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
    case DumpExplanation::mamba_split_factory: return "mamba_split_factory";
    case DumpExplanation::optimizer_common_state: return "optimizer_common_state";
    case DumpExplanation::gtp_not_modelled: return "gtp_not_modelled";
  }
  return "?";
}

std::vector<DumpExplanation> expected_explanations(const ModelDumpSpec& spec, const std::vector<FlatEntry>& reference) {
  std::vector<DumpExplanation> out;
  const bool holds_mamba = std::any_of(reference.begin(), reference.end(), [](const FlatEntry& e) {
    const auto* t = std::get_if<ShardedTensor>(&e.entry);
    return t && is_mamba_split_key(t->key);
  });
  if (spec.optimizer) out.push_back(DumpExplanation::optimizer_common_state);
  if (spec.model == ModelKind::hybrid && holds_mamba) out.push_back(DumpExplanation::mamba_split_factory);
  if (spec.sizes.gtp > 1) out.push_back(DumpExplanation::gtp_not_modelled);
  return out;
}

Result<std::int64_t> apply_explanation(DumpExplanation rule, const ModelDumpSpec& spec, std::int64_t rank,
                                       std::vector<FlatEntry>& real) {
  switch (rule) {
    case DumpExplanation::mamba_split_factory: return merge_mamba_splits(real, spec.sizes.gtp);
    case DumpExplanation::optimizer_common_state: return drop_optimizer_common_state(real);
    case DumpExplanation::gtp_not_modelled: {
      // rank = t + T*(g + G*(d + D*p)) (docs/cli.md, `model dump`)
      const std::int64_t gtp = spec.sizes.gtp, tp = spec.sizes.tp;
      if (gtp < 1 || tp < 1) return make_error(ErrorKind::invalid_argument, "GTP and TP sizes must be at least 1");
      return undo_gtp(real, gtp, rank / tp % gtp);
    }
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
    for (DumpExplanation rule : expected_explanations(spec, reference)) {
      IH_TRY_ASSIGN(rewrites, apply_explanation(rule, spec, rank, target));
      out.explained.emplace_back(rule, rewrites);
    }
  IH_TRY_ASSIGN(differences, dump_differences(reference, target));
  out.differences = std::move(differences);
  return out;
}

}  // namespace ih
