// The two GTP in_proj factories behind make_gtp_factory (spec 4.5 and 4.7).
#include <memory>

#include "models/checked_math.h"
#include "models/gtp_layout.h"
#include "models/split_factory.h"

namespace ih {
namespace {

/// Baseline (spec 4.5): build splits the gathered (D, C) tensor like a non-GTP run; merge
/// concatenates, zero-pads to G*R rows and returns this rank's rows [g*R, (g+1)*R).
class GtpGatherBuilder : public FactoryBuilder {
 public:
  GtpGatherBuilder(std::shared_ptr<const SplitFactoryBuilder> split, GtpPadding padding, std::int64_t gtp_rank,
                   std::int64_t cols)
      : split_(std::move(split)), padding_(padding), gtp_rank_(gtp_rank), cols_(cols) {}
  std::string name() const override { return "gtp_gather"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica_id) const override {
    return split_->build(key, data, replica_id);
  }
  Result<TensorValue> merge(const StateNode& loaded) const override {
    IH_TRY_ASSIGN(full, split_->merge(loaded));
    if (full.rows() != padding_.rows)
      return make_error(ErrorKind::invalid_argument, "gather merge: loaded " + std::to_string(full.rows()) +
                                                         " rows, expected D = " + std::to_string(padding_.rows));
    const std::int64_t total = padding_.shard_rows * padding_.gtp_size;
    IH_TRY_ASSIGN(padded,
                  TensorValue::concat_rows({full, TensorValue::zeros({total - padding_.rows, cols_}, full.dtype)}));
    const std::int64_t begin = gtp_rank_ * padding_.shard_rows;
    return padded.row_view(begin, begin + padding_.shard_rows);
  }

 private:
  std::shared_ptr<const SplitFactoryBuilder> split_;
  GtpPadding padding_;
  std::int64_t gtp_rank_, cols_;
};

/// The PR's design (spec 4.7): pieces are row views of the shard; an all-padding rank builds one
/// LNP holding a (0, C) view; merge rebuilds (R, C) from the loaded pieces plus zero rows.
class GtpShardSplitBuilder : public FactoryBuilder {
 public:
  GtpShardSplitBuilder(SplitLayout layout, std::vector<GtpPiece> plan, std::int64_t shard_rows, std::int64_t real_rows,
                       std::int64_t cols, std::string dtype)
      : layout_(std::move(layout)),
        plan_(std::move(plan)),
        shard_rows_(shard_rows),
        real_rows_(real_rows),
        cols_(cols),
        dtype_(std::move(dtype)) {}
  std::string name() const override { return "gtp_shard_split"; }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica_id) const override;
  Result<TensorValue> merge(const StateNode& loaded) const override;

