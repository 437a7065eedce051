// Real versus synthetic (issue 17): one rank of a generated `model dump` configuration, asked of the
// target through the seam (model_state_dict), agrees with the reference's synthetic state dict on
// kind, key, global and local shape, offset, fragmentation, replica id and allow_shape_mismatch
// (models/model_dump_compare.h); against Megatron after the explained rules of docs/spec-addendum.md I,
// each of which must still fire where its configuration names it.
#include "models/model_dump_compare.h"
#include "properties/suite.h"
#include "seam/reference_implementation.h"

namespace ih::props {
namespace {

constexpr std::size_t kShownDifferences = 12;

Verdict model_dump_agrees(Implementation& impl, const ModelDumpCase& c) {
  auto reference = ReferenceImplementation().model_state_dict(c.spec, c.rank);
  if (!reference.ok())  // the generator's own bug: it draws only configurations the reference builds
    return "the reference does not build this case: " + reference.error().message;
  IH_VERDICT_ASSIGN(target, impl.model_state_dict(c.spec, c.rank));
  // The explained rules describe Megatron's real model, the one target with a code identity; the
  // reference and its planted mutants are compared with the reference as they are.
  const bool explain = !impl.code_identity().version.empty();
  IH_VERDICT_ASSIGN(compared, compare_model_dumps(c.spec, c.rank, *reference, std::move(target), explain));
  if (const auto stale = compared.stale(); !stale.empty())
    return typed_verdict("stale_explanation", "the explained difference " + to_string(stale.front()) +
                                                  " (docs/spec-addendum.md I) no longer occurs");
  if (compared.differences.empty()) return "";
  Verdict out = std::to_string(compared.differences.size()) + " differences:";
  for (std::size_t i = 0; i < compared.differences.size() && i < kShownDifferences; ++i)
    out += "\n  " + compared.differences[i];
  return typed_verdict("differs", out);
}

ModelDumpCase gpt_gtp2_rank1() {
  ModelDumpCase c;
  c.spec.sizes.gtp = 2;
  c.rank = 1;
  return c;
}

ModelDumpCase hybrid_moe_pp2_rank3() {
  ModelDumpCase c;
  c.spec.model = ModelKind::hybrid;
  c.spec.pattern = "M*E|M*-";
  c.spec.config.num_experts = 4;
  c.spec.sizes.pp = 2, c.spec.sizes.ep = 2;
  c.spec.optimizer = true;
  c.rank = 3;
  return c;
}

}  // namespace

std::vector<Property> model_dump_properties() {
  return {make_world_property<ModelDumpCase>(
      "model_dump_agrees", "model_dump",
      "a target's model dump of one rank agrees with the reference's synthetic state dict, entry by entry, "
      "after the explained rules (issue 17; spec addendum I)",
      [](const WorldCapacity& capacity) { return genModelDumpCase(capacity); }, model_dump_agrees,
      {{"gpt_gtp2_rank1", gpt_gtp2_rank1()}, {"hybrid_moe_pp2_optimizer_rank3", hybrid_moe_pp2_rank3()}})};
}

}  // namespace ih::props
