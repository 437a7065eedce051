#include "models/synthetic_model.h"

#include <algorithm>
#include <string_view>

#include "models/checked_math.h"
#include "models/hybrid_pattern.h"
#include "models/split_factory.h"

namespace ih {
namespace {

/// SwiGLU fc1 (spec 2.3): the TP-local 2F/T rows split into W (chunk t) and V (chunk t + T) of 2T.
class SwigluBuilder : public FactoryBuilder {
 public:
  SwigluBuilder(std::vector<AxisOffset> prefix, std::int64_t tp, std::int64_t tp_rank)
      : prefix_(std::move(prefix)), tp_(tp), tp_rank_(tp_rank) {}
  std::string name() const override { return "swiglu"; }

  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica) const override {
    if (!data) return make_error(ErrorKind::invalid_argument, "swiglu factory '" + key + "' needs its data to build");
    const std::int64_t half = data->rows() / 2;
    StateList pieces;
    for (std::int64_t part = 0; part < 2; ++part) {
      std::vector<AxisOffset> offsets = prefix_;
      offsets.push_back({static_cast<std::int64_t>(prefix_.size()), tp_rank_ + part * tp_, 2 * tp_});
      IH_TRY_ASSIGN(
          piece, ShardedTensor::from_rank_offsets(key, {}, offsets, replica, static_cast<std::int64_t>(prefix_.size()),
                                                  data->row_view(part * half, (part + 1) * half)));
      pieces.push_back(StateNode(std::move(piece)));
    }
    return StateNode(std::move(pieces));
  }

  std::optional<FactoryRecipe> recipe(const ShardedTensorFactory& factory) const override {
    if (!factory.data) return std::nullopt;
    std::vector<AxisOffset> offsets = prefix_;
    offsets.push_back({static_cast<std::int64_t>(prefix_.size()), tp_rank_, tp_});
    auto original =
        ShardedTensor::from_rank_offsets(factory.key, factory.data->shape, offsets, factory.replica_id,
                                         static_cast<std::int64_t>(prefix_.size()), std::nullopt, factory.data->dtype);
    if (!original.ok()) return std::nullopt;
    return FactoryRecipe{"swiglu", std::move(original).value(), prefix_};
  }

  Result<TensorValue> merge(const StateNode& loaded) const override {
    if (!loaded.is_list() || loaded.list().size() != 2)
      return make_error(ErrorKind::merge_key_mismatch, "swiglu merge expects the two loaded halves [W, V]");
    std::vector<TensorValue> halves;
    for (const StateNode& half : loaded.list()) {
      const auto* value = half.leaf_if<TensorValue>();
      if (!value) return make_error(ErrorKind::merge_key_mismatch, "swiglu merge: a loaded half is not a tensor");
      halves.push_back(*value);
    }
    return TensorValue::concat_rows(halves);
  }

 private:
  std::vector<AxisOffset> prefix_;
  std::int64_t tp_, tp_rank_;
};

enum class Sharding { column, row, replicated };

/// Emits one model chunk's entries (and their optimizer copies) into a flat dict.
class Emitter {
 public:
  Emitter(const ModelConfig& config, const RankLayout& layout, const OptimizerStates& optimizer, StateDict& out)
      : c_(config), l_(layout), optimizer_(optimizer), out_(out) {}

  /// Key prefix, path prefix and sharded offsets of the entries that follow.
  void at(std::string key_prefix, std::string path_prefix, std::vector<AxisOffset> prefix) {
    key_prefix_ = std::move(key_prefix);
    path_prefix_ = std::move(path_prefix);
    prefix_ = std::move(prefix);
  }

