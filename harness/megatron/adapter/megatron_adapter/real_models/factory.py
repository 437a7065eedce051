"""Builds a real Megatron model inside a world worker (worlds/gloo_worlds.py) from a model_dump request.

The world is sized by the request (gtp x tp x dp x pp ranks); the task re-initialises
parallel_state for the request's layout with Megatron's own initialize_model_parallel (gloo, the
world's default backend), builds the model chunk of this rank's pipeline stage on CPU, and gives
parallel_state back to the world's own groups afterwards (worlds/worker_context.build_groups).
"""


class UnsupportedConfig(Exception):
    """A configuration the real-model factory cannot build here (answered as unsupported)."""


def _layers(req):
    if req["model"] == "gpt":
        return int(req["layers"])
    main = req["pattern"].split("/")[0]
    return sum(1 for ch in main if ch != "|")


def virtual_stages(req):
    """Virtual pipeline stages per rank: a hybrid pattern with more pipe segments than pp ranks
    (as the reference's hybrid_sharded_state_dict selects them), else None."""
    if req["model"] != "hybrid":
        return None
    segments = req["pattern"].split("/")[0].count("|") + 1
    pp = int(req["pp"])
    return segments // pp if segments > 1 and segments > pp else None


def transformer_config(M, req):
    from megatron.core.transformer.transformer_config import TransformerConfig
    experts = int(req["num_experts"])
    layers = _layers(req)
    kwargs = dict(
        num_layers=layers, hidden_size=int(req["hidden"]), num_attention_heads=int(req["num_attention_heads"]),
        num_query_groups=int(req["num_query_groups"]), kv_channels=int(req["kv_channels"]),
        ffn_hidden_size=int(req["ffn_hidden"]), gated_linear_unit=bool(req["gated_mlp"]),
        add_bias_linear=bool(req["add_bias"]),
        normalization="LayerNorm" if req["norm"] == "layer" else "RMSNorm",
        tensor_model_parallel_size=int(req["tp"]), pipeline_model_parallel_size=int(req["pp"]),
        expert_model_parallel_size=int(req["ep"]), expert_tensor_parallel_size=int(req["etp"]),
        # CPU: parameters allocated on the host, no initialisation (no CUDA RNG tracker needed).
        use_cpu_initialization=True, perform_initialization=False, params_dtype=M.torch.float32,
        pipeline_dtype=M.torch.float32, virtual_pipeline_model_parallel_size=virtual_stages(req),
        mamba_num_heads=int(req["mamba_heads"]), mamba_head_dim=int(req["mamba_head_dim"]),
        mamba_num_groups=int(req["mamba_groups"]), mamba_state_dim=int(req["mamba_state"]))
    if experts > 0:
        kwargs.update(num_moe_experts=experts, moe_ffn_hidden_size=int(req["moe_ffn_hidden"]),
                      moe_router_topk=1, moe_router_pre_softmax=True, moe_grouped_gemm=False)
    return TransformerConfig(**kwargs)


def build_gpt(M, req):
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    config = transformer_config(M, req)
    experts = int(req["num_experts"])
    spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False,
                                    normalization=config.normalization)
    return GPTModel(config, spec, vocab_size=int(req["vocab"]), max_sequence_length=64,
                    pre_process=ps.is_pipeline_first_stage(), post_process=ps.is_pipeline_last_stage(),
                    share_embeddings_and_output_weights=bool(req["tied_embeddings"]),
                    position_embedding_type="rope")


