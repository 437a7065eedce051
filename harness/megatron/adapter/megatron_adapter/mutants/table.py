"""The one table of Megatron mutants (spec section 6): each row makes Megatron's real code behave the way a
plausible bad change would, so the harness can show that its checks catch it. Rows only; the patches' makers live
by area beside this file (layer_maps, retarget, sharding, gtp, load_order, models, training, candidate).

A row names the mutant (the same name as the C++ registry, mutants/mutant_catalogue.h, where it is the same bug),
its spec bug class, what it does, and its patches: (target, make) pairs applied in order. `target` is
"module:attr[.attr...]" of an imported Megatron module; `make(original, M)` (or `make(original, M, shared)` for a
row with `shared`) gets the attribute's current value and the adapter's namespace of Megatron modules
(megatron_import.load_megatron) and returns what is installed in its place (mutants/install.py). No Megatron code
is copied.
"""

import collections

from megatron_adapter.mutants import candidate, gtp, layer_maps, load_order, models, retarget, sharding, training

Patch = collections.namedtuple("Patch", "target make")
# `requires`: targets that must exist for the mutant to mean anything. A mutant of the GTP path patches a function
# Megatron has without GTP too, but only GTP reaches the changed lines there.
# `tier`: "real" for a mutant of model or training code that only the real tier reaches (Megatron's own models,
# their round trips): the campaign runs the gate's real round trips for it (they cost minutes).
# `phase`: the round-trip world it is planted in (roundtrip_world.py --phase): "load" (the default: the loading
# run's Megatron), "save" for a bug of what a save writes, or "both" for a format change that writes and reads
# alike (self-consistent: only the stored bytes, or a cross-version round trip, can tell).
# `scope`: "adapter" (served by the adapter: its mutants op, --mutant, and the round-trip worlds) or "roundtrip"
# (the round trip's own, planted only in its worlds: roundtrip --mutant).
# `shared`: for patches that share a state, what makes it, afresh each time the mutant is planted.
Mutant = collections.namedtuple("Mutant", "name bug_class description patches requires tier phase scope shared",
                                defaults=((), None, "load", "adapter", None))

GTP_API = "megatron.core.tensor_parallel.gtp_api:gtp_replica_rank"
GTP_IMPL = "megatron.core.tensor_parallel.generalized_tensor_parallelism"
INTEROP = "megatron.core.dist_checkpointing.gpt_checkpoint_interop"
ALLOC = "megatron.core.models.hybrid.hybrid_layer_allocation"
SSM_UTILS = "megatron.core.ssm.utils"
VALIDATION = "megatron.core.dist_checkpointing.validation"
SERIALIZATION = "megatron.core.dist_checkpointing.serialization"
STRATEGIES_TORCH = "megatron.core.dist_checkpointing.strategies.torch"
GDP = "megatron.core.ssm.gated_delta_product"
HYBRID_BLOCK = "megatron.core.models.hybrid.hybrid_block"
LANGUAGE_MODULE = "megatron.core.models.common.language_module.language_module"
EXPERTS = "megatron.core.transformer.moe.experts"
MLP = "megatron.core.transformer.mlp"