  /// One tensor at `sub`, keyed `key_prefix + sub` unless `key` is given; `pipeline_replica` is the
  /// replica id's first element (1 for the last stage's copy of tied embeddings).
  Status tensor(const std::string& sub, Shape local, Sharding sharding, bool allow_mismatch = false,
                const std::optional<std::string>& key = std::nullopt, std::int64_t pipeline_replica = 0) {
    std::vector<AxisOffset> offsets = prefix_;
    const auto p = static_cast<std::int64_t>(prefix_.size());
    const bool expert = is_expert_;
    const std::int64_t size = expert ? l_.etp : l_.tp, rank = expert ? l_.etp_rank : l_.tp_rank;
    const GtpRole gtp = gtp_role(sub);
    ReplicaId replica = sharding == Sharding::replicated ? ReplicaId::tuple({pipeline_replica, rank, replica_dp()})
                                                         : ReplicaId::tuple({pipeline_replica, 0, replica_dp()});
    if (gtp == GtpRole::weight && sharding != Sharding::replicated) {
      // Megatron's GTP split of the weight's axis 0 (padded for alignment): on the TP axis a composite
      // (t*G + g of T*G), beside it (a row-parallel weight) an axis-0 offset g of G. Replicas: the
      // GTP-excluded DP group.
      IH_TRY_ASSIGN(padding, gtp_weight_padding(local[0], l_.gtp, c_.pad_alignment));
      local[0] = padding.shard_rows;
      if (sharding == Sharding::column) offsets.push_back({p, rank * l_.gtp + l_.gtp_rank, size * l_.gtp});
      if (sharding == Sharding::row)
        offsets.push_back({p + 1, rank, size}), offsets.push_back({p, l_.gtp_rank, l_.gtp});
      // The last stage's copy of tied embeddings takes LanguageModule's own replica id, whose DP element
      // is the GTP-inclusive DP rank.
      replica = ReplicaId::tuple({pipeline_replica, 0, pipeline_replica > 0 ? replica_dp() : dp_rank()});
      allow_mismatch = allow_mismatch || padding.pad > 0;
    } else {
      if (sharding == Sharding::column) offsets.push_back({p, rank, size});
      if (sharding == Sharding::row) offsets.push_back({p + 1, rank, size});
      // A GTP module's other tensors (its bias) are GTP-replicated: the GTP rank in the TP element.
      if (gtp == GtpRole::replicated)
        replica = ReplicaId::tuple(
            {pipeline_replica, sharding == Sharding::replicated ? gtp_tp_element() : l_.gtp_rank, dp_rank()});
    }
    IH_TRY_ASSIGN(t, ShardedTensor::from_rank_offsets(key.value_or(key_prefix_ + sub), {}, offsets, replica, p,
                                                      TensorValue::of_storage(next_storage(), std::move(local))));
    t.allow_shape_mismatch = allow_mismatch;
    add_with_optimizer(sub, Leaf(std::move(t)));
    return Ok{};
  }

  /// An _extra_state object; `holds_weight` false for a linear without a weight of its own (a tied output
  /// layer on the embedding's stage), which GTP therefore does not wrap.
  void object(const std::string& sub, bool holds_weight = true) {
    Shape shape, offset;
    for (const AxisOffset& a : prefix_) {
      shape.push_back(a.fragments);
      offset.push_back(a.rank_offset);
    }
    if (shape.empty()) shape = {1}, offset = {0};
    const std::int64_t rank = is_expert_ ? l_.etp_rank : l_.tp_rank;
    const ReplicaId replica = holds_weight && gtp_role(sub) == GtpRole::replicated
                                  ? ReplicaId::tuple({0, gtp_tp_element(), dp_rank()})
                                  : ReplicaId::tuple({0, rank, replica_dp()});
    out_.push_back({path_prefix_ + sub,
                    StateNode(ShardedObject{key_prefix_ + sub, ObjectRef{next_storage()}, shape, offset, replica})});
  }

  void swiglu(const std::string& sub, Shape local) {
    ShardedTensorFactory factory{
        key_prefix_ + sub,
        TensorValue::of_storage(next_storage(), std::move(local)),
        ReplicaId::tuple({0, 0, dp_rank()}),
        std::make_shared<SwigluBuilder>(prefix_, is_expert_ ? l_.etp : l_.tp, is_expert_ ? l_.etp_rank : l_.tp_rank),
        {}};
    add_with_optimizer(sub, Leaf(std::move(factory)));
  }

