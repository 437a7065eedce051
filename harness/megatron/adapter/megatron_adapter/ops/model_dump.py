"""The model_dump op (docs/adapter-protocol.md): one rank's sharded state dict of a real GPTModel or
HybridModel built on CPU, in the entry JSON of docs/state-dict-json.md. The worlds are the persistent
gloo worlds (one per world size, reused across requests); the task is worlds/model_tasks.py's."""

import json

from megatron_adapter.errors import BadRequest, OpError, Unsupported
from megatron_adapter.megatron_import import world_start_error
from megatron_adapter.real_models import factory
from megatron_adapter.worlds import gloo_worlds

_FIELDS = ("model", "rank", "layers", "tp", "pp", "ep", "etp", "gtp", "pad_alignment", "dp", "optimizer", "hidden",
           "num_attention_heads", "num_query_groups", "kv_channels", "ffn_hidden", "gated_mlp", "add_bias",
           "num_experts", "moe_ffn_hidden", "vocab", "tied_embeddings", "norm", "mamba_heads", "mamba_head_dim",
           "mamba_groups", "mamba_state")
MAX_RANKS = 8  # one process per rank on a 2-core machine


def model_dump(ctx, req):
    missing = [f for f in _FIELDS if f not in req]
    if missing:
        raise BadRequest(f"model_dump lacks {', '.join(missing)}")
    mixer, householder = factory.field(req, "mixer"), factory.field(req, "gdp_householder")
    if mixer not in ("mamba", "gdp"):
        raise BadRequest(f"model_dump: mixer must be mamba or gdp, got {mixer!r}")
    if not isinstance(householder, int) or householder < 1:
        raise BadRequest(f"model_dump: gdp_householder must be an integer of at least 1, got {householder!r}")
    size = int(req["gtp"]) * int(req["tp"]) * int(factory.field(req, "cp")) * int(req["dp"]) * int(req["pp"])
    if not 1 <= size <= MAX_RANKS:
        raise Unsupported(f"model_dump: a world of {size} ranks (at most {MAX_RANKS} here)")
    kind = req.get("optimizer_kind", "distributed")
    if kind not in factory.OPTIMIZER_KINDS:
        raise BadRequest(f"model_dump: optimizer_kind {kind!r} is not one of {', '.join(factory.OPTIMIZER_KINDS)}")
    rank = int(req["rank"])
    if not 0 <= rank < size:
        raise BadRequest(f"model_dump: rank {rank} is outside the world of {size} ranks")
    # Every rank of the world builds its model in one task: the other ranks' answers are kept for the
    # requests that follow (a round-trip plan asks for every rank of the same model in turn).
    config = json.dumps({k: v for k, v in req.items() if k != "rank"}, sort_keys=True)
    results = ctx.model_dumps.get(config)
    if results is None:
        results = _build_all_ranks(ctx, req, size)
        ctx.model_dumps.clear()
        ctx.model_dumps[config] = results
    mine = results[rank]
    if "unsupported" in mine:
        raise Unsupported(mine["unsupported"])
    if "megatron_error" in mine:
        raise OpError("megatron_error", mine["megatron_error"])
    return {"entries": mine["entries"]}


def _build_all_ranks(ctx, req, size):
    try:
        world = ctx.worlds.get(tp=size, gtp=1, dp=1)
    except gloo_worlds.WorldError as exc:
        raise world_start_error(ctx.M, exc, "the world for the real model did not start")
    try:
        return world.run("real_model_dump", dict(req))
    except gloo_worlds.WorldTaskError as exc:
        # Building a model that Megatron supports on this layout must work: a failure means the CPU
        # shims fall short (or no longer match), a harness error, never a finding.
        raise OpError("harness_error", f"the real model could not be built here: {exc}")
