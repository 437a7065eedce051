// The catalogue of planted reference mutants: one line each (name, spec bug class, what it does).
// The one table behind --mutant, --list-mutants and the mutation test; code selects a mutant by its
// enumerator (MutantImplementation::is), so a misspelt name does not compile.
#pragma once

// X(name, bug class, description)
#define IH_REFERENCE_MUTANTS(X)                                                                                       \
  X(gtp_offset_no_tp_term, "6.1", "GTP piece offsets drop the t*s_j term")                                            \
  X(gtp_global_shape_padded, "6.2", "GTP piece global shape taken from the padded original (T*G*R rows)")             \
  X(gtp_real_rows_plus_one, "6.3", "a partly padded GTP rank saves one pad row (off-by-one real rows)")               \
  X(gtp_only_last_rank_pads, "6.4", "merge assumes only the last GTP rank holds padding")                             \
  X(gtp_all_padding_empty_list, "6.5", "an all-padding rank builds [] instead of an LNP")                             \
  X(gtp_all_padding_plain_tensor, "6.5", "an all-padding rank builds a plain zero tensor (leaks into common)")        \
  X(gtp_merge_reads_data, "6.6", "merge reads the factory's data, which load preprocessing strips")                   \
  X(gtp_all_padding_merge_empty, "6.7", "the all-padding merge returns the zero-element tensor")                      \
  X(gtp_merge_zeros_float32, "6.7", "merge appends float32 zero rows whatever the shard's dtype")                     \
  X(gtp_pieces_copied, "6.8", "pieces are copies of the shard rows, not views")                                       \
  X(gtp_fragmentations_on_aligned, "6.9", "grid-aligned pieces carry axis_fragmentations")                            \
  X(gtp_replica_from_gtp_rank, "6.10", "piece replica_id from the GTP-inclusive DP rank (only g = 0 writes)")         \
  X(load_to_state_dict_baseline, "6.11", "to_state_dict merges factories before nonpersistent values")                \
  X(maps_accept_mixed, "6.12", "layer maps accept mixed '-'/'E' (MoE map wins)")                                      \
  X(maps_counts_before_mixed, "6.12", "layer maps check counts before the mixed-kind check")                          \
  X(maps_pipes_not_stripped, "6.13", "layer maps count pipes as layer positions")                                     \
  X(maps_reject_trailing_slash, "6.14", "layer maps reject a trailing '/' (MTP depth 0)")                             \
  X(maps_accept_mtp, "6.14", "layer maps ignore an MTP part instead of rejecting it")                                 \
  X(parse_symbol_before_identical, "6.14", "the parser checks MTP symbols before the identical-parts check")          \
  X(retarget_final_layer_norm, "6.15", "final norm renamed to decoder.final_layer_norm.")                             \
  X(retarget_final_norm_anchored, "6.15", "final norm renamed only at the start of a key (optimizer copies kept)")    \
  X(retarget_anchored_layer_regex, "6.16", "layer regex anchored at the key start (optimizer entries untouched)")     \
  X(retarget_drop_optimizer_prefix, "6.16", "retargeted optimizer keys lose their optimizer.state.<s>. prefix")       \
  X(retarget_so_placeholder_prepended, "6.17", "ShardedObject placeholder (1,)/(0,) prepended, giving (L, 1)")        \
  X(retarget_prepend_axis_not_incremented, "6.18", "prepend_axis_num not incremented on retargeted tensors")          \
  X(retarget_factory_wrapped_twice, "6.19", "a factory's build wrapped twice (two layer axes)")                       \
  X(retarget_fresh_left_sharded, "6.20", "fresh-layer ShardedObjects and factories left sharded")                     \
  X(retarget_index_renumbered, "2.9",                                                                                 \
    "the sharded path renumbers the layer index (FSDP style) instead of removing it")                                 \
  X(retarget_unknown_layer_skipped, "6.21", "entries of unknown hybrid layers silently left unchanged")               \
  X(retarget_omitted_by_equality, "6.22", "output_layer._extra_state matched by equality, not as a suffix")           \
  X(fsdp_first_capture, "6.23", "FSDP prefix recovery takes the first of several distinct captures")                  \
  X(segment_index_r_vpp, "6.24", "pipeline segment index r*VPP + vp instead of vp*P + r")                             \
  X(integrity_skips_uneven, "6.10", "integrity skips keys with irregular grids, like Megatron's validation")          \
  X(gtp_param_entry_unpadded, "4.7.7", "the GTP parameter entry's global rows from D, not the padded D'")             \
  X(gtp_elect_gtp_inclusive, "A", "GTP parameter writer elected over the GTP-inclusive DP group (only g = 0 writes)") \
  X(gtp_expert_elect_dense_dp, "A", "routed-expert GTP weights elected over the dense DP x CP group, not expert DP")  \
  X(gtp_elect_globals_over_caller, "A", "parallel_state's groups win over the caller's stamped gtp_replica_group")    \
  X(load_shape_mismatch_refused, "B", "allow_shape_mismatch ignored: a changed global shape is refused at load")      \
  X(load_shape_mismatch_stale_rows, "B",                                                                              \
    "allow_shape_mismatch without the zero-fill: unstored rows keep stale values")                                    \
  X(dcp_plan_no_fill_check, "D", "DCP's save-plan validation without the volume (fill) check")                        \
  X(dcp_plan_no_overlap_check, "D", "DCP's save-plan validation without the overlap sweep")                           \
  X(mamba_in_proj_shard_split, "E", "Mamba's in_proj follows the GDP shard split instead of gathering")               \
  X(gtp_fresh_in_proj_lnp_copy, "H",                                                                                  \
    "a fresh mixer's in_proj factory becomes an LNP of a materialized copy, not of its data")                         \
  X(load_unexpected_key_ignored, "C", "the default strictness silently skips a requested key the checkpoint lacks")   \
  X(retarget_so_single_expert_prepended, "G",                                                                         \
    "E = 1 expert objects keep their expert axis ((L, 1)), unlike Megatron's placeholder rule")                       \
  X(gtp_gather_merge_unpadded_slice, "F",                                                                             \
    "the gather design's load slices rank g's rows at g*ceil(D/G), ignoring the padded shard size")
