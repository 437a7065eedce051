"""Ops on Megatron's split factories: the SSM/GDP in_proj split, the GDP layouts, GTP's shard rows
and the GTP shard-split factory (the checkout's own, else the candidate's when applied)."""

import candidates

from megatron_adapter.codec import Codec
from megatron_adapter.error_kinds import classify
from megatron_adapter.errors import BadRequest, Unsupported, boolean, field, int_list, integer, meta_tensor, opt, string
from megatron_adapter.patches.stand_ins import FakeGroup


def _tp_tensor(ctx, req, rows_field):
    """The TP-local weight as Megatron describes it: from_rank_offsets over a meta tensor, its rows fragmented
    tp_size ways; with "layer": [index, layers] the layers stacked on a prepended axis (a GPT-format key)."""
    torch = ctx.M.torch
    key = string(req, "key")
    rows = integer(req, rows_field, minimum=0)
    cols = integer(req, "cols", nullable=True, minimum=0) if "cols" in req else None
    tp_rank = integer(req, "tp_rank")
    tp_size = integer(req, "tp_size")
    codec = Codec(ctx.M)
    dtype = codec.dtype(req.get("dtype", "float32"), "request")
    # No replica_id in the request: from_rank_offsets's own default (spec 3.2: 0, the main replica) decides.
    replica = {"replica_id": codec.replica(req["replica_id"], "request")} if "replica_id" in req else {}
    shape = (rows,) if cols is None else (rows, cols)
    data = meta_tensor(torch, shape, dtype)
    layer = int_list(req["layer"], "layer", "request", minimum=0) if "layer" in req else None
    if layer is not None and len(layer) != 2:
        raise BadRequest("layer must be [index, layers]")
    offsets = [(0, tp_rank, tp_size)] if layer is None else [(0, layer[0], layer[1]), (1, tp_rank, tp_size)]
    try:
        return ctx.M.ShardedTensor.from_rank_offsets(key, data, *offsets, prepend_axis_num=0 if layer is None else 1,
                                                     **replica)
    except Exception as exc:  # noqa: BLE001
        raise classify(exc, {ctx.M.CheckpointingException: "metadata_integrity"})


def _split_fn(ctx, which):
    if which == "ssm":
        return ctx.need("ssm_utils._split_tensor_factory", "split factory (megatron/core/ssm/utils.py)")
    if which == "gdp":
        return ctx.need("gdp._split_tensor_factory", "GDP split factory (gated_delta_product.py)")
    raise BadRequest("factory must be \"ssm\" or \"gdp\"")


def split_chunks(ctx, req):
    fn = _split_fn(ctx, opt(req, "factory", "ssm"))
    orig = _tp_tensor(ctx, req, "local_rows")
    factory = ctx.M.call_split_factory(fn, orig, field(req, "sections"), field(req, "names"), 0)
    try:
        built = factory.build()
    except Exception as exc:  # noqa: BLE001
        raise classify(exc, {AssertionError: "split_assertion"})
    return {"chunks": [_chunk_json(ctx, c) for c in built]}


def _chunk_json(ctx, st):
    if not isinstance(st, ctx.M.ShardedTensor):
        return Codec(ctx.M).leaf_json(st)
    return {"key": st.key, "global_shape": list(st.global_shape), "global_offset": list(st.global_offset),
            "local_shape": list(st.local_shape),
            "axis_fragmentations": None if st.axis_fragmentations is None else list(st.axis_fragmentations),
            "replica_id": Codec.replica_json(st.replica_id), "prepend_axis_num": st.prepend_axis_num}


def gdp_layout(ctx, req):
    which = opt(req, "which", "in_proj")
    d_inner = integer(req, "d_inner_local")
    group_state = integer(req, "group_state_local")
    householder = integer(req, "householder")
    if which == "in_proj":
        fn = ctx.need("gdp._get_in_proj_checkpoint_split_layout", "GDP in_proj layout")
        args = (d_inner, group_state, integer(req, "nheads_local"), householder)
    elif which == "conv":
        fn = ctx.need("gdp._get_conv_checkpoint_split_layout", "GDP conv layout")
        args = (d_inner, group_state, householder)
    else:
        raise BadRequest("which must be \"in_proj\" or \"conv\"")
    try:
        sections, names = fn(*args)
    except Exception as exc:  # noqa: BLE001
        raise classify(exc)
    return {"sections": [int(s) for s in sections], "names": list(names)}


def gtp_padding(ctx, req):
    fn = ctx.need("gtp.gtp_remat_shard_dim0", "GTP shard rows")
    rows = integer(req, "rows", minimum=0)
    gtp_size = integer(req, "gtp_size", minimum=1)
    pad = integer(req, "pad_for_alignment", minimum=0)
    config = ctx.M.gtp.GTP_CONFIG
    saved = config.pad_for_alignment
    config.pad_for_alignment = pad
    try:
        shard_rows, pad_length = fn(rows, FakeGroup(0, gtp_size))
    except Exception as exc:  # noqa: BLE001
        raise classify(exc, {AssertionError: "gtp_not_divisible"})
    finally:
        config.pad_for_alignment = saved
    return {"shard_rows": int(shard_rows), "pad_length": int(pad_length)}


def gtp_split(ctx, req):
    fn = ctx.M.find_gtp_split_factory()
    if fn is None:
        raise Unsupported(candidates.not_in_checkout_reason())
    torch = ctx.M.torch
    key = string(req, "key")
    shard_rows = integer(req, "shard_rows", minimum=0)
    cols = integer(req, "cols", minimum=0)
    t, T = integer(req, "tp_rank", minimum=0), integer(req, "tp_size", minimum=1)
    g, G = integer(req, "gtp_rank", minimum=0), integer(req, "gtp_size", minimum=1)
    codec = Codec(ctx.M)
    dtype = codec.dtype(req.get("dtype", "float32"), "request")
    replica = codec.replica(req.get("replica_id", 0), "request")
    data = meta_tensor(torch, (shard_rows, cols), dtype)
    try:
        orig = ctx.M.ShardedTensor.from_rank_offsets(
            key, data, (0, t * G + g, T * G), replica_id=replica,
            allow_shape_mismatch=boolean(req, "allow_shape_mismatch", False))
        factory = fn(orig, field(req, "sections"), field(req, "names"), g, t, T)
        built = factory.build()
    except Exception as exc:  # noqa: BLE001
        raise classify(exc, {AssertionError: "split_assertion"})
    if isinstance(built, ctx.M.LocalNonpersistentObject):
        return {"local": True, "pieces": []}
    items = built if isinstance(built, list) else [built]
    if len(items) == 1 and isinstance(items[0], ctx.M.LocalNonpersistentObject):
        return {"local": True, "pieces": [], "in_list": True}
    return {"local": False, "pieces": [_chunk_json(ctx, p) for p in items]}
