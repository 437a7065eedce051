// What the Megatron client's operation files share on the wire: tensor data and the
// gtp_* request as the adapter reads them (docs/adapter-protocol.md), and a retargeted factory's recipe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "codec/json_codec.h"
#include "models/gtp_layout.h"
#include "seam/implementation.h"

namespace ih {

/// Tensor data as the codec writes it ({"shape", "dtype", "blocks"}).
json::Json data_json(const TensorValue& value);

/// The storage id of the gather design's all-gather buffer: the one asked for, else one derived from the
/// shard's that never equals it.
std::uint64_t gather_storage(const GtpFactoryParams& p);

/// The GtpFactoryParams fields every gtp_* request carries.
json::Json gtp_request(const GtpFactoryParams& p, GtpSaveDesign design);

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

}  // namespace ih
