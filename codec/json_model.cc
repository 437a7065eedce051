// `model dump` (docs/cli.md): a model configuration as the adapter's model_dump request reads it,
// and a dumped state dict printed without data.
#include "codec/json_codec.h"

namespace ih::json {

Json model_dump_spec_to_json(const ModelDumpSpec& spec, std::int64_t rank) {
  const ModelConfig& c = spec.config;
  const RankLayout& s = spec.sizes;
  Json out{{"model", spec.model == ModelKind::gpt ? "gpt" : "hybrid"},
           {"rank", rank},
           {"layers", spec.layers},
           {"tp", s.tp},
           {"pp", s.pp},
           {"ep", s.ep},
           {"etp", s.etp},
           {"gtp", s.gtp},
           {"pad_alignment", c.pad_alignment},
           {"dp", data_parallel_size(s)},
           {"optimizer", spec.optimizer},
           {"optimizer_kind", to_string(spec.optimizer_kind)},
           {"hidden", c.hidden},
           {"num_attention_heads", c.num_attention_heads},
           {"num_query_groups", c.num_query_groups},
           {"kv_channels", c.kv_channels},
           {"ffn_hidden", c.ffn_hidden},
           {"gated_mlp", c.gated_mlp},
           {"add_bias", c.add_bias},
           {"num_experts", c.num_experts},
           {"moe_ffn_hidden", c.moe_ffn_hidden},
           {"vocab", c.vocab},
           {"tied_embeddings", c.tied_embeddings},
           {"norm", c.layer_norm ? "layer" : "rms"},
           {"mamba_heads", c.mamba_heads},
           {"mamba_head_dim", c.mamba_head_dim},
           {"mamba_groups", c.mamba_groups},
           {"mamba_state", c.mamba_state},
           {"mixer", c.ssm_mixer},
           {"gdp_householder", c.gdp_householder}};
  if (spec.model == ModelKind::hybrid) out["pattern"] = spec.pattern;
  if (s.cp > 1) out["cp"] = s.cp;  // context parallelism (the adapter's default: 1)
  return out;
}

Json dump_entries_to_json(const std::vector<FlatEntry>& entries) {
  Json out = entries_to_json(entries);
  for (Json& item : out) {  // a dump compares metadata; data never crosses (nor a factory recipe's tensor's)
    item["entry"].erase("data");
    if (item["entry"].contains("tensor")) item["entry"]["tensor"].erase("data");
  }
  return out;
}

}  // namespace ih::json
