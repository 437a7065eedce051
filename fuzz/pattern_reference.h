// The reference implementation of the pattern operations alone, for the pattern fuzz target: the
// same model functions ReferenceImplementation calls, without the rest of the seam. A fuzz target's
// speed is bounded by how much code libFuzzer scans for coverage after every input; linking
// ReferenceImplementation pulls in every operation of the model (20,551 counters instead of ~2,500).
#pragma once

#include "models/gpt_layer_maps.h"
#include "models/hybrid_pattern.h"
#include "seam/implementation.h"

namespace ih::fuzz {

class PatternReference : public Implementation {
 public:
  std::string name() const override { return "reference (pattern operations)"; }
  Result<pattern::ParsedPattern> parse_pattern(std::optional<std::string_view> text) override {
    return pattern::parse(text);
  }
  Result<GptCompatLayerMaps> layer_maps(std::optional<std::string_view> text) override {
    return gpt_compatible_layer_maps(text);
  }
  Result<pattern::SegmentSelection> select_segment(std::string_view main,
                                                   const pattern::SegmentRequest& request) override {
    return pattern::select_segment(main, request);
  }
  Result<std::vector<FlatEntry>> retarget(std::string_view, const std::vector<FlatEntry>&) override {
    return unsupported(name(), "retarget");
  }
  Result<std::optional<std::string>> fsdp_key(std::string_view, std::string_view,
                                              const std::optional<std::vector<std::string>>&) override {
    return unsupported(name(), "fsdp_key");
  }
  Result<StateNode> fsdp_retarget(std::string_view, const StateNode&, const std::optional<std::vector<std::string>>&,
                                  std::string_view) override {
    return unsupported(name(), "fsdp_retarget");
  }
};

}  // namespace ih::fuzz
