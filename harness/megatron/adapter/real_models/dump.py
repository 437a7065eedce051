"""The adapter's model_dump op (docs/adapter-protocol.md): one rank's sharded state dict of a real
GPTModel or HybridModel built on CPU, in the entry JSON of docs/state-dict-json.md.

Worlds are gtp_world.py's persistent gloo worlds (one per world size, reused across requests);
the task below is registered in gtp_world.TASKS before any world forks, so every worker has it.
"""

import gtp_world
from adapter_errors import BadRequest, OpError, Unsupported

from real_models import factory, shims

_FIELDS = ("model", "rank", "layers", "tp", "pp", "ep", "etp", "gtp", "dp", "optimizer", "hidden",
           "num_attention_heads", "num_query_groups", "kv_channels", "ffn_hidden", "gated_mlp", "add_bias",
           "num_experts", "moe_ffn_hidden", "vocab", "tied_embeddings", "norm", "mamba_heads", "mamba_head_dim",
           "mamba_groups", "mamba_state")
MAX_RANKS = 8  # one process per rank on a 2-core machine


def task_real_model_dump(ctx, req):
    """World task: every rank builds its model chunk; each returns its own entries."""
    from adapter_codec import Codec
    M = ctx.M
    factory.init_parallel_state(req)
    try:
        with shims.applied():
            chunks = factory.build(M, req)
            tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
        entries = Codec(M).encode(tree, "dotted")
    except factory.UnsupportedConfig as exc:
        return {"unsupported": str(exc)}
    finally:
        from megatron.core import parallel_state as ps
        ps.destroy_model_parallel()
        gtp_world._build_groups(ctx)
    return {"entries": entries}


gtp_world.TASKS.setdefault("real_model_dump", task_real_model_dump)


def op_model_dump(ops, req):
    missing = [f for f in _FIELDS if f not in req]
    if missing:
        raise BadRequest(f"model_dump lacks {', '.join(missing)}")
    if req["optimizer"]:
        raise Unsupported("model_dump --optimizer: Megatron's DistributedOptimizer is not built on CPU yet")
    size = int(req["gtp"]) * int(req["tp"]) * int(req["dp"]) * int(req["pp"])
    if not 1 <= size <= MAX_RANKS:
        raise Unsupported(f"model_dump: a world of {size} ranks (at most {MAX_RANKS} here)")
    rank = int(req["rank"])
    if not 0 <= rank < size:
        raise BadRequest(f"model_dump: rank {rank} is outside the world of {size} ranks")
    gtp_world.set_megatron(ops.M)
    try:
        world = gtp_world.get_world(tp=size, gtp=1, dp=1)
    except gtp_world.WorldError as exc:
        raise OpError("harness_error", f"the world for the real model did not start: {exc}")
    try:
        results = world.run("real_model_dump", dict(req))
    except gtp_world.WorldTaskError as exc:
        # Building a model that Megatron supports on this layout must work: a failure means the CPU
        # shims fall short (or no longer match), a harness error, never a finding.
        raise OpError("harness_error", f"the real model could not be built here: {exc}")
    mine = results[rank]
    if "unsupported" in mine:
        raise Unsupported(mine["unsupported"])
    return {"entries": mine["entries"]}