 private:
  ShardedTensor piece(const GtpPiece& p, const std::string& key, const std::optional<TensorValue>& data,
                      const ReplicaId& replica_id) const;
  SplitLayout layout_;
  std::vector<GtpPiece> plan_;
  std::int64_t shard_rows_, real_rows_, cols_;
  std::string dtype_;
};

ShardedTensor GtpShardSplitBuilder::piece(const GtpPiece& p, const std::string& key,
                                          const std::optional<TensorValue>& data, const ReplicaId& replica_id) const {
  ShardedTensor out;
  out.key = key + "." + layout_.names[p.section];
  if (data) out.data = data->row_view(p.shard_row, p.shard_row + p.rows);  // a view: same storage ids
  out.dtype = data ? data->dtype : dtype_;
  out.local_shape = {p.rows, cols_};
  out.global_shape = {p.global_rows, cols_};
  out.global_offset = {p.global_row_offset, 0};
  out.axis_fragmentations = std::nullopt;  // uneven pieces; never a grid, even when aligned
  out.replica_id = replica_id;
  out.allow_shape_mismatch = false;  // chunk shapes are topology-independent
  return out;
}

Result<StateNode> GtpShardSplitBuilder::build(const std::string& key, const std::optional<TensorValue>& data,
                                              const ReplicaId& replica_id) const {
  if (data && data->shape != Shape{shard_rows_, cols_})
    return make_error(ErrorKind::invalid_argument, "gtp shard split of '" + key + "': data has " +
                                                       std::to_string(data->rows()) +
                                                       " rows, expected R = " + std::to_string(shard_rows_));
  if (plan_.empty()) {
    // All-padding rank: an LNP keeps the factory's path alive through load preprocessing.
    TensorValue empty = data ? data->row_view(0, 0) : TensorValue{{0, cols_}, dtype_, {}};
    return StateNode(LocalNonpersistent{Payload(std::move(empty))});
  }
  StateList pieces;
  for (const GtpPiece& p : plan_) pieces.emplace_back(piece(p, key, data, replica_id));
  return StateNode(std::move(pieces));
}

Result<TensorValue> GtpShardSplitBuilder::merge(const StateNode& loaded) const {
  if (const auto* bare = loaded.leaf_if<TensorValue>()) {
    if (real_rows_ != 0)
      return make_error(ErrorKind::invalid_argument, "gtp shard split merge: a bare tensor arrived for a shard with " +
                                                         std::to_string(real_rows_) + " real rows");
    return TensorValue::zeros({shard_rows_, cols_}, bare->dtype);
  }
  IH_TRY_ASSIGN(parts, loaded_tensors(loaded, "gtp shard split merge"));
  IH_TRY_ASSIGN(real, TensorValue::concat_rows(parts));
  if (real.rows() != real_rows_)
    return make_error(ErrorKind::invalid_argument, "gtp shard split merge: loaded " + std::to_string(real.rows()) +
                                                       " rows, expected r = " + std::to_string(real_rows_));
  return TensorValue::concat_rows({real, TensorValue::zeros({shard_rows_ - real_rows_, cols_}, real.dtype)});
}

std::uint64_t gather_storage_of(const GtpFactoryParams& params) {
  if (params.gather_storage != 0) return params.gather_storage;
  const std::uint64_t base = params.shard && !params.shard->blocks.empty() ? params.shard->blocks.front().storage : 1;
  return base | (std::uint64_t{1} << 62);  // a new buffer: never the shard's own storage
}

Result<ShardedTensorFactory> make_gather_factory(const GtpFactoryParams& params, const GtpPadding& padding) {
  std::optional<TensorValue> gathered;
  if (params.shard)
    gathered = TensorValue::of_storage(gather_storage_of(params), {padding.rows, params.cols}, params.dtype);
  IH_TRY_ASSIGN(orig, tp_row_sharded(params.key, padding.rows, params.cols, params.tp_size, params.tp_rank,
                                     params.replica_id, gathered, params.dtype));
  IH_TRY_ASSIGN(split, SplitFactoryBuilder::create(orig, params.layout));
  auto builder = std::make_shared<GtpGatherBuilder>(split, padding, params.gtp_rank, params.cols);
  return ShardedTensorFactory{params.key, gathered, params.replica_id, builder, {}};
}

/// Mamba's in_proj asked for the shard split still gathers (spec 4.10, addendum E). Its gathered
/// tensor is re-described with (0, 0, rank in metadata["dp_cp_group"]), the GTP-inclusive DP x CP
/// group: with the GTP axis next to TP that rank is g + G * d, d being the GTP-excluded rank the
/// shard-split id carries.
Result<ShardedTensorFactory> make_mamba_gather_factory(GtpSaveDesign asked, GtpFactoryParams params,
                                                       const GtpPadding& padding) {
  if (asked == GtpSaveDesign::shard_split) {
    const std::int64_t d = params.replica_id.coords.empty() ? 0 : params.replica_id.coords.back();
    IH_TRY_ASSIGN(scaled, checked_mul(params.gtp_size, d, "G * dp rank"));
    params.replica_id = ReplicaId::tuple({0, 0, scaled + params.gtp_rank});
  }
  return make_gather_factory(params, padding);
}

}  // namespace

Result<ShardedTensorFactory> make_gtp_factory(GtpSaveDesign design, const GtpFactoryParams& params) {
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  if (params.mixer == GtpMixer::mamba) return make_mamba_gather_factory(design, params, padding);
  if (design == GtpSaveDesign::gather) return make_gather_factory(params, padding);
  IH_TRY_ASSIGN(plan, gtp_piece_plan(params.layout, padding, params.tp_size, params.tp_rank, params.gtp_rank));
  auto builder = std::make_shared<GtpShardSplitBuilder>(params.layout, std::move(plan), padding.shard_rows,
                                                        padding.real_rows(params.gtp_rank), params.cols, params.dtype);
  return ShardedTensorFactory{params.key, params.shard, params.replica_id, builder, {}};
}

}  // namespace ih
