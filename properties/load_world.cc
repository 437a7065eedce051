#include "properties/load_world.h"

namespace ih::props {

StateNode gtp_rank_tree(const ShardedTensorFactory& in_proj, std::int64_t rank, bool with_neighbours) {
  StateDict mixer{{std::string("in_proj.weight"), StateNode(in_proj)}};
  if (with_neighbours) {
    const ReplicaId replica = ReplicaId::tuple({0, rank, 0});  // replicated: only rank 0 is the main replica
    ShardedTensor a_log = ShardedTensor::from_rank_offsets("decoder.layers.0.mixer.A_log", {4}, {}, replica, 0,
                                                           TensorValue::of_storage(77'000 + rank, {4}))
                              .value();
    mixer.push_back({std::string("A_log"), StateNode(std::move(a_log))});
  }
  StateDict root{{std::string("mixer"), StateNode(std::move(mixer))}};
  if (with_neighbours) {
    root.push_back({std::string("local"),
                    StateNode(LocalNonpersistent{Payload(ObjectRef{500 + static_cast<std::uint64_t>(rank)})})});
    root.push_back({std::string("iteration"), StateNode(PlainValue{"7"})});
  }
  return StateNode(std::move(root));
}

}  // namespace ih::props
