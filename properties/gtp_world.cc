#include "properties/gtp_world.h"

#include "models/text.h"

namespace ih::props {
namespace {

/// build/merge through the seam; holds the parameters without the shard (data comes from build).
class SeamBuilder : public FactoryBuilder {
 public:
  SeamBuilder(Implementation& impl, GtpSaveDesign design, GtpFactoryParams params)
      : impl_(&impl), design_(design), params_(std::move(params)) {
    params_.shard.reset();
  }
  std::string name() const override { return "seam:" + to_string(design_); }
  Result<StateNode> build(const std::string& key, const std::optional<TensorValue>& data,
                          const ReplicaId& replica_id) const override {
    GtpFactoryParams p = params_;
    p.key = key, p.shard = data, p.replica_id = replica_id;
    return impl_->gtp_pieces(design_, p);
  }
  Result<TensorValue> merge(const StateNode& loaded) const override {
    return impl_->gtp_merge(design_, params_, loaded);
  }

 private:
  Implementation* impl_;
  GtpSaveDesign design_;
  GtpFactoryParams params_;
};

}  // namespace

std::uint64_t shard_storage(std::int64_t t, std::int64_t g, std::int64_t gtp) {
  return 1 + static_cast<std::uint64_t>(t * gtp + g);
}

Result<GtpPadding> padding_of(const GtpCase& c) {
  IH_TRY_ASSIGN(layout, layout_of(c));
  IH_TRY_ASSIGN(rows, layout.total_rows());
  return gtp_weight_padding(rows, c.gtp, c.pad_alignment);
}

Result<GtpFactoryParams> rank_params(const GtpCase& c, std::int64_t t, std::int64_t g) {
  IH_TRY_ASSIGN(layout, layout_of(c));
  IH_TRY_ASSIGN(padding, padding_of(c));
  GtpFactoryParams p;
  p.key = "decoder.layers.0.mixer.in_proj.weight";
  p.layout = std::move(layout);
  p.tp_size = c.tp, p.tp_rank = t, p.gtp_size = c.gtp, p.gtp_rank = g;
  p.pad_alignment = c.pad_alignment, p.cols = c.cols, p.dtype = c.dtype;
  // Shard split: distinct per GTP peer (GTP-excluded DP). Gather: GTP-inclusive, only g = 0 writes.
  p.replica_id = ReplicaId::tuple({0, 0, c.design == GtpSaveDesign::gather ? g : 0});
  p.shard = TensorValue::of_storage(shard_storage(t, g, c.gtp), {padding.shard_rows, c.cols}, c.dtype);
  p.gather_storage = (std::uint64_t{1} << 32) + static_cast<std::uint64_t>(t);  // one logical TP-local tensor per t
  return p;
}

Result<std::vector<RankBuild>> build_all(Implementation& impl, const GtpCase& c) {
  std::vector<RankBuild> out;
  for (std::int64_t t = 0; t < c.tp; ++t)
    for (std::int64_t g = 0; g < c.gtp; ++g) {
      IH_TRY_ASSIGN(params, rank_params(c, t, g));
      auto built = impl.gtp_pieces(c.design, params);
      if (!built.ok())
        return built.error().with_context("build of rank (t=" + std::to_string(t) + ", g=" + std::to_string(g) + ")");
      RankBuild rank{t, g, params, *built, {}};
      if (built->is_list())
        for (const StateNode& n : built->list())
          if (const auto* piece = n.leaf_if<ShardedTensor>()) rank.pieces.push_back(*piece);
      out.push_back(std::move(rank));
    }
  return out;
}

std::vector<RowBlock> canonical(const TensorValue& t) {
  std::vector<RowBlock> out;
  for (const RowBlock& b : t.blocks) {
    if (b.rows == 0) continue;
    if (!out.empty() && out.back().storage == b.storage &&
        (b.is_zero() || out.back().first_row + out.back().rows == b.first_row))
      out.back().rows += b.rows;
    else
      out.push_back(b);
  }
  return out;
}

std::string show_tensor(const TensorValue& t) {
  std::string out = "(" + join_ints(t.shape, ", ") + ") " + t.dtype + " [";
  for (const RowBlock& b : canonical(t))
    out += (b.is_zero() ? std::string("zeros") : std::to_string(b.storage) + ":" + std::to_string(b.first_row)) + "+" +
           std::to_string(b.rows) + " ";
  return out + "]";
}

ShardedTensorFactory seam_factory(Implementation& impl, GtpSaveDesign design, const GtpFactoryParams& params) {
  std::optional<TensorValue> data = params.shard;
  return ShardedTensorFactory{
      params.key, data, params.replica_id, std::make_shared<SeamBuilder>(impl, design, params), {}};
}

}  // namespace ih::props
