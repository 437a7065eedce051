"""Builds a real Megatron model inside a world worker (worlds/gloo_worlds.py) from a model_dump request.

The world is sized by the request (gtp x tp x dp x pp ranks); the task re-initialises
parallel_state for the request's layout with Megatron's own initialize_model_parallel (gloo, the
world's default backend), builds the model chunk of this rank's pipeline stage on CPU, and gives
parallel_state back to the world's own groups afterwards (worlds/worker_context.build_groups).
"""


class UnsupportedConfig(Exception):
    """A configuration the real-model factory cannot build here (answered as unsupported)."""


class MegatronRefused(Exception):
    """Megatron's own code raised on a model it built for a configuration it accepts (a megatron_error)."""


# Request fields added after the first clients, with the value a request without them means.
DEFAULTS = {"mixer": "mamba", "gdp_householder": 3, "cp": 1}


def field(req, name):
    return req.get(name, DEFAULTS[name])


def patch_families(req):
    """The patch families (patches/table.py) building the request's model needs: the model's, and its GDP
    mixer's and its optimizer's where it has them (a checkout without GDP still builds everything else)."""
    return ("model",) + (("model_gdp",) if field(req, "mixer") == "gdp" else ()) \
        + (("model_optimizer",) if req.get("optimizer") else ())


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
        context_parallel_size=int(field(req, "cp")), gtp_weight_remat_size=int(req["gtp"]),
        expert_model_parallel_size=int(req["ep"]), expert_tensor_parallel_size=int(req["etp"]),
        # CPU: parameters allocated on the host, no initialisation (no CUDA RNG tracker needed).
        use_cpu_initialization=True, perform_initialization=False, params_dtype=M.torch.float32,
        pipeline_dtype=M.torch.float32, virtual_pipeline_model_parallel_size=virtual_stages(req),
        mamba_num_heads=int(req["mamba_heads"]), mamba_head_dim=int(req["mamba_head_dim"]),
        mamba_num_groups=int(req["mamba_groups"]), mamba_state_dim=int(req["mamba_state"]))
    if field(req, "mixer") == "gdp":  # a Megatron without GDP (megatron-core 0.19.2) has no such field
        kwargs.update(gdp_num_householder=int(field(req, "gdp_householder")))
    if experts > 0:
        kwargs.update(num_moe_experts=experts, moe_ffn_hidden_size=int(req["moe_ffn_hidden"]),
                      moe_router_topk=1, moe_router_pre_softmax=True, moe_grouped_gemm=False)
    return TransformerConfig(**kwargs)


def build_gpt(M, req):
    from megatron.core import parallel_state as ps
    from megatron.core.models.gpt.gpt_model import GPTModel
    config = transformer_config(M, req)
    spec = gpt_layer_spec(config, int(req["num_experts"]))
    return GPTModel(config, spec, vocab_size=int(req["vocab"]), max_sequence_length=64,
                    pre_process=ps.is_pipeline_first_stage(), post_process=ps.is_pipeline_last_stage(),
                    share_embeddings_and_output_weights=bool(req["tied_embeddings"]),
                    position_embedding_type="rope")


def gpt_layer_spec(config, experts):
    """Megatron's local (no Transformer Engine) GPT layer spec, keyed as TE's spec keys the layer
    (docs/megatron-patches.md, "Stand-in: GPT MoE layers keyed as TE's"). Dense layers need nothing:
    the local spec maps its separate norms onto TE's fused linears itself. An MoE layer is where the local spec and TE's
    part: TE's MoE layer has a real `pre_mlp_layernorm` (an MoE layer has no fused fc1 to hold it) and
    no key map for it, while the local spec still maps it to `mlp.linear_fc1.layer_norm_`, a key no TE
    model and no hybrid MoE layer has. So for experts the stand-in keeps the local spec's modules and
    maps the input norm only."""
    import dataclasses

    from megatron.core.models.gpt.gpt_layer_specs import get_gpt_layer_local_spec
    spec = get_gpt_layer_local_spec(num_experts=experts or None, moe_grouped_gemm=False,
                                    normalization=config.normalization)
    if not experts:
        return spec
    keys = {k: v for k, v in spec.submodules.sharded_state_dict_keys_map.items() if k != "pre_mlp_layernorm."}
    return dataclasses.replace(spec, submodules=dataclasses.replace(spec.submodules,
                                                                    sharded_state_dict_keys_map=keys))