  /// The mixer in_proj as a factory (the mixer's split, or under GTP a GTP factory; addendum H). Under GTP its
  /// optimizer states are keyed by the parameter's composite entry (spec 4.7 invariant 7).
  Status in_proj_factory(const ModelConfig& c, const SplitLayout& layout, bool gdp) {
    const std::string sub = "mixer.in_proj.weight";
    IH_TRY_ASSIGN(rows, layout.total_rows());
    const ReplicaId replica = ReplicaId::tuple({0, 0, l_.dp_rank});
    if (l_.gtp == 1) return split(sub, {rows, c.hidden}, layout);  // no GTP: the ordinary split factory
    GtpFactoryParams p;
    p.key = key_prefix_ + sub, p.layout = layout;
    p.tp_size = l_.tp, p.tp_rank = l_.tp_rank, p.gtp_size = l_.gtp, p.gtp_rank = l_.gtp_rank;
    p.pad_alignment = c.pad_alignment, p.cols = c.hidden, p.dtype = "float32";
    p.mixer = gdp ? GtpMixer::gdp : GtpMixer::mamba;
    const GtpSaveDesign design = gdp ? c.gdp_design : GtpSaveDesign::shard_split;  // Mamba gathers regardless
    p.replica_id = design == GtpSaveDesign::gather ? ReplicaId::tuple({0, 0, gtp_inclusive_dp_rank()}) : replica;
    IH_TRY_ASSIGN(padding, gtp_padding_of(p));
    p.shard = TensorValue::of_storage(next_storage(), {padding.shard_rows, c.hidden});
    IH_TRY_ASSIGN(factory, make_gtp_factory(design, p));
    GtpFactoryParams entry = p;
    entry.replica_id = replica;
    for (const std::string& state : optimizer_.names) {
      entry.key = "optimizer.state." + state + "." + p.key;
      entry.shard = TensorValue::of_storage(next_storage(), {padding.shard_rows, c.hidden});
      IH_TRY_ASSIGN(composite, gtp_composite_tensor(entry));
      out_.push_back({"optimizer.state." + path_prefix_ + sub + "." + state, StateNode(std::move(composite))});
    }
    out_.push_back({path_prefix_ + sub, StateNode(std::move(factory))});
    return Ok{};
  }

  /// A TP-local tensor sharded on axis 0 and saved through `_split_tensor_factory` into `layout`'s pieces.
  Status split(const std::string& sub, Shape local, const SplitLayout& layout) {
    std::vector<AxisOffset> offsets = prefix_;
    const auto p = static_cast<std::int64_t>(prefix_.size());
    offsets.push_back({p, l_.tp_rank, l_.tp});
    const ReplicaId replica = ReplicaId::tuple({0, 0, replica_dp()});
    const auto data = TensorValue::of_storage(next_storage(), std::move(local));
    IH_TRY_ASSIGN(orig, ShardedTensor::from_rank_offsets(key_prefix_ + sub, {}, offsets, replica, p, data));
    IH_TRY_ASSIGN(builder, SplitFactoryBuilder::create(orig, layout));
    add_with_optimizer(sub, Leaf(ShardedTensorFactory{key_prefix_ + sub, data, replica, builder, {}}));
    return Ok{};
  }

  /// A norm's replicated weight, and its bias under LayerNorm: `prefix` + "weight" / "bias".
  Status norm(const std::string& prefix, const ModelConfig& c) {
    IH_TRY_STATUS(tensor(prefix + "weight", {c.hidden}, Sharding::replicated));
    if (c.layer_norm) IH_TRY_STATUS(tensor(prefix + "bias", {c.hidden}, Sharding::replicated));
    return Ok{};
  }

  void set_expert(bool expert) { is_expert_ = expert; }
  void plain(const std::string& path, std::string value) {
    out_.push_back({path, StateNode(PlainValue{std::move(value)})});
  }

 private:
  std::uint64_t next_storage() { return ++storage_; }
  /// Experts replicate over the expert-data-parallel group, the rest over data parallel.
  std::int64_t dp_rank() const { return is_expert_ ? l_.expert_dp_rank : l_.dp_rank; }

