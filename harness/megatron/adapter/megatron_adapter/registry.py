"""The adapter's ops: one table from op name to handler (docs/adapter-protocol.md, "Adding an op").

A handler is handler(ctx, req) -> result dict (ops/context.py's OpContext, the request object).
`needs` lists the attribute paths on the Megatron namespace (megatron_import.py) the op cannot run
without: hello's "supports" and "unsupported" are computed from it, and a request for an op whose
needs are missing is answered `unsupported` before its handler runs. needs=None: the op is not
listed in hello (its handler answers `unsupported` itself when Megatron lacks what it calls).
hello, mutants and mutate are the server's own (server.py).
"""

import collections

from megatron_adapter.ops import findings, gtp, integrity, layer_maps, load_state, model_dump, split_factories

Op = collections.namedtuple("Op", "handler needs")

_GTP_WORLD = ["gdp.GatedDeltaProductMixer", "gtp.wrap_module_params_gtp", "gtp.GTP_CONFIG"]

OPS = {
    "pattern_maps": Op(layer_maps.pattern_maps, ["interop.gpt_compatible_layer_maps"]),
    "parse_pattern": Op(layer_maps.parse_pattern, ["alloc.parse_hybrid_pattern"]),
    "layer_counts": Op(layer_maps.layer_counts, ["alloc.get_hybrid_layer_counts"]),
    "total_layer_count": Op(layer_maps.total_layer_count, ["alloc.get_hybrid_total_layer_count"]),
    "segment_count": Op(layer_maps.segment_count, ["alloc.get_hybrid_total_pipeline_segment_count"]),
    "type_maps": Op(layer_maps.type_maps, ["alloc.get_layer_maps_from_layer_type_list"]),
    "select_segment": Op(layer_maps.select_segment, ["alloc.select_pipeline_segment"]),
    "retarget": Op(layer_maps.retarget, ["interop.gpt_compatible_layer_maps",
                                         "interop.retarget_sharded_state_dict_to_gpt_checkpoint"]),
    "fsdp_key": Op(layer_maps.fsdp_key, ["interop.gpt_compatible_layer_maps",
                                         "interop._retarget_explicit_key_to_gpt_checkpoint"]),
    "fsdp_retarget": Op(layer_maps.fsdp_retarget, ["interop.gpt_compatible_layer_maps",
                                                   "interop.retarget_fsdp_state_dict_to_gpt_checkpoint"]),
    "split_chunks": Op(split_factories.split_chunks, ["ssm_utils._split_tensor_factory"]),
    "gdp_layout": Op(split_factories.gdp_layout, ["gdp._get_in_proj_checkpoint_split_layout"]),
    "gtp_padding": Op(split_factories.gtp_padding, ["gtp.gtp_remat_shard_dim0", "gtp.GTP_CONFIG"]),
    "gtp_split": Op(split_factories.gtp_split, []),  # probed by name: M.find_gtp_split_factory (server.py)
    # Real GTP worlds (worlds/gloo_worlds.py): the GDP mixer and GTP's own init and writer election.
    # Only what the worlds cannot do without: a checkout from before a GTP fix must still be judged
    # (its bug is a finding), never reported unsupported for lacking the fix's helpers.
    "gtp_pieces": Op(gtp.gtp_pieces, _GTP_WORLD),
    "gtp_merge": Op(gtp.gtp_merge, _GTP_WORLD),
    "gtp_param_entry": Op(gtp.gtp_param_entry, _GTP_WORLD),
    "load_state": Op(load_state.load_state, ["gtp.GTP_CONFIG"]),  # the worlds run on GTP-era Megatron
    "integrity_report": Op(integrity.integrity_report, ["validation._validate_sharding_for_key",
                                                        "validation._compute_shards_access",
                                                        "validation._validate_objects_for_key"]),
    "integrity": Op(integrity.integrity, ["validation.validate_sharding_integrity",
                                          "validation._validate_sharding_for_key",
                                          "validation._validate_objects_for_key"]),
    "gtp_worlds": Op(gtp.gtp_worlds, None),
    "gtp_patches": Op(gtp.gtp_patches, None),
    "gtp_unpatched_save": Op(gtp.gtp_unpatched_save, None),
    "optimizer_resume": Op(gtp.optimizer_resume, None),
    "gtp_all_padding_load": Op(gtp.gtp_all_padding_load, None),
    # The finding checks' ops (harness/gate/gate_invariants.cc, docs/megatron-findings.md).
    "gtp_fresh_retarget": Op(findings.gtp_fresh_retarget, None),
    "load_orderings": Op(findings.load_orderings, None),
    "single_expert_load": Op(findings.single_expert_load, None),
    # Real models (real_models/, docs/adapter-protocol.md "model_dump"): GPTModel / HybridModel on CPU.
    # needs: a Megatron without its transformer MLP builds no model (unsupported, never a harness error).
    "model_dump": Op(model_dump.model_dump, ["mlp"]),
}

# op name -> attribute paths it needs, for the ops hello lists (in the table's order).
REQUIREMENTS = {name: op.needs for name, op in OPS.items() if op.needs is not None}
