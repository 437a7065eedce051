// The mutant catalogue and the pattern, FSDP, pipeline, integrity and load mutants.
#include "mutants/mutant_implementation.h"

#include <algorithm>

#include "models/text.h"

namespace ih {

const std::vector<MutantInfo>& mutant_catalogue() {
  static const std::vector<MutantInfo> catalogue = {
#define IH_MUTANT_INFO(name, bug_class, description) {Mutant::name, #name, bug_class, description},
      IH_REFERENCE_MUTANTS(IH_MUTANT_INFO)
#undef IH_MUTANT_INFO
  };
  return catalogue;
}

Result<std::unique_ptr<MutantImplementation>> MutantImplementation::create(const std::string& name) {
  std::string known;
  for (const MutantInfo& m : mutant_catalogue()) {
    if (m.name == name) return std::unique_ptr<MutantImplementation>(new MutantImplementation(m));
    known += (known.empty() ? "" : ", ") + m.name;
  }
  return make_error(ErrorKind::invalid_argument, "unknown mutant '" + name + "' (known: " + known + ")");
}

namespace {

std::int64_t count_of(std::string_view text, char c) { return std::count(text.begin(), text.end(), c); }

std::string replaced(std::string_view text, char from, char to) {
  std::string out(text);
  std::replace(out.begin(), out.end(), from, to);
  return out;
}

}  // namespace

Result<pattern::ParsedPattern> MutantImplementation::parse_pattern(std::optional<std::string_view> text) {
  auto parsed = ReferenceImplementation::parse_pattern(text);
  if (!is(Mutant::parse_symbol_before_identical) || parsed.ok() || parsed.error().kind != ErrorKind::mtp_not_identical)
    return parsed;
  const auto parts = split(*text, '/');
  for (std::size_t i = 1; i < parts.size(); ++i)
    for (char c : parts[i])
      if (!pattern::is_layer_symbol(c))
        return make_error(ErrorKind::invalid_symbol,
                          "In MTP pattern, '" + std::string(1, c) + "' is not a valid layer symbol.");
  return parsed;
}

Result<GptCompatLayerMaps> MutantImplementation::layer_maps(std::optional<std::string_view> text) {
  auto maps = ReferenceImplementation::layer_maps(text);
  const ErrorKind kind = maps.ok() ? seam_kind::harness_error : maps.error().kind;
  if (is(Mutant::maps_accept_mixed) && kind == ErrorKind::mixed_mlp_kinds)
    return ReferenceImplementation::layer_maps(replaced(*text, '-', 'E'));
  if (is(Mutant::maps_counts_before_mixed) && kind == ErrorKind::mixed_mlp_kinds) {
    const std::string main = pattern::strip_pipes(split(*text, '/')[0]);
    const std::int64_t attention = count_of(main, '*'), mlp = count_of(main, 'E');
    if (attention != mlp || attention == 0)
      return make_error(ErrorKind::unbalanced_attention_mlp, "has " + std::to_string(attention) + " attention and " +
                                                                 std::to_string(mlp) + " MLP positions");
  }
  if (is(Mutant::maps_accept_mtp) && kind == ErrorKind::mtp_present)
    return ReferenceImplementation::layer_maps(split(*text, '/')[0]);
  if (is(Mutant::maps_reject_trailing_slash) && maps.ok() && text->ends_with('/'))
    return make_error(ErrorKind::mtp_present, "pattern ends with '/' (treated as an MTP part)");
  if (is(Mutant::maps_pipes_not_stripped) && maps.ok() && text->find('|') != std::string_view::npos) {
    // A pipe counted as a (fresh) layer position shifts every later index.
    auto shifted = ReferenceImplementation::layer_maps(replaced(*text, '|', 'M'));
    if (!shifted.ok()) return shifted;
    const std::string main = split(*text, '/')[0];
    std::erase_if(shifted->fresh_init, [&](std::int64_t i) { return main[i] == '|'; });
    return shifted;
  }
  return maps;
}

Result<pattern::SegmentSelection> MutantImplementation::select_segment(std::string_view main,
                                                                       const pattern::SegmentRequest& request) {
  const std::int64_t segments = pattern::pipeline_segment_count(main);
  if (!is(Mutant::segment_index_r_vpp) || !request.vp_stage || segments <= 1 || request.pp_size < 1 ||
      segments % request.pp_size != 0)
    return ReferenceImplementation::select_segment(main, request);
  const std::int64_t vpp = segments / request.pp_size;
  const std::int64_t index = request.pp_rank * vpp + *request.vp_stage;  // the planted rank-major order
  pattern::SegmentRequest moved = request;
  moved.pp_rank = index % request.pp_size;
  moved.vp_stage = index / request.pp_size;
  return ReferenceImplementation::select_segment(main, moved);
}

Result<std::optional<std::string>> MutantImplementation::fsdp_key(
    std::string_view pattern, std::string_view key, const std::optional<std::vector<std::string>>& checkpoint_keys) {
  auto answer = ReferenceImplementation::fsdp_key(pattern, key, checkpoint_keys);
  if (!is(Mutant::fsdp_first_capture) || !checkpoint_keys || !answer.ok() || !*answer) return answer;
  IH_TRY_ASSIGN(plain, ReferenceImplementation::fsdp_key(pattern, key, std::nullopt));
  if (plain != *answer) return answer;  // exactly one capture: the reference already replaced it
  for (const std::string& candidate : *checkpoint_keys) {
    IH_TRY_ASSIGN(single, ReferenceImplementation::fsdp_key(pattern, key, std::vector<std::string>{candidate}));
    if (single != plain) return single;  // the first capture wins, ambiguous or not
  }
  return answer;
}

Result<IntegrityReport> MutantImplementation::integrity(const GlobalMetadata& metadata,
                                                        const std::optional<std::vector<std::string>>& reference_keys) {
  IH_TRY_ASSIGN(report, ReferenceImplementation::integrity(metadata, reference_keys));
  if (!is(Mutant::integrity_skips_uneven)) return report;
  std::erase_if(report.problems, [&](const IntegrityProblem& p) {
    const bool coverage = p.kind == ProblemKind::hole || p.kind == ProblemKind::overlap;
    return coverage && std::any_of(metadata.tensors.begin(), metadata.tensors.end(), [&](const RankedTensor& t) {
             return t.tensor.key == p.key && !t.tensor.has_regular_grid();
           });
  });
  return report;
}

Result<ShardedTensor> MutantImplementation::gtp_param_entry(const GtpFactoryParams& params) {
  if (auto addendum = addendum_param_entry(params)) return *addendum;
  IH_TRY_ASSIGN(entry, ReferenceImplementation::gtp_param_entry(params));
  if (!is(Mutant::gtp_param_entry_unpadded)) return entry;
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  entry.global_shape[0] = params.tp_size * padding.rows;
  return entry;
}

Result<StateNode> MutantImplementation::load_state(const Checkpoint& checkpoint, const StateNode& request,
                                                   LoadOrder order) {
  if (auto addendum = addendum_load(checkpoint, request, order)) return *addendum;
  if (is(Mutant::load_to_state_dict_baseline) && order == LoadOrder::to_state_dict_fixed)
    order = LoadOrder::to_state_dict_baseline;
  return ReferenceImplementation::load_state(checkpoint, request, order);
}

}  // namespace ih