  /// What Megatron's GTP does to an entry of a parallel linear (ColumnParallelLinear, RowParallelLinear,
  /// VocabParallelEmbedding; not the experts, whose expert GTP size is 1) when ModelConfig::gtp_linears:
  /// its weight is sharded, its bias and _extra_state are GTP-replicated. Anything else (no GTP, or no GTP
  /// module's: norms, the router, the mixers' own tensors) keeps its plain form (replica_dp below).
  enum class GtpRole { plain, weight, replicated };
  GtpRole gtp_role(const std::string& sub) const {
    if (!c_.gtp_linears || l_.gtp == 1 || is_expert_) return GtpRole::plain;
    static constexpr std::string_view kLinears[] = {"linear_qkv", "linear_proj", "linear_fc1",      "linear_fc2",
                                                    "in_proj",    "out_proj",    "word_embeddings", "output_layer"};
    const std::string_view path = sub;
    const std::size_t dot = path.rfind('.');
    if (dot == std::string_view::npos) return GtpRole::plain;
    const std::string_view owner = path.substr(0, dot), name = path.substr(dot + 1);
    const std::string_view module = owner.substr(owner.rfind('.') + 1);  // npos + 1 is 0: the whole owner
    if (std::find(std::begin(kLinears), std::end(kLinears), module) == std::end(kLinears)) return GtpRole::plain;
    if (name == "weight") return GtpRole::weight;
    if (name == "bias" || name == "_extra_state") return GtpRole::replicated;
    return GtpRole::plain;  // a norm fused into the linear's key (layer_norm_weight): the local spec's own module
  }
  /// The TP element of a GTP-replicated entry's replica id: t*G + g.
  std::int64_t gtp_tp_element() const { return l_.tp_rank * l_.gtp + l_.gtp_rank; }
  /// The DP element of a replica id outside a GTP module: with gtp_linears Megatron saves it over the
  /// GTP-inclusive DP group (rank g + G*d); experts over their own group (which holds the GTP ranks).
  std::int64_t replica_dp() const { return c_.gtp_linears && !is_expert_ ? gtp_inclusive_dp_rank() : dp_rank(); }
  /// This rank in the DP group that includes the GTP axis: g + G*d.
  std::int64_t gtp_inclusive_dp_rank() const { return l_.gtp_rank + l_.gtp * l_.dp_rank; }

  void add_with_optimizer(const std::string& sub, Leaf leaf) {
    for (const std::string& state : optimizer_.names) {
      Leaf copy = leaf;
      const std::string prefix = "optimizer.state." + state + ".";
      if (auto* t = std::get_if<ShardedTensor>(&copy)) {
        t->key = prefix + t->key;
        t->data = TensorValue::of_storage(next_storage(), t->local_shape);
      } else if (auto* f = std::get_if<ShardedTensorFactory>(&copy)) {  // a state is a tensor of its own
        f->key = prefix + f->key;
        if (f->data) f->data = TensorValue::of_storage(next_storage(), f->data->shape, f->data->dtype);
      }
      out_.push_back({"optimizer.state." + path_prefix_ + sub + "." + state, StateNode(std::move(copy))});
    }
    out_.push_back({path_prefix_ + sub, StateNode(std::move(leaf))});
  }

