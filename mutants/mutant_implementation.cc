// The mutant catalogue and the pattern, FSDP, pipeline, integrity and load mutants.
#include "mutants/mutant_implementation.h"

#include <algorithm>

#include "models/text.h"

namespace ih {

const std::vector<MutantInfo>& mutant_catalogue() {
  static const std::vector<MutantInfo> catalogue = {
      {"gtp_offset_no_tp_term", "6.1", "GTP piece offsets drop the t*s_j term"},
      {"gtp_global_shape_padded", "6.2", "GTP piece global shape taken from the padded original (T*G*R rows)"},
      {"gtp_real_rows_plus_one", "6.3", "a partly padded GTP rank saves one pad row (off-by-one real rows)"},
      {"gtp_only_last_rank_pads", "6.4", "merge assumes only the last GTP rank holds padding"},
      {"gtp_all_padding_empty_list", "6.5", "an all-padding rank builds [] instead of an LNP"},
      {"gtp_all_padding_plain_tensor", "6.5", "an all-padding rank builds a plain zero tensor (leaks into common)"},
      {"gtp_merge_reads_data", "6.6", "merge reads the factory's data, which load preprocessing strips"},
      {"gtp_all_padding_merge_empty", "6.7", "the all-padding merge returns the zero-element tensor"},
      {"gtp_merge_zeros_float32", "6.7", "merge appends float32 zero rows whatever the shard's dtype"},
      {"gtp_pieces_copied", "6.8", "pieces are copies of the shard rows, not views"},
      {"gtp_fragmentations_on_aligned", "6.9", "grid-aligned pieces carry axis_fragmentations"},
      {"gtp_replica_from_gtp_rank", "6.10", "piece replica_id from the GTP-inclusive DP rank (only g = 0 writes)"},
      {"load_to_state_dict_baseline", "6.11", "to_state_dict merges factories before nonpersistent values"},
      {"maps_accept_mixed", "6.12", "layer maps accept mixed '-'/'E' (MoE map wins)"},
      {"maps_counts_before_mixed", "6.12", "layer maps check counts before the mixed-kind check"},
      {"maps_pipes_not_stripped", "6.13", "layer maps count pipes as layer positions"},
      {"maps_reject_trailing_slash", "6.14", "layer maps reject a trailing '/' (MTP depth 0)"},
      {"maps_accept_mtp", "6.14", "layer maps ignore an MTP part instead of rejecting it"},
      {"parse_symbol_before_identical", "6.14", "the parser checks MTP symbols before the identical-parts check"},
      {"retarget_final_layer_norm", "6.15", "final norm renamed to decoder.final_layer_norm."},
      {"retarget_final_norm_anchored", "6.15", "final norm renamed only at the start of a key (optimizer copies kept)"},
      {"retarget_anchored_layer_regex", "6.16", "layer regex anchored at the key start (optimizer entries untouched)"},
      {"retarget_drop_optimizer_prefix", "6.16", "retargeted optimizer keys lose their optimizer.state.<s>. prefix"},
      {"retarget_so_placeholder_prepended", "6.17", "ShardedObject placeholder (1,)/(0,) prepended, giving (L, 1)"},
      {"retarget_prepend_axis_not_incremented", "6.18", "prepend_axis_num not incremented on retargeted tensors"},
      {"retarget_factory_wrapped_twice", "6.19", "a factory's build wrapped twice (two layer axes)"},
      {"retarget_fresh_left_sharded", "6.20", "fresh-layer ShardedObjects and factories left sharded"},
      {"retarget_index_renumbered", "2.9", "the sharded path renumbers the layer index (FSDP style) instead of removing it"},
      {"retarget_unknown_layer_skipped", "6.21", "entries of unknown hybrid layers silently left unchanged"},
      {"retarget_omitted_by_equality", "6.22", "output_layer._extra_state matched by equality, not as a suffix"},
      {"fsdp_first_capture", "6.23", "FSDP prefix recovery takes the first of several distinct captures"},
      {"segment_index_r_vpp", "6.24", "pipeline segment index r*VPP + vp instead of vp*P + r"},
      {"integrity_skips_uneven", "6.10", "integrity skips keys with irregular grids, like Megatron's validation"},
      {"gtp_param_entry_unpadded", "4.7.7", "the GTP parameter entry's global rows from D, not the padded D'"},
  };
  return catalogue;
}

Result<std::unique_ptr<MutantImplementation>> MutantImplementation::create(const std::string& name) {
  std::string known;
  for (const MutantInfo& m : mutant_catalogue()) {
    if (m.name == name) return std::unique_ptr<MutantImplementation>(new MutantImplementation(name));
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
  if (!is("parse_symbol_before_identical") || parsed.ok() || parsed.error().kind != ErrorKind::mtp_not_identical)
    return parsed;
  const auto parts = split(*text, '/');
  for (std::size_t i = 1; i < parts.size(); ++i)
    for (char c : parts[i])
      if (!pattern::is_layer_symbol(c))
        return make_error(ErrorKind::invalid_symbol, "In MTP pattern, '" + std::string(1, c) + "' is not a valid layer symbol.");
  return parsed;
}

Result<GptCompatLayerMaps> MutantImplementation::layer_maps(std::optional<std::string_view> text) {
  auto maps = ReferenceImplementation::layer_maps(text);
  const ErrorKind kind = maps.ok() ? ErrorKind::harness_error : maps.error().kind;
  if (is("maps_accept_mixed") && kind == ErrorKind::mixed_mlp_kinds)
    return ReferenceImplementation::layer_maps(replaced(*text, '-', 'E'));
  if (is("maps_counts_before_mixed") && kind == ErrorKind::mixed_mlp_kinds) {
    const std::string main = pattern::strip_pipes(split(*text, '/')[0]);
    const std::int64_t attention = count_of(main, '*'), mlp = count_of(main, 'E');
    if (attention != mlp || attention == 0)
      return make_error(ErrorKind::unbalanced_attention_mlp, "has " + std::to_string(attention) + " attention and " +
                                                                 std::to_string(mlp) + " MLP positions");
  }
  if (is("maps_accept_mtp") && kind == ErrorKind::mtp_present)
    return ReferenceImplementation::layer_maps(split(*text, '/')[0]);
  if (is("maps_reject_trailing_slash") && maps.ok() && text->ends_with('/'))
    return make_error(ErrorKind::mtp_present, "pattern ends with '/' (treated as an MTP part)");
  if (is("maps_pipes_not_stripped") && maps.ok() && text->find('|') != std::string_view::npos) {
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
  if (!is("segment_index_r_vpp") || !request.vp_stage || segments <= 1 || request.pp_size < 1 ||
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
  if (!is("fsdp_first_capture") || !checkpoint_keys || !answer.ok() || !*answer) return answer;
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
  if (!is("integrity_skips_uneven")) return report;
  std::erase_if(report.problems, [&](const IntegrityProblem& p) {
    const bool coverage = p.kind == ProblemKind::hole || p.kind == ProblemKind::overlap;
    return coverage && std::any_of(metadata.tensors.begin(), metadata.tensors.end(), [&](const RankedTensor& t) {
             return t.tensor.key == p.key && !t.tensor.has_regular_grid();
           });
  });
  return report;
}

Result<ShardedTensor> MutantImplementation::gtp_param_entry(const GtpFactoryParams& params) {
  IH_TRY_ASSIGN(entry, ReferenceImplementation::gtp_param_entry(params));
  if (!is("gtp_param_entry_unpadded")) return entry;
  IH_TRY_ASSIGN(padding, gtp_padding_of(params));
  entry.global_shape[0] = params.tp_size * padding.rows;
  return entry;
}

Result<StateNode> MutantImplementation::load_state(const Checkpoint& checkpoint, const StateNode& request,
                                                   LoadOrder order) {
  if (is("load_to_state_dict_baseline") && order == LoadOrder::to_state_dict_fixed)
    order = LoadOrder::to_state_dict_baseline;
  return ReferenceImplementation::load_state(checkpoint, request, order);
}

}  // namespace ih
