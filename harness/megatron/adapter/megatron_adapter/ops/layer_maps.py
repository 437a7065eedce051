"""Ops on hybrid layer patterns and GPT retargeting: Megatron's hybrid_layer_allocation and
gpt_checkpoint_interop functions, called as they are (docs/adapter-protocol.md)."""

from megatron_adapter.codec import Codec
from megatron_adapter.error_kinds import classify
from megatron_adapter.errors import BadRequest, OpError, field, integer, opt, str_list_field, string
from megatron_adapter import patches
from megatron_adapter.patches.stand_ins import FakeGroup


def _pairs(mapping):
    return [[int(h), int(g)] for h, g in sorted(mapping.items())]


def pattern_maps(ctx, req):
    pattern = ctx.pattern(req, nullable=True)
    try:
        maps = ctx.maps(pattern)
    except OpError as err:
        if err.kind == "unsupported":
            raise
        return {"pattern": pattern, "ok": False, "error": {"kind": err.kind, "message": err.message}}
    return {"pattern": pattern, "ok": True, "num_gpt_layers": int(maps.num_gpt_layers),
            "attention_to_gpt": _pairs(maps.attention_to_gpt), "mlp_to_gpt": _pairs(maps.mlp_to_gpt),
            "fresh_init": sorted(int(i) for i in maps.fresh_init)}


def parse_pattern(ctx, req):
    parsed = ctx.call("alloc.parse_hybrid_pattern", ctx.pattern(req, nullable=True))
    return {"main": parsed.main_pattern, "mtp": parsed.mtp_pattern, "depth": int(parsed.mtp_num_depths)}


def layer_counts(ctx, req):
    counts = ctx.call("alloc.get_hybrid_layer_counts", ctx.pattern(req))
    return {"counts": {k: int(v) for k, v in counts.items()}, "order": list(counts)}


def total_layer_count(ctx, req):
    return {"count": int(ctx.call("alloc.get_hybrid_total_layer_count", ctx.pattern(req)))}


def segment_count(ctx, req):
    return {"count": int(ctx.call("alloc.get_hybrid_total_pipeline_segment_count", ctx.pattern(req)))}


def type_maps(ctx, req):
    layers = string(req, "layers")
    maps = ctx.call("alloc.get_layer_maps_from_layer_type_list", list(layers),
                      type_kinds={KeyError: "invalid_symbol"})
    return {"maps": {k: _pairs(v) for k, v in maps.items()}, "order": list(maps)}


def select_segment(ctx, req):
    pattern = ctx.pattern(req)
    pp_rank = integer(req, "pp_rank", minimum=0)
    pp_size = integer(req, "pp_size", minimum=1)
    vp = integer(req, "vp_stage", nullable=True) if "vp_stage" in req else None
    first = integer(req, "first", nullable=True) if "first" in req else None
    last = integer(req, "last", nullable=True) if "last" in req else None
    fn = ctx.need("alloc.select_pipeline_segment", "pipeline segment selection")
    tp, dp = FakeGroup(0, 1), FakeGroup(0, 1)
    try:
        with patches.applied("one_process_ranks"):
            layers, offset = fn(pattern, FakeGroup(pp_rank, pp_size), vp, first, last,
                                tp_group=tp, dp_cp_group=dp)
    except Exception as exc:  # noqa: BLE001
        raise classify(exc)
    return {"layers": "".join(layers), "offset": int(offset)}


def retarget(ctx, req):
    pattern = ctx.pattern(req, nullable=True)
    codec = Codec(ctx.M)
    tree = codec.decode(field(req, "entries"), opt(req, "structure", "flat"))
    maps = ctx.maps(pattern)
    fn = ctx.need("interop.retarget_sharded_state_dict_to_gpt_checkpoint", "retarget")
    kinds = {TypeError: "uneven_prepend", ctx.M.CheckpointingException: "metadata_integrity"}
    try:
        fn(tree, maps)
        entries = codec.encode(tree, codec.path_form)  # builds factories: may raise too
    except Exception as exc:  # noqa: BLE001
        raise classify(exc, kinds)
    return {"entries": entries}


def _checkpoint_keys(req):
    if req.get("checkpoint_keys") is None:
        return None
    return str_list_field(req, "checkpoint_keys")


def fsdp_key(ctx, req):
    key = field(req, "key")
    maps = ctx.maps(ctx.pattern(req, nullable=True))
    out = ctx.call("interop._retarget_explicit_key_to_gpt_checkpoint", key, maps, _checkpoint_keys(req))
    return {"key": out}


def fsdp_retarget(ctx, req):
    tree = field(req, "tree")
    if not isinstance(tree, dict):
        raise BadRequest("tree must be a JSON object")
    prefix = req.get("prefix", "")
    if not isinstance(prefix, str):
        raise BadRequest("prefix must be a string")
    maps = ctx.maps(ctx.pattern(req, nullable=True))
    out = ctx.call("interop.retarget_fsdp_state_dict_to_gpt_checkpoint", tree, maps,
                     _checkpoint_keys(req), prefix)
    return {"tree": out}
