"""The model_dump op (docs/adapter-protocol.md): one rank's sharded state dict of a real GPTModel or
HybridModel built on CPU, in the entry JSON of docs/state-dict-json.md. The worlds are the persistent
gloo worlds (one per world size, reused across requests); the task is worlds/model_tasks.py's."""

from megatron_adapter.errors import BadRequest, OpError, Unsupported
from megatron_adapter.worlds import gloo_worlds

_FIELDS = ("model", "rank", "layers", "tp", "pp", "ep", "etp", "gtp", "dp", "optimizer", "hidden",
           "num_attention_heads", "num_query_groups", "kv_channels", "ffn_hidden", "gated_mlp", "add_bias",
           "num_experts", "moe_ffn_hidden", "vocab", "tied_embeddings", "norm", "mamba_heads", "mamba_head_dim",
           "mamba_groups", "mamba_state")
MAX_RANKS = 8  # one process per rank on a 2-core machine


def model_dump(ctx, req):
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
    gloo_worlds.set_megatron(ctx.M)
    try:
        world = gloo_worlds.get_world(tp=size, gtp=1, dp=1)
    except gloo_worlds.WorldError as exc:
        raise OpError("harness_error", f"the world for the real model did not start: {exc}")
    try:
        results = world.run("real_model_dump", dict(req))
    except gloo_worlds.WorldTaskError as exc:
        # Building a model that Megatron supports on this layout must work: a failure means the CPU
        # shims fall short (or no longer match), a harness error, never a finding.
        raise OpError("harness_error", f"the real model could not be built here: {exc}")
    mine = results[rank]
    if "unsupported" in mine:
        raise Unsupported(mine["unsupported"])
    return {"entries": mine["entries"]}
