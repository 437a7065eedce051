// The Megatron client's scenario operations (seam/scenarios.h): each one request whose wire is
// codec/json_scenarios.h; Megatron runs the whole scenario in gloo worlds (docs/adapter-protocol.md).
#include "harness/megatron/megatron_implementation.h"

namespace ih {

Result<OptimizerResumeAnswer> MegatronImplementation::optimizer_resume(const OptimizerResumeCase& c) {
  return ask("optimizer_resume", json::optimizer_resume_request(c),
             [](const json::Json& reply) { return json::optimizer_resume_from_json(reply); });
}

Result<FreshRetargetAnswer> MegatronImplementation::fresh_retarget(const FreshRetargetCase& c) {
  return ask("gtp_fresh_retarget", json::fresh_retarget_request(c),
             [](const json::Json& reply) { return json::fresh_retarget_from_json(reply); });
}

Result<LoadOrderingsAnswer> MegatronImplementation::load_orderings(const AllPaddingCase& c) {
  IH_TRY_ASSIGN(answer, ask("load_orderings", json::all_padding_request(c),
                            [](const json::Json& reply) { return json::load_orderings_from_json(reply); }));
  // to_state_dict that could not run here (its nvidia_resiliency_ext guard) is no answer, not a finding.
  for (const OrderingsRank& rank : answer.ranks)
    for (const OrderedLoad* x : {&rank.serialization_load, &rank.to_state_dict})
      if (x->refused && x->refused->message.find("nvidia_resiliency_ext") != std::string::npos)
        return unsupported(name_, "MCoreTensorAwareStateDict.to_state_dict without nvidia_resiliency_ext (" +
                                      x->refused->message + ")");
  return answer;
}

Result<AllPaddingLoadAnswer> MegatronImplementation::all_padding_load(const AllPaddingCase& c) {
  if (!supports(Operation::gtp_param_entry)) return unsupported(name_, "GTP (no GTP in this Megatron)");
  return ask("gtp_all_padding_load", json::all_padding_request(c),
             [](const json::Json& reply) { return json::all_padding_load_from_json(reply); });
}

Result<SingleExpertAnswer> MegatronImplementation::single_expert_load(const SingleExpertCase& c) {
  return ask("single_expert_load", json::single_expert_request(c),
             [](const json::Json& reply) { return json::single_expert_from_json(reply); });
}

}  // namespace ih