def hybrid_stack_spec(config, experts, mixer):
    """A local (no Transformer Engine) HybridStack spec whose keys map onto the TE spec's, as
    get_gpt_layer_local_spec does for GPT: each layer's separate norm is saved under the fused
    linear's `layer_norm_` key (Megatron's hybrid specs are TE-only). `mixer` is the 'M' layer's:
    "mamba" (hybrid_stack_spec) or "gdp" (gated_delta_product_stack_spec: a MambaLayer whose mixer is a
    GatedDeltaProductMixer and whose norm is the in_proj's fused TE norm, so the same key)."""
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

    if mixer == "gdp":
        from megatron.core.ssm.gated_delta_product import (GatedDeltaProductMixer as Mixer,
                                                           GatedDeltaProductMixerSubmodules as MixerSubmodules)
    else:
        Mixer, MixerSubmodules = MambaMixer, MambaMixerSubmodules
    dense = get_gpt_layer_local_spec(normalization=config.normalization).submodules
    attention = dataclasses.replace(dense, pre_mlp_layernorm=IdentityOp, mlp=IdentityOp,
                                     sharded_state_dict_keys_map={"input_layernorm.":
                                                                  "self_attention.linear_qkv.layer_norm_"})
    mlp = dataclasses.replace(dense, input_layernorm=IdentityOp, self_attention=IdentityOp,
                              sharded_state_dict_keys_map={"pre_mlp_layernorm.": "mlp.linear_fc1.layer_norm_"})
    submodules = dict(
        mamba_layer=ModuleSpec(module=MambaLayer, submodules=MambaLayerSubmodules(
            norm=LNImpl,
            mixer=ModuleSpec(module=Mixer, submodules=MixerSubmodules(
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
    spec = hybrid_stack_spec(config, int(req["num_experts"]), field(req, "mixer"))
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


def require_buildable(req):
    """UnsupportedConfig when this factory cannot build the request on this Megatron (checked before the
    request's shims are put in force: a GDP shim cannot even be checked without the GDP module)."""
    import importlib.util
    if field(req, "mixer") == "gdp" and importlib.util.find_spec("megatron.core.ssm.gated_delta_product") is None:
        raise UnsupportedConfig("GDP mixers need megatron.core.ssm.gated_delta_product, not in this Megatron")
    attention = req["model"] == "gpt" or "*" in req["pattern"].split("/")[0]
    if int(field(req, "cp")) > 1 and attention:
        # Megatron's local DotProductAttention asserts "Context parallelism is only supported by
        # TEDotProductAttention!", and Transformer Engine's attention needs CUDA.
        raise UnsupportedConfig("context parallelism (CP > 1) with attention layers: the factory's local "
                                "(no Transformer Engine) DotProductAttention refuses CP > 1 (\"Context parallelism "
                                "is only supported by TEDotProductAttention!\") and TEDotProductAttention needs CUDA")
    other = sorted(set(req["pattern"].split("/")[0]) - set("M*-E|")) if req["model"] == "hybrid" else []
    if other:
        raise UnsupportedConfig(f"the real-model factory's local hybrid spec has no layer for {', '.join(other)} "
                                "(it builds M, *, - and E)")


def build(M, req):
    """{chunk name: model} of this rank (one chunk "model" unless virtual pipeline stages)."""
    require_buildable(req)
    return {"model": build_gpt(M, req)} if req["model"] == "gpt" else build_hybrid(M, req)


def init_parallel_state(req):
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import update_gtp_config
    update_gtp_config(pad_for_alignment=int(req["pad_alignment"]))
    ps.initialize_model_parallel(tensor_model_parallel_size=int(req["tp"]), gtp_remat_size=int(req["gtp"]),
                                 pipeline_model_parallel_size=int(req["pp"]),
                                 context_parallel_size=int(field(req, "cp")),
                                 virtual_pipeline_model_parallel_size=virtual_stages(req),
                                 expert_model_parallel_size=int(req["ep"]),
                                 expert_tensor_parallel_size=int(req["etp"]),
                                 create_gloo_process_groups=False)


# The optimizers `model dump --optimizer` builds (request field optimizer_kind): Megatron's
# DistributedOptimizer, Float16OptimizerWithFloat16Params over Adam (the path GTP uses), or FP32Optimizer
# over Adam (the real round trips': it keeps the float64 parameters the oracle needs).
OPTIMIZER_KINDS = ("distributed", "float16", "fp32")

# The distributed optimizer's checkpoint format: the one a GPT->hybrid load requires (training's
# load_checkpoint refuses to retarget optimizer state from the bucket-space formats), saved by
# training with --dist-ckpt-optim-fully-reshardable; its gather is the default (not mem-efficient) one.
OPTIMIZER_METADATA = {"distrib_optim_sharding_type": "fully_reshardable",
                      "distrib_optim_fully_reshardable_mem_efficient": False,
                      "singleton_local_shards": False, "chained_optim_avoid_prefix": True}
# Training's metadata without a distributed optimizer (checkpointing._build_sharded_state_dict_metadata).
FLOAT16_METADATA = {"singleton_local_shards": False, "chained_optim_avoid_prefix": True}


def optimizer_parts(optimizer):
    """The optimizers of a chain (ChainedOptimizer: dense and expert), or the one optimizer."""
    return getattr(optimizer, "chained_optimizers", [optimizer])


def optimizer_sharded_state_dict(M, chunks, model_tree, kind="distributed"):
    """The sharded state dict of the optimizer of `kind` (OPTIMIZER_KINDS) over `chunks`."""
    if kind == "float16":
        return _float16_sharded_state_dict(M, chunks)
    if kind == "fp32":
        optimizer = fp32_optimizer(M, chunks)
        for part in optimizer_parts(optimizer):
            part.init_state_fn(part.optimizer, part.config)  # Adam's states, as its load creates them first
        try:
            out = fp32_sharded_state_dict(optimizer, model_tree)
        except ValueError as exc:
            _raise_finding_o(chunks, exc, "does not match any model sharded param", "FP32Optimizer.sharded_state_dict",
                             "ValueError 'Param id <the in_proj's GTP shard> does not match any model sharded param'")
            raise
        _empty_param_id_lists(M, out)
        return out
    return _distributed_sharded_state_dict(M, chunks, model_tree)


def fp32_optimizer(M, chunks):
    """Megatron's FP32Optimizer over Adam, built as training builds it without --bf16/--fp16 and without
    --use-distributed-optimizer: each chunk wrapped in DistributedDataParallel, get_megatron_optimizer (a
    ChainedOptimizer when expert parameters have their own); no states yet. The parameters keep their
    dtype: they are the main copies."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    first = next(iter(chunks.values()))
    ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=False)
    wrapped = [DistributedDataParallel(model.config, ddp_config, model, disable_bucketing=i > 0)
               for i, model in enumerate(chunks.values())]
    config = OptimizerConfig(optimizer="adam", lr=1e-4, params_dtype=first.config.params_dtype,
                             use_distributed_optimizer=False)
    return get_megatron_optimizer(config, wrapped, use_gloo_process_groups=False)


def fp32_sharded_state_dict(optimizer, model_tree, is_loading=False):
    """An FP32Optimizer's sharded state dict over the chunks' tree, with training's metadata (no
    distributed optimizer). Loading re-creates Adam's states first (init_state_fn), as Megatron's does."""
    from megatron.core import parallel_state as ps
    metadata = dict(FLOAT16_METADATA, dp_cp_group=ps.get_data_parallel_group(with_context_parallel=True))
    return optimizer.sharded_state_dict(model_tree, is_loading=is_loading, metadata=metadata)


def distributed_optimizer(M, chunks, bucket_size=None):
    """Megatron's DistributedOptimizer over `chunks`, built as training builds it: each chunk wrapped in
    DistributedDataParallel (use_distributed_optimizer, bucketing off after the first chunk),
    get_megatron_optimizer with Adam (a ChainedOptimizer when expert parameters have their own), its states
    created by one step on zero gradients (DistributedOptimizer._init_optimizer_states_with_dummy_values, what
    a load does before it reads a checkpoint). With `bucket_size` the first chunk's gradient buffer is cut into
    buckets of about that many elements (training's --ddp-bucket-size with --overlap-grad-reduce, without which
    DDP keeps one bucket); by default one bucket."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    ddp_config = (DistributedDataParallelConfig(use_distributed_optimizer=True) if bucket_size is None else
                  DistributedDataParallelConfig(use_distributed_optimizer=True, overlap_grad_reduce=True,
                                                bucket_size=bucket_size))
    wrapped = [DistributedDataParallel(model.config, ddp_config, model, disable_bucketing=i > 0)
               for i, model in enumerate(chunks.values())]
    config = OptimizerConfig(optimizer="adam", lr=1e-4, use_distributed_optimizer=True,
                             params_dtype=next(iter(chunks.values())).config.params_dtype)
    optimizer = get_megatron_optimizer(config, wrapped, use_gloo_process_groups=False)
    for part in optimizer_parts(optimizer):
        part._init_optimizer_states_with_dummy_values()
    return optimizer


def distributed_sharded_state_dict(optimizer, model_tree, is_loading=False):
    """A DistributedOptimizer's sharded state dict over the chunks' tree in the format of OPTIMIZER_METADATA."""
    from megatron.core import parallel_state as ps
    metadata = dict(OPTIMIZER_METADATA, dp_cp_group=ps.get_data_parallel_group(with_context_parallel=True))
    return optimizer.sharded_state_dict(model_tree, is_loading=is_loading, metadata=metadata)


def _distributed_sharded_state_dict(M, chunks, model_tree):
    """The sharded state dict of Megatron's DistributedOptimizer over `chunks` (distributed_optimizer, one
    bucket), in the format of OPTIMIZER_METADATA."""
    optimizer = distributed_optimizer(M, chunks)
    try:
        return distributed_sharded_state_dict(optimizer, model_tree)
    except ValueError as exc:
        _raise_finding_o(chunks, exc, "not in model_sharded_state_dict",
                         "DistributedOptimizer.sharded_state_dict (fully_reshardable)",
                         "ValueError 'Model param <the in_proj's GTP shard> not in model_sharded_state_dict'")
        raise


def _raise_finding_o(chunks, exc, marker, call, message):
    """Finding O (docs/megatron-findings.md): under GTP the mixers' in_proj entry is the gathered tensor,
    which the DistributedOptimizer and FP32Optimizer (matching model entries to parameters by identity)
    cannot find; only the Float16 optimizer backfills it. Megatron's own objects raise it on a
    configuration it accepts: Megatron's error (MegatronRefused), not the harness's."""
    gtp = getattr(next(iter(chunks.values())).config, "gtp_weight_remat_size", 1)  # no GTP in 0.19.2
    if gtp > 1 and marker in str(exc):
        raise MegatronRefused(
            f"Megatron's {call} raises at GTP {gtp}: {message} (finding O: the mixer's in_proj entry is the "
            "gathered tensor, which only the Float16 optimizer backfills)") from exc


def _float16_sharded_state_dict(M, chunks):
    """The sharded state dict of Float16OptimizerWithFloat16Params over Adam, built as training builds it
    under --bf16 without --use-distributed-optimizer: each chunk wrapped in Float16Module (its bf16 cast) and
    that in DistributedDataParallel (get_model's order), get_megatron_optimizer (a ChainedOptimizer when
    expert parameters have their own), GTP parameters named as classify_gtp_remat_chains names them (the
    key _backfill_gtp_sharded_param_map rebuilds a gathered in_proj's per-shard entry under), Adam's states
    created by the optimizer's own init_state_fn (what its load does first), then
    sharded_state_dict(the chunks' tree of the bf16 parameters) with training's metadata."""
    from megatron.core import parallel_state as ps
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.transformer.module import Float16Module
    torch = M.torch
    for model in chunks.values():
        model.config.bf16, model.config.params_dtype = True, torch.bfloat16
    ddp_config = DistributedDataParallelConfig(use_distributed_optimizer=False)
    wrapped = [DistributedDataParallel(model.config, ddp_config, Float16Module(model.config, model),
                                       disable_bucketing=i > 0)
               for i, model in enumerate(chunks.values())]
    _name_gtp_params(wrapped)
    config = OptimizerConfig(optimizer="adam", lr=1e-4, bf16=True, params_dtype=torch.bfloat16,
                             use_distributed_optimizer=False)
    optimizer = get_megatron_optimizer(config, wrapped, use_gloo_process_groups=False)
    for part in optimizer_parts(optimizer):
        part.init_state_fn(part.optimizer, part.config)
    with torch.no_grad():
        tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
    metadata = dict(FLOAT16_METADATA, dp_cp_group=ps.get_data_parallel_group(with_context_parallel=True))
    out = optimizer.sharded_state_dict(tree, is_loading=False, metadata=metadata)
    _empty_param_id_lists(M, out)
    return out


def _empty_param_id_lists(M, tree):
    """Each param group's `params` (a LocalNonpersistentObject of the group's param ids, torch's state
    dict) as an empty local value: the seam's local entries carry tensor data or object refs only, and a
    dump compares a local entry by its path (docs/spec-addendum.md I, optimizer_common_state)."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key == "params" and isinstance(value, M.LocalNonpersistentObject) and isinstance(value.unwrap(), list):
                tree[key] = M.LocalNonpersistentObject(None)
            else:
                _empty_param_id_lists(M, value)
    elif isinstance(tree, list):
        for value in tree:
            _empty_param_id_lists(M, value)


def _name_gtp_params(wrapped):
    """Training names GTP parameters after the DDP wrap (classify_gtp_remat_chains ->
    tag_gtp_params_with_names: the wrappers' 'module.module.'-prefixed names); a Megatron without GTP
    has none to name."""
    try:
        from megatron.core.tensor_parallel.generalized_tensor_parallelism import tag_gtp_params_with_names
    except ImportError:
        return
    for model in wrapped:
        tag_gtp_params_with_names(model)