  const ModelConfig& c_;
  const RankLayout& l_;
  const OptimizerStates& optimizer_;
  StateDict& out_;
  std::string key_prefix_, path_prefix_;
  std::vector<AxisOffset> prefix_;
  bool is_expert_ = false;
  std::uint64_t storage_ = 0;
};

Status emit_attention(Emitter& e, const ModelConfig& c, const RankLayout& l) {
  const std::int64_t qkv_rows = (c.num_attention_heads + 2 * c.num_query_groups) * c.kv_channels / l.tp;
  const std::int64_t proj_cols = c.num_attention_heads * c.kv_channels / l.tp;
  IH_TRY_STATUS(e.tensor("self_attention.linear_qkv.weight", {qkv_rows, c.hidden}, Sharding::column));
  if (c.add_bias) IH_TRY_STATUS(e.tensor("self_attention.linear_qkv.bias", {qkv_rows}, Sharding::column));
  IH_TRY_STATUS(e.norm("self_attention.linear_qkv.layer_norm_", c));
  e.object("self_attention.linear_qkv._extra_state");
  IH_TRY_STATUS(e.tensor("self_attention.linear_proj.weight", {c.hidden, proj_cols}, Sharding::row));
  if (c.add_bias) IH_TRY_STATUS(e.tensor("self_attention.linear_proj.bias", {c.hidden}, Sharding::replicated));
  e.object("self_attention.linear_proj._extra_state");
  return Ok{};
}

/// An MLP's fc1 (`prefix` "mlp." or an expert's "mlp.experts.experts."): weight and bias, a SwiGLU
/// factory each when gated (Megatron's MLP wraps fc1's bias like its weight), else column-parallel.
Status emit_fc1(Emitter& e, const ModelConfig& c, const std::string& prefix, std::int64_t rows) {
  if (c.gated_mlp)
    e.swiglu(prefix + "linear_fc1.weight", {2 * rows, c.hidden});
  else
    IH_TRY_STATUS(e.tensor(prefix + "linear_fc1.weight", {rows, c.hidden}, Sharding::column));
  if (c.add_bias && c.gated_mlp)
    e.swiglu(prefix + "linear_fc1.bias", {2 * rows});
  else if (c.add_bias)
    IH_TRY_STATUS(e.tensor(prefix + "linear_fc1.bias", {rows}, Sharding::column));
  return Ok{};
}

/// An MLP's fc2: the row-parallel weight and its bias, which every TP rank holds whole.
Status emit_fc2(Emitter& e, const ModelConfig& c, const std::string& prefix, std::int64_t rows) {
  IH_TRY_STATUS(e.tensor(prefix + "linear_fc2.weight", {c.hidden, rows}, Sharding::row));
  if (c.add_bias) IH_TRY_STATUS(e.tensor(prefix + "linear_fc2.bias", {c.hidden}, Sharding::replicated));
  return Ok{};
}

Status emit_dense_mlp(Emitter& e, const ModelConfig& c, const RankLayout& l) {
  const std::int64_t rows = c.ffn_hidden / l.tp;
  IH_TRY_STATUS(emit_fc1(e, c, "mlp.", rows));
  IH_TRY_STATUS(e.norm("mlp.linear_fc1.layer_norm_", c));
  e.object("mlp.linear_fc1._extra_state");
  IH_TRY_STATUS(emit_fc2(e, c, "mlp.", rows));
  e.object("mlp.linear_fc2._extra_state");
  return Ok{};
}

/// MoE layer: router (and its bias) replicated; every local expert adds an expert axis after the layer axis.
Status emit_moe(Emitter& e, const ModelConfig& c, const RankLayout& l, const std::string& key_prefix,
                const std::string& path_prefix, const std::vector<AxisOffset>& prefix) {
  IH_TRY_STATUS(e.norm("pre_mlp_layernorm.", c));
  IH_TRY_STATUS(e.tensor("mlp.router.weight", {c.num_experts, c.hidden}, Sharding::replicated));
  // TopKRouter gives its gating linear a bias whenever the linears have one (add_bias_linear).
  if (c.add_bias) IH_TRY_STATUS(e.tensor("mlp.router.bias", {c.num_experts}, Sharding::replicated));
  const std::int64_t local_experts = c.num_experts / l.ep, rows = c.moe_ffn_hidden / l.etp;
  e.set_expert(true);
  for (std::int64_t local = 0; local < local_experts; ++local) {
    const std::int64_t expert = l.ep_rank * local_experts + local;
    std::vector<AxisOffset> expert_prefix = prefix;
    expert_prefix.push_back({static_cast<std::int64_t>(prefix.size()), expert, c.num_experts});
    e.at(key_prefix, path_prefix + "mlp.experts." + std::to_string(local) + ".", expert_prefix);
    // Megatron's SequentialMLP and TEGroupedMLP both key an expert's linears `mlp.experts.experts.*`.
    // SwiGLU experts: fc1 is the swiglu factory over the expert-TP group.
    IH_TRY_STATUS(emit_fc1(e, c, "mlp.experts.experts.", rows));
    e.object("mlp.experts.experts.linear_fc1._extra_state");
    IH_TRY_STATUS(emit_fc2(e, c, "mlp.experts.experts.", rows));
    e.object("mlp.experts.experts.linear_fc2._extra_state");
  }
  e.set_expert(false);
  e.at(key_prefix, path_prefix, prefix);
  return Ok{};
}

/// The GatedDeltaProduct mixer (spec 4.2): in_proj and conv1d always split factories (under GTP the
/// in_proj in the design of c.gdp_design), conv1d without bias and no D (GatedDeltaProductMixer's
/// defaults, which MambaLayer keeps), the gated norm over d_inner.
Status emit_gdp(Emitter& e, const ModelConfig& c, const GdpDims& dims) {
  IH_TRY_ASSIGN(layout, gdp_in_proj_layout(dims));
  IH_TRY_STATUS(e.in_proj_factory(c, layout, true));
  IH_TRY_STATUS(e.norm("mixer.in_proj.layer_norm_", c));
  e.object("mixer.in_proj._extra_state");
  IH_TRY_ASSIGN(conv, gdp_conv_layout(dims));
  IH_TRY_ASSIGN(conv_rows, conv.total_rows());
  IH_TRY_STATUS(e.split("mixer.conv1d.weight", {conv_rows, 1, 4}, conv));
  IH_TRY_STATUS(e.tensor("mixer.A_log", {dims.nheads_local}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.dt_bias", {dims.nheads_local}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.norm.weight", {dims.d_inner_local}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.out_proj.weight", {c.hidden, dims.d_inner_local}, Sharding::row));
  e.object("mixer.out_proj._extra_state");
  return Ok{};
}

Status emit_mamba(Emitter& e, const ModelConfig& c, const RankLayout& l) {
  const std::int64_t d_inner = c.mamba_heads * c.mamba_head_dim / l.tp;
  const std::int64_t group_state = c.mamba_groups * c.mamba_state / l.tp, heads = c.mamba_heads / l.tp;
  if (c.ssm_mixer == "gdp") return emit_gdp(e, c, {d_inner, group_state, heads, c.gdp_householder});
  // MambaMixer saves its in_proj ([z|x|B|C|dt]) and conv1d ([x|B|C], weight and bias) through
  // `_split_tensor_factory`; under GTP the in_proj is gathered first (the gather design, spec 4.10).
  IH_TRY_ASSIGN(in_proj, mamba_in_proj_layout({d_inner, group_state, heads}));
  IH_TRY_STATUS(e.in_proj_factory(c, in_proj, false));
  IH_TRY_STATUS(e.norm("mixer.in_proj.layer_norm_", c));
  e.object("mixer.in_proj._extra_state");
  IH_TRY_ASSIGN(conv, mamba_conv_layout({d_inner, group_state, heads}));
  IH_TRY_STATUS(e.split("mixer.conv1d.weight", {d_inner + 2 * group_state, 1, 4}, conv));
  IH_TRY_STATUS(e.split("mixer.conv1d.bias", {d_inner + 2 * group_state}, conv));
  IH_TRY_STATUS(e.tensor("mixer.A_log", {heads}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.dt_bias", {heads}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.D", {heads}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.norm.weight", {d_inner}, Sharding::column));
  IH_TRY_STATUS(e.tensor("mixer.out_proj.weight", {c.hidden, d_inner}, Sharding::row));
  e.object("mixer.out_proj._extra_state");
  return Ok{};
}

Status emit_embedding(Emitter& e, const ModelConfig& c, const RankLayout& l, const std::string& chunk) {
  e.at("", chunk + ".", {});
  return e.tensor("embedding.word_embeddings.weight", {c.vocab / l.tp, c.hidden}, Sharding::column, true);
}

Status emit_head(Emitter& e, const ModelConfig& c, const RankLayout& l, const std::string& chunk, bool hybrid) {
  e.at("", chunk + ".", {});
  IH_TRY_STATUS(e.norm(hybrid ? "decoder.final_norm." : "decoder.final_layernorm.", c));
  // Megatron marks the output layer like the embedding: a padded vocabulary may change its rows.
  // Tied on one stage: the output layer uses the word embeddings and has no weight of its own; on
  // the last of several stages it holds a copy saved as a pipeline replica of the embedding.
  if (!c.tied_embeddings)
    IH_TRY_STATUS(e.tensor("output_layer.weight", {c.vocab / l.tp, c.hidden}, Sharding::column, true));
  else if (l.pp_rank > 0)
    IH_TRY_STATUS(e.tensor("output_layer.weight", {c.vocab / l.tp, c.hidden}, Sharding::column, true,
                           "embedding.word_embeddings.weight", 1));
  if (hybrid) e.object("output_layer._extra_state", !c.tied_embeddings || l.pp_rank > 0);  // GPT drops it
  return Ok{};
}

Status emit_layer(Emitter& e, char symbol, const ModelConfig& c, const RankLayout& l, const std::string& key_prefix,
                  const std::string& path_prefix, const std::vector<AxisOffset>& prefix) {
  e.at(key_prefix, path_prefix, prefix);
  switch (symbol) {
    case pattern::kAttention: return emit_attention(e, c, l);
    case pattern::kMlp: return emit_dense_mlp(e, c, l);
    case pattern::kMoe: return emit_moe(e, c, l, key_prefix, path_prefix, prefix);
    case pattern::kMamba: return emit_mamba(e, c, l);
    default:
      return make_error(ErrorKind::invalid_argument,
                        std::string("synthetic hybrid layers support M, *, - and E, not '") + symbol + "'");
  }
}

Status require_divides(std::int64_t divisor, std::int64_t value, const char* what) {
  if (divisor < 1 || value % divisor != 0)
    return make_error(ErrorKind::invalid_argument, std::string(what) + ": " + std::to_string(value) +
                                                       " is not divisible by " + std::to_string(divisor));
  return Ok{};
}

Status require_rank(std::int64_t rank, std::int64_t size, const char* what) {
  if (size < 1 || rank < 0 || rank >= size)
    return make_error(ErrorKind::invalid_argument, std::string(what) + " rank " + std::to_string(rank) +
                                                       " is outside [0, " + std::to_string(size) + ")");
  return Ok{};
}

}  // namespace

std::vector<RankLayout> all_ranks(const RankLayout& sizes) {
  std::vector<RankLayout> out;
  for (std::int64_t pp = 0; pp < sizes.pp; ++pp)
    for (std::int64_t tp = 0; tp < sizes.tp; ++tp)
      for (std::int64_t ep = 0; ep < sizes.ep; ++ep)
        for (std::int64_t etp = 0; etp < sizes.etp; ++etp)
          for (std::int64_t gtp = 0; gtp < sizes.gtp; ++gtp) {
            RankLayout rank = sizes;
            rank.pp_rank = pp, rank.tp_rank = tp, rank.ep_rank = ep, rank.etp_rank = etp, rank.gtp_rank = gtp;
            out.push_back(rank);
          }
  return out;
}

Status validate_layout(const ModelConfig& c, const RankLayout& l) {
  IH_TRY_STATUS(require_rank(l.tp_rank, l.tp, "tensor-parallel"));
  IH_TRY_STATUS(require_rank(l.pp_rank, l.pp, "pipeline-parallel"));
  IH_TRY_STATUS(require_rank(l.ep_rank, l.ep, "expert-parallel"));
  IH_TRY_STATUS(require_rank(l.etp_rank, l.etp, "expert-tensor-parallel"));
  IH_TRY_STATUS(require_rank(l.gtp_rank, l.gtp, "generalized-tensor-parallel"));
  if (c.ssm_mixer != "mamba" && c.ssm_mixer != "gdp")
    return make_error(ErrorKind::invalid_argument, "ssm_mixer must be mamba or gdp, got '" + c.ssm_mixer + "'");
  IH_TRY_STATUS(require_divides(l.tp, c.num_attention_heads, "num_attention_heads by tp"));
  IH_TRY_STATUS(require_divides(l.tp, c.num_query_groups, "num_query_groups by tp"));
  IH_TRY_STATUS(require_divides(l.tp, c.ffn_hidden, "ffn_hidden by tp"));
  IH_TRY_STATUS(require_divides(l.tp, c.vocab, "vocab by tp"));
  if (c.num_experts > 0) {
    IH_TRY_STATUS(require_divides(l.ep, c.num_experts, "num_experts by ep"));
    IH_TRY_STATUS(require_divides(l.etp, c.moe_ffn_hidden, "moe_ffn_hidden by etp"));
  }
  return Ok{};
}

Status validate_mamba_layout(const ModelConfig& c, const RankLayout& l) {
  IH_TRY_STATUS(require_divides(l.tp, c.mamba_heads, "mamba_heads by tp"));
  IH_TRY_STATUS(require_divides(l.tp * l.cp, c.mamba_heads, "mamba_heads by tp x cp"));  // MambaContextParallel's
  return require_divides(l.tp, c.mamba_groups, "mamba_groups by tp");
}

Result<StateNode> gpt_sharded_state_dict(const ModelConfig& config, std::int64_t num_layers, const RankLayout& layout,
                                         const OptimizerStates& optimizer) {
  IH_TRY_STATUS(validate_layout(config, layout));
  if (num_layers < 1) return make_error(ErrorKind::invalid_argument, "num_layers must be positive");
  IH_TRY_STATUS(require_divides(layout.pp, num_layers, "num_layers by pp"));
  StateDict out;
  Emitter emitter(config, layout, optimizer, out);
  if (layout.pp_rank == 0) IH_TRY_STATUS(emit_embedding(emitter, config, layout, "model"));
  const std::int64_t per_stage = num_layers / layout.pp;
  const char mlp = config.num_experts > 0 ? pattern::kMoe : pattern::kMlp;
  for (std::int64_t local = 0; local < per_stage; ++local) {
    const std::int64_t global = layout.pp_rank * per_stage + local;
    const std::string path = "model.decoder.layers." + std::to_string(local) + ".";
    for (const char symbol : {pattern::kAttention, mlp})
      IH_TRY_STATUS(emit_layer(emitter, symbol, config, layout, "decoder.layers.", path, {{0, global, num_layers}}));
  }
  if (layout.pp_rank == layout.pp - 1) IH_TRY_STATUS(emit_head(emitter, config, layout, "model", false));
  if (!optimizer.names.empty()) emitter.plain("optimizer.param_state_sharding_type", "\"fully_reshardable\"");
  return StateNode(std::move(out));
}

Result<StateNode> hybrid_sharded_state_dict(const ModelConfig& config, std::string_view pattern_text,
                                            const RankLayout& layout, const OptimizerStates& optimizer) {
  IH_TRY_STATUS(validate_layout(config, layout));
  IH_TRY_ASSIGN(parsed, pattern::parse(pattern_text));
  const std::string main = parsed.main.value_or("");
  if (main.find(pattern::kMamba) != std::string::npos) IH_TRY_STATUS(validate_mamba_layout(config, layout));
  const std::int64_t segments = pattern::pipeline_segment_count(main);
  const bool virtual_stages = segments > 1 && segments > layout.pp;
  const std::int64_t stages = virtual_stages ? segments / layout.pp : 1;
  StateDict out;
  Emitter emitter(config, layout, optimizer, out);
  for (std::int64_t vp = 0; vp < stages; ++vp) {
    const std::string chunk = stages > 1 ? "model" + std::to_string(vp) : "model";
    IH_TRY_ASSIGN(segment,
                  pattern::select_segment(
                      main, {layout.pp_rank, layout.pp, virtual_stages ? std::optional<std::int64_t>(vp) : std::nullopt,
                             std::nullopt, std::nullopt}));
    if (layout.pp_rank == 0 && vp == 0) IH_TRY_STATUS(emit_embedding(emitter, config, layout, chunk));
    for (std::size_t i = 0; i < segment.layers.size(); ++i) {
      const std::int64_t global = segment.offset + static_cast<std::int64_t>(i);
      IH_TRY_STATUS(emit_layer(emitter, segment.layers[i], config, layout,
                               "decoder.layers." + std::to_string(global) + ".",
                               chunk + ".decoder.layers." + std::to_string(i) + ".", {}));
    }
    if (layout.pp_rank == layout.pp - 1 && vp == stages - 1)
      IH_TRY_STATUS(emit_head(emitter, config, layout, chunk, true));
  }
  if (!optimizer.names.empty()) emitter.plain("optimizer.param_state_sharding_type", "\"fully_reshardable\"");
  return StateNode(std::move(out));
}

}  // namespace ih
