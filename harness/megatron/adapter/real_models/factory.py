"""Builds a real Megatron model inside a world worker (gtp_world.py) from a model_dump request.

The world is sized by the request (gtp x tp x dp x pp ranks); the task re-initialises
parallel_state for the request's layout with Megatron's own initialize_model_parallel (gloo, the
world's default backend), builds the model chunk of this rank's pipeline stage on CPU, and gives
parallel_state back to the world's own groups afterwards (gtp_world._build_groups).
"""


class UnsupportedConfig(Exception):
    """A configuration the real-model factory cannot build here (answered as unsupported)."""


def transformer_config(M, req):
    from megatron.core.transformer.transformer_config import TransformerConfig
    experts = int(req["num_experts"])
    layers = int(req["layers"])
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
        pipeline_dtype=M.torch.float32)
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


def build(M, req):
    if int(req["gtp"]) != 1:
        raise UnsupportedConfig("the real-model factory does not build GTP layouts yet (gtp must be 1)")
    if req["model"] == "gpt":
        return build_gpt(M, req)
    raise UnsupportedConfig("the real-model factory does not build HybridModel yet (no local hybrid layer spec)")


def init_parallel_state(req):
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
    ps.initialize_model_parallel(tensor_model_parallel_size=int(req["tp"]),
                                 pipeline_model_parallel_size=int(req["pp"]),
                                 expert_model_parallel_size=int(req["ep"]),
                                 expert_tensor_parallel_size=int(req["etp"]),
                                 create_gloo_process_groups=False)