def hybrid_stack_spec(config, experts):
    """A local (no Transformer Engine) HybridStack spec whose keys map onto the TE spec's, as
    get_gpt_layer_local_spec does for GPT: each layer's separate norm is saved under the fused
    linear's `layer_norm_` key (Megatron's hybrid specs are TE-only)."""
    import dataclasses

    from megatron.core.models.gpt.gpt_layer_specs import LNImpl, get_gpt_layer_local_spec
    from megatron.core.models.hybrid.hybrid_block import HybridStack, HybridStackSubmodules
    from megatron.core.ssm.mamba_layer import MambaLayer, MambaLayerSubmodules
    from megatron.core.ssm.mamba_mixer import MambaMixer, MambaMixerSubmodules
    from megatron.core.ssm.mlp_layer import MLPLayer
    from megatron.core.tensor_parallel import ColumnParallelLinear, RowParallelLinear
    from megatron.core.transformer.identity_op import IdentityOp
    from megatron.core.transformer.spec_utils import ModuleSpec
    from megatron.core.transformer.transformer_layer import MoETransformerLayer, TransformerLayer
    from megatron.core.fusions.fused_bias_dropout import get_bias_dropout_add

    dense = get_gpt_layer_local_spec(normalization=config.normalization).submodules
    attention = dataclasses.replace(dense, pre_mlp_layernorm=IdentityOp, mlp=IdentityOp,
                                     sharded_state_dict_keys_map={"input_layernorm.":
                                                                  "self_attention.linear_qkv.layer_norm_"})
    mlp = dataclasses.replace(dense, input_layernorm=IdentityOp, self_attention=IdentityOp,
                              sharded_state_dict_keys_map={"pre_mlp_layernorm.": "mlp.linear_fc1.layer_norm_"})
    submodules = dict(
        mamba_layer=ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
            norm=LNImpl,
            mixer=ModuleSpec(module=MambaMixer, submodules=MambaMixerSubmodules(
                in_proj=ColumnParallelLinear, out_proj=RowParallelLinear)),
            mamba_bda=get_bias_dropout_add,
            sharded_state_dict_keys_map={"norm.": "mixer.in_proj.layer_norm_"})),
        attention_layer=ModuleSpec(module=TransformerLayer, submodules=attention),
        mlp_layer=ModuleSpec(module=MLPLayer, submodules=mlp))
    if experts:
        moe = get_gpt_layer_local_spec(num_experts=experts, moe_grouped_gemm=False,
                                       normalization=config.normalization).submodules
        # TE's MoE layer has a real pre_mlp_layernorm (no fused fc1): no key mapping.
        moe = dataclasses.replace(moe, input_layernorm=IdentityOp, self_attention=IdentityOp,
                                  sharded_state_dict_keys_map={})
        submodules["moe_layer"] = ModuleSpec(module=MoETransformerLayer, submodules=moe)
    return ModuleSpec(module=HybridStack, submodules=HybridStackSubmodules(**submodules))


def build_hybrid(M, req):
    """{chunk name: model}: "model", or "model0", "model1", ... for virtual pipeline stages."""
    from megatron.core import parallel_state as ps
    from megatron.core.models.hybrid.hybrid_model import HybridModel
    config = transformer_config(M, req)
    spec = hybrid_stack_spec(config, int(req["num_experts"]))
    vpp = virtual_stages(req)
    chunks = {}
    for vp in range(vpp or 1):
        stage = vp if vpp else None
        chunks[f"model{vp}" if vpp else "model"] = HybridModel(
            config, spec, vocab_size=int(req["vocab"]), max_sequence_length=64,
            hybrid_layer_pattern=req["pattern"],
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=not vpp, vp_stage=stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=not vpp, vp_stage=stage),
            share_embeddings_and_output_weights=bool(req["tied_embeddings"]),
            position_embedding_type="none", vp_stage=stage)
    return chunks


def build(M, req):
    if int(req["gtp"]) != 1:
        raise UnsupportedConfig("the real-model factory does not build GTP layouts yet (gtp must be 1)")
    """{chunk name: model} of this rank (one chunk "model" unless virtual pipeline stages)."""
    if req["model"] == "gpt":
        return {"model": build_gpt(M, req)}
    return build_hybrid(M, req)


def init_parallel_state(req):
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(tensor_model_parallel_size=int(req["tp"]),
                                 pipeline_model_parallel_size=int(req["pp"]),
                                 virtual_pipeline_model_parallel_size=virtual_stages(req),
                                 expert_model_parallel_size=int(req["ep"]),
                                 expert_tensor_parallel_size=int(req["etp"]),
                                 create_gloo_process_groups=False)
