#include "properties/cases.h"

#include "models/model_dump_compare.h"
#include "models/text.h"
#include "seam/error_kinds.h"

namespace ih::props {
namespace {

std::string quoted_list(const std::vector<std::string>& items) {
  std::string out = "[";
  for (const std::string& s : items) out += (out.size() > 1 ? ", '" : "'") + s + "'";
  return out + "]";
}

std::ostream& operator<<(std::ostream& os, const RankLayout& l) {
  return os << "tp=" << l.tp << " pp=" << l.pp << " ep=" << l.ep << " etp=" << l.etp;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const ElectionCase& c) {
  os << "world tp=" << c.tp << " gtp=" << c.gtp << " cp=" << c.cp << " dp=" << c.dp;
  if (c.expert) os << "; expert weight etp=" << c.etp << " ep=" << c.ep << " egtp=" << c.egtp;
  return os << "; groups from " << c.source << "; rows=" << c.rows << " pad_alignment=" << c.pad_alignment
            << " cols=" << c.cols;
}

std::ostream& operator<<(std::ostream& os, const PatternCase& c) {
  return os << "pattern '" << c.pattern << "' (layers '" << c.layers << "', pp " << c.pp << ")";
}

std::ostream& operator<<(std::ostream& os, const NearValidCase& c) {
  return os << "pattern '" << c.pattern << "' (" << c.mutation << "; expects " << to_string(c.expected) << ")";
}

std::ostream& operator<<(std::ostream& os, const GtpCase& c) {
  os << c.mixer << " in_proj d_inner_local=" << c.dims.d_inner_local
     << " group_state_local=" << c.dims.group_state_local << " nheads_local=" << c.dims.nheads_local;
  if (c.mixer == "gdp") os << " householder=" << c.dims.householder;
  const auto layout = layout_of(c);
  if (layout.ok()) os << " (D=" << layout->total_rows().value() << ")";
  return os << ", tp=" << c.tp << " gtp=" << c.gtp << " pad_alignment=" << c.pad_alignment << " cols=" << c.cols << " "
            << c.dtype << " design=" << to_string(c.design) << " drop=" << c.drop;
}

std::ostream& operator<<(std::ostream& os, const GtpCrossCase& c) {
  return os << "save: " << c.save << "; load: gtp=" << c.load_gtp << " pad_alignment=" << c.load_pad_alignment
            << " design=shard-split";
}

std::ostream& operator<<(std::ostream& os, const ModelCase& c) {
  const ModelConfig& m = c.config;
  os << "pattern '" << c.pattern << "', " << c.layout << ", experts=" << m.num_experts << " gated=" << m.gated_mlp
     << " bias=" << m.add_bias;
  if (c.layout.gtp > 1 || m.ssm_mixer != "mamba")
    os << ", mixer=" << m.ssm_mixer << " gtp=" << c.layout.gtp << " pad_alignment=" << m.pad_alignment
       << (m.ssm_mixer == "gdp" ? " design=" + to_string(m.gdp_design) : std::string());
  return os;
}

std::ostream& operator<<(std::ostream& os, const LoadCase& c) {
  return os << "GPT saved at " << c.gpt_layout << "; hybrid " << c.hybrid;
}

std::ostream& operator<<(std::ostream& os, const SegmentCase& c) {
  std::string main;
  for (std::size_t i = 0; i < c.segments.size(); ++i) main += (i ? "|" : "") + c.segments[i];
  return os << "main '" << main << "', pp " << c.pp;
}

std::ostream& operator<<(std::ostream& os, const FsdpCase& c) {
  return os << "pattern '" << c.pattern << "', key '" << c.key << "', checkpoint keys "
            << quoted_list(c.checkpoint_keys) << ", planted captures " << quoted_list(c.captures);
}

std::ostream& operator<<(std::ostream& os, const KeyRulesCase& c) {
  return os << "pattern '" << c.pattern << "', keys " << quoted_list(c.keys);
}

Result<SplitLayout> layout_of(const GtpCase& c) {
  if (c.mixer == "mamba")
    return mamba_in_proj_layout({c.dims.d_inner_local, c.dims.group_state_local, c.dims.nheads_local});
  return gdp_in_proj_layout(c.dims);
}

std::ostream& operator<<(std::ostream& os, const ModelDumpCase& c) {
  return os << "model dump " << model_dump_flags(c.spec) << " --rank " << c.rank;
}

}  // namespace ih::props
