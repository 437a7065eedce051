// The layout operations of the seam: the reference answers them, other implementations default
// to `unsupported`.
#include <gtest/gtest.h>

#include "models/split_factory.h"
#include "seam/reference_implementation.h"

namespace ih {
namespace {

GtpFactoryParams example_c_rank1() {
  GtpFactoryParams p;
  p.key = "in_proj.weight";
  p.layout = gdp_in_proj_layout({256, 256, 4, 3}).value();
  p.gtp_size = 2, p.gtp_rank = 1, p.pad_alignment = 32, p.cols = 4;
  p.shard = TensorValue::of_storage(3, {1'056, 4});
  return p;
}

TEST(ReferenceLayoutOps, PiecesMergeAndIntegrity) {
  ReferenceImplementation ref;
  const StateNode pieces = ref.gtp_pieces(GtpSaveDesign::shard_split, example_c_rank1()).value();
  ASSERT_EQ(pieces.list().size(), 8u);
  StateList loaded;
  GlobalMetadata meta;
  meta.add_tree(1, pieces);
  for (const StateNode& n : pieces.list()) loaded.emplace_back(*std::get<ShardedTensor>(n.leaf()).data);
  const TensorValue merged = ref.gtp_merge(GtpSaveDesign::shard_split, example_c_rank1(), StateNode(loaded)).value();
  EXPECT_EQ(merged.blocks, (std::vector<RowBlock>{{3, 0, 1'008}, {0, 0, 48}}));
  EXPECT_FALSE(ref.integrity(meta, std::nullopt).value().ok());  // rank 0's pieces are absent
  const ShardedTensor orig = tp_row_sharded("k", 60, 2, 1, 0).value();
  EXPECT_EQ(ref.split_chunks(orig, gdp_in_proj_layout({10, 3, 2, 3}).value()).value().size(), 12u);
}

class Minimal : public ReferenceImplementation {
 public:
  std::string name() const override { return "minimal"; }
  Result<StateNode> gtp_pieces(GtpSaveDesign design, const GtpFactoryParams& params) override {
    return Implementation::gtp_pieces(design, params);
  }
};

TEST(ReferenceLayoutOps, DefaultsAnswerUnsupported) {
  Minimal minimal;
  const auto r = minimal.gtp_pieces(GtpSaveDesign::gather, example_c_rank1());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().kind, seam_kind::unsupported);
  EXPECT_EQ(r.error().message, "minimal does not support gtp_pieces");
}

}  // namespace
}  // namespace ih