MUTANTS_TABLE = (
    # layer maps
    Mutant("maps_accept_mixed", 12, "gpt_compatible_layer_maps accepts patterns mixing '-' and 'E' "
           "(treats every 'E' as '-')",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.mixed_as_dense)),)),
    Mutant("maps_gpt_index_one_based", None, "layer maps number GPT layers from 1 (layer_number instead of "
           "index): every hybrid->GPT index is off by one",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.one_based)),)),
    Mutant("maps_pipes_not_stripped", 13, "pipe separators are not stripped before numbering: each '|' "
           "takes a layer index (as if it were a fresh layer), shifting later indices",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.pipes_as_layers)),)),
    Mutant("maps_reject_trailing_slash", 14, "a trailing '/' (MTP depth 0) is rejected as an MTP suffix",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.reject_slash)),)),
    Mutant("fresh_init_empty", 20, "fresh_init is left empty, so 'M' layers are not kept local (their "
           "entries now hit the unknown-layer error instead of becoming LocalNonpersistentObject)",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.no_fresh)),)),
    # retarget
    Mutant("retarget_final_layer_norm", 15, "final norm is mapped to 'decoder.final_layer_norm.' instead of "
           "'decoder.final_layernorm.'",
           (Patch(INTEROP + ":_GPT_FINAL_NORM_KEY_MAP",
                  retarget.replace_with({"decoder.final_norm.": "decoder.final_layer_norm."})),)),
    Mutant("retarget_anchored_layer_regex", 16, "the decoder-layer regex is anchored at the start of the key, "
           "so optimizer.state.<s>.decoder.layers.<n>. entries are not retargeted",
           (Patch(INTEROP + ":_DECODER_LAYER_KEY_RE", retarget.anchored),)),
    Mutant("retarget_drop_optimizer_prefix", 16, "retargeted layer keys lose everything before "
           "'decoder.layers.' (optimizer entries renamed to bare model keys)",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", retarget.prepend_wrapper(retarget.drop_prefix)),)),
    Mutant("retarget_so_placeholder_prepended", 17, "the ShardedObject (1,)/(0,) placeholder gets the layer "
           "axis prepended, giving (L, 1)/(gi, 0) instead of (L,)/(gi,)",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", retarget.prepend_wrapper(retarget.so_placeholder_prepended)),)),
    Mutant("retarget_prepend_axis_not_incremented", 18, "ShardedTensor gains the layer axis in its shapes but "
           "prepend_axis_num is not incremented",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", retarget.prepend_wrapper(retarget.axis_not_counted)),)),
    Mutant("retarget_factory_wrapped_twice", 19, "a ShardedTensorFactory's build is wrapped twice, so built "
           "entries get two layer axes",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", retarget.prepend_wrapper(retarget.factory_twice)),)),
    Mutant("retarget_omitted_by_equality", 22, "output_layer._extra_state is recognised only when the key is "
           "exactly that string (prefixed keys are no longer kept local)",
           (Patch(INTEROP + ":retarget_sharded_state_dict_to_gpt_checkpoint", retarget.omitted_exact),
            Patch(INTEROP + ":_GPT_OMITTED_LOCAL_KEYS", retarget.replace_with(())))),
    Mutant("omitted_suffix_too_broad", 22, "the omitted-key suffix also matches output_layer.weight, so the "
           "output layer is never loaded",
           (Patch(INTEROP + ":_GPT_OMITTED_LOCAL_KEYS", retarget.omitted_broad),)),
    Mutant("retarget_unknown_layer_skipped", 21, "entries of hybrid layers missing from the maps are left "
           "unchanged instead of raising ValueError (also in the FSDP key path)",
           (Patch(INTEROP + ":retarget_sharded_state_dict_to_gpt_checkpoint", retarget.skip_unknown_entries),
            Patch(INTEROP + ":_retarget_explicit_key_to_gpt_checkpoint", retarget.skip_unknown_key))),
    # FSDP
    Mutant("fsdp_first_capture", 23, "FSDP prefix recovery takes the first matching checkpoint key when "
           "several distinct module.-prefixed names match, instead of leaving the key unchanged",
           (Patch(INTEROP + ":_retarget_explicit_key_to_gpt_checkpoint", retarget.fsdp_first),)),
    Mutant("fsdp_second_pass", None, "the FSDP tree is retargeted twice (the explicit-key path is not "
           "idempotent: GPT indices are re-read as hybrid indices; spec 2.9)",
           (Patch(INTEROP + ":retarget_fsdp_state_dict_to_gpt_checkpoint", retarget.fsdp_twice),)),
    # pipeline segments
    Mutant("segment_index_r_vpp", 24, "pipe-path segment index computed as pp_rank*VPP + vp_stage "
           "instead of vp_stage*PP + pp_rank",
           (Patch(ALLOC + ":select_pipeline_segment", sharding.segment_rank_major),)),
    # split factory
    Mutant("split_drop_tp_offset", 1, "the split factory's chunks lose the TP rank offset (t*s_j): every "
           "TP rank writes its chunk at offset 0",
           (Patch(SSM_UTILS + ":_split_tensor_factory", sharding.split_no_tp_offset),)),
    Mutant("split_names_traded", None, "the split factory trades the names of two same-sized chunks (the Mamba "
           "in_proj's B and C) in save and load alike: self-consistent, so the model loads right while every stored "
           "B row sits under C's key and back (only the stored bytes or a cross-version round trip can tell)",
           (Patch(SSM_UTILS + ":_split_tensor_factory", sharding.split_names_traded),), phase="both",
           scope="roundtrip"),
    Mutant("gdp_split_drop_tp_offset", 1, "the GatedDeltaProduct mixer's own split factory (a copy of ssm.utils') "
           "loses the TP rank offset: every TP rank writes its [z|V|K|Q|b|a] chunks at offset 0",
           (Patch(GDP + ":_split_tensor_factory", sharding.split_no_tp_offset),)),
    # validation
    Mutant("integrity_ignores_duplicates", 25, "the sharding-integrity access counter saturates at 1, so "
           "two main replicas writing the same chunk go unnoticed (holes are still reported)",
           (Patch(VALIDATION + ":_compute_shards_access", sharding.access_saturated),)),
    # GTP checkpoint path
    Mutant("gtp_no_gather", 23, "GDP's sharded_state_dict does not see its in_proj as a GTP shard and splits "
           "the (R, C) shard without gathering it",
           (Patch(GDP + ":is_gtp_param", gtp.no_gather),)),
    Mutant("gtp_writer_wrong_group", 23, "the GTP shard's writer is elected over the GTP remat group (whose "
           "peers hold different shards) instead of the GTP-excluded DP group",
           (Patch(GTP_API, gtp.wrong_group),)),
    Mutant("gtp_saves_pad_rows", 23, "the gathered in_proj keeps the alignment pad rows when it is "
           "re-described for saving",
           (Patch(GDP + ":make_tp_sharded_tensor_for_checkpoint", gtp.pad_rows_saved),)),
    Mutant("gtp_no_zero_fill", 23, "the GDP in_proj merge pads the loaded rows with uninitialised memory "
           "instead of zeros",
           (Patch(GDP + ":torch.nn.functional.pad", gtp.no_zero_fill),)),
    Mutant("gtp_offset_no_tp_term", 23, "the GTP parameter's composite axis-0 offset drops its TP term "
           "(t*G + g -> g)",
           (Patch("megatron.core.utils:make_tp_sharded_tensor_for_checkpoint", gtp.offset_no_tp_term),),
           requires=(GTP_API,)),
    # load order
    Mutant("merge_factories_first", 11, "serialization.load applies the factory merges to the loaded shards "
           "before merging them with the common and nonpersistent parts (to_state_dict's order): a factory "
           "whose build held a LocalNonpersistentObject (an all-padding GTP rank) no longer finds it",
           (Patch(SERIALIZATION + ":load_preprocess", load_order.hold_factories),
            Patch(STRATEGIES_TORCH + ":TorchDistLoadShardedStrategy.load", load_order.note_loaded),
            Patch(SERIALIZATION + ":merge", load_order.merge_factories_before),
            Patch(SERIALIZATION + ":apply_factory_merges", load_order.skip_merged_factories)),
           requires=(GTP_API,),  # only an all-padding GTP rank's factory holds such an object
           shared=load_order.shared_state),
    # real model code (real_models/; only the gate's model_dump group builds these modules)
    Mutant("hybrid_layer_number_from_zero", None, "HybridStack numbers its layers from 0 (layer_number = i + "
           "pp_layer_offset): every hybrid layer's checkpoint key names the layer before it",
           (Patch(HYBRID_BLOCK + ":HybridStack.__init__", models.layer_numbers_from_zero),)),
    Mutant("output_layer_shape_strict", None, "an untied output layer's weight loses allow_shape_mismatch "
           "(a padded vocabulary no longer loads across a vocabulary-padding change)",
           (Patch(LANGUAGE_MODULE + ":LanguageModule.sharded_state_dict", models.output_layer_shape_strict),)),
    Mutant("experts_key_prefix_once", None, "SequentialMLP keys its experts under 'mlp.experts.' instead of "
           "'mlp.experts.experts.' (the prefix TEGroupedMLP copies), so checkpoints of the two differ",
           (Patch(EXPERTS + ":SequentialMLP.sharded_state_dict", models.experts_prefix_once),)),
    Mutant("experts_replica_dense_dp", None, "expert entries replicate over the dense DP rank instead of the "
           "expert-DP rank (DP modulo EP): the experts of an EP rank whose dense DP rank is not 0 have no main "
           "replica, so no rank saves them",
           (Patch(EXPERTS + ":SequentialMLP.sharded_state_dict", models.experts_dense_dp_replica),)),
    Mutant("distributed_optimizer_gather_keeps_bucket_padding", None, "the DistributedOptimizer's gathered "
           "state buffers keep each bucket's end padding while the model-space format (fully_reshardable) cuts "
           "them as if it were stripped, the disagreement Megatron's fix 32a03b77c5 removed: the state of every "
           "parameter behind a padded bucket is saved from another parameter's place",
           (Patch("megatron.core.optimizer.distrib_optimizer:DistributedOptimizer.get_parameter_state_dp_zero",
                  models.gather_keeps_bucket_padding),),
           tier="real", phase="save"),
    Mutant("distributed_optimizer_load_moments_swapped", None, "the DistributedOptimizer's model-space load "
           "(load_parameter_state_from_fully_reshardable, inside its load_state_dict) hands each parameter's exp_avg "
           "to the optimizer as its exp_avg_sq and back: what the checkpoint holds and what Megatron's load returns "
           "are right, the optimizer's own moments after load_state_dict are swapped",
           (Patch("megatron.core.optimizer.distrib_optimizer:DistributedOptimizer."
                  "load_parameter_state_from_fully_reshardable", models.load_moments_swapped),),
           tier="real"),
    # the candidate shard-split design (not Megatron's code; mutants of the harness's candidate, run
    # with --candidate shard-split: each a mistake the pending PR could make)
    Mutant("candidate_piece_offset_no_tp_term", 23, "candidate shard-split design: a piece's offset in its "
           "chunk lacks the TP term (t*s_j): at TP > 1 both TP ranks write the same rows (the review's gap)",
           (Patch(candidate.target("_piece_offset"), candidate.offset_no_tp_term),)),
    Mutant("candidate_saves_pad_rows", 23, "candidate shard-split design: the last section's piece runs on "
           "to the end of the shard, saving the alignment pad rows",
           (Patch(candidate.target("_piece_rows"), candidate.pad_rows_saved),)),
    Mutant("candidate_no_zero_fill", 23, "candidate shard-split design: the merge appends uninitialised "
           "rows for the shard's padding instead of zeros",
           (Patch(candidate.target("_zero_rows"), candidate.no_zero_fill),)),
    Mutant("candidate_no_placeholder", 23, "candidate shard-split design: an all-padding rank builds an "
           "empty list instead of a zero-element LocalNonpersistentObject",
           (Patch(candidate.target("_placeholder"), candidate.no_placeholder),)),
    Mutant("candidate_piece_copies", 23, "candidate shard-split design: a piece copies its rows of the "
           "shard instead of viewing them (the memory the design saves is spent again)",
           (Patch(candidate.target("_piece_data"), candidate.piece_copies),)),
    Mutant("candidate_global_shape_from_padded", 23, "candidate shard-split design: the last chunk's global "
           "shape counts the alignment pad rows (T*(s_j + pad) instead of T*s_j)",
           (Patch(candidate.target("_chunk_global_rows"), candidate.global_from_padded),)),
    # the training load path (docs/roundtrip.md "Real models", scenario real_gpt_hybrid_training)
    Mutant("training_skips_gpt_to_hybrid_setup", None, "load_checkpoint skips its GPT -> hybrid setup "
           "(_maybe_setup_gpt_to_hybrid_load answers (None, False)): a GPT checkpoint is read with the hybrid "
           "run's own keys and args, as if that run had saved it",
           (Patch("megatron.training.checkpointing:_maybe_setup_gpt_to_hybrid_load", training.no_gpt_to_hybrid_setup),),
           tier="real"),
    Mutant("training_gpt_to_hybrid_skips_optimizer", None, "load_checkpoint's GPT -> hybrid setup answers "
           "load_optim False although the GPT run saved optimizer state: the model is retargeted, the optimizer's "
           "sharded state dict is not, so its state is asked for under the hybrid run's own keys",
           (Patch("megatron.training.checkpointing:_maybe_setup_gpt_to_hybrid_load",
                  training.gpt_to_hybrid_setup_without_optimizer),),
           tier="real"),
    # GTP replica ids (real model code; killed by the gate's model_dump group at GTP > 1)
    Mutant("gtp_replica_id_gtp_inclusive_dp", None, "GTP-sharded weights take their replica id from the "
           "GTP-inclusive DP rank (g + G*d) instead of the gtp_remat-excluded DP rank (d): every GTP rank but "
           "0 marks its distinct shard a secondary replica, so no rank saves it",
           (Patch(GTP_API, gtp.gtp_inclusive_dp_replica),
            Patch(GTP_IMPL + ":gtp_replica_rank", gtp.gtp_inclusive_dp_replica))),
    Mutant("gtp_replica_rank_context_parallel", None, "GTP-sharded weights take their replica id from the "
           "context-parallel rank instead of the DP x CP rank (gtp_remat excluded): at CP 1 every DP replica of a "
           "GTP shard marks itself main, so each shard has DP main replicas (a slip only DP > 1 shows)",
           (Patch(GTP_API, gtp.context_parallel_replica),
            Patch(GTP_IMPL + ":gtp_replica_rank", gtp.context_parallel_replica)),
           phase="save"),
    Mutant("dp_cp_group_without_cp", None, "parallel_state's data-parallel group asked with context parallelism "
           "answers the DP group without it: every replica id over dp_cp ignores the CP ranks, so at CP > 1 each "
           "CP rank marks its replicated parameters main (a slip only CP > 1 shows)",
           (Patch("megatron.core.parallel_state:get_data_parallel_group", sharding.dp_cp_group_without_cp),),
           phase="save"),
    # the round trip's own (roundtrip --mutant; docs/roundtrip.md): not served by the adapter
    Mutant("reverse_gpt_layers", None, "gpt_compatible_layer_maps numbers GPT layers in reverse (hybrid layer "
           "mapped to GPT layer L-1-i): keys and shapes still match, data does not",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", layer_maps.maps_wrapper(layer_maps.reversed_gpt_layers)),),
           scope="roundtrip"),
    Mutant("swiglu_halves_swapped", None, "the hybrid model's SwiGLU fc1 factory swaps the W and V chunk "
           "offsets (needs --gated): W rows are read from V's place",
           (Patch(MLP + ":apply_swiglu_sharded_factory", models.swiglu_halves_swapped),), scope="roundtrip"),
)
