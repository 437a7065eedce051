#include "harness/megatron/megatron_wire.h"

namespace ih {

std::uint64_t gather_storage(const GtpFactoryParams& p) {
  if (p.gather_storage != 0) return p.gather_storage;
  const std::uint64_t base = p.shard && !p.shard->blocks.empty() ? p.shard->blocks.front().storage : 1;
  return base | (std::uint64_t{1} << 62);  // as the reference: a new buffer, never the shard's storage
}

json::Json gtp_request(const GtpFactoryParams& p, GtpSaveDesign design) {
  json::Json out{{"design", design == GtpSaveDesign::gather ? "gather" : "shard-split"},
                 {"key", p.key},
                 {"sections", p.layout.sections},
                 {"names", p.layout.names},
                 {"tp_size", p.tp_size},
                 {"tp_rank", p.tp_rank},
                 {"gtp_size", p.gtp_size},
                 {"gtp_rank", p.gtp_rank},
                 {"pad_for_alignment", p.pad_alignment},
                 {"cols", p.cols},
                 {"dtype", p.dtype},
                 {"gather_storage", gather_storage(p)},
                 {"mixer", p.mixer == GtpMixer::mamba ? "mamba" : "gdp"}};
  if (p.shard && p.shard->blocks.size() == 1 && p.shard->blocks.front().first_row == 0 &&
      !p.shard->blocks.front().is_zero())
    out["shard_storage"] = p.shard->blocks.front().storage;
  return out;
}

json::Json data_json(const TensorValue& value) {
  return json::leaf_to_json(Leaf(LocalNonpersistent{Payload(value)}))["value"];
}

}  // namespace ih
