"""The load_state op: a real save, then Megatron's own load of the request tree in a gloo world."""

import os

from megatron_adapter.codec import Codec
from megatron_adapter.error_kinds import LOAD_FAILURE_KINDS, kind_of
from megatron_adapter.errors import BadRequest, OpError, Unsupported, is_int, field, string
from megatron_adapter.ops.gtp_world_cases import gtp_params, is_mamba, shard_split_reason
from megatron_adapter.worlds import gloo_worlds
from megatron_adapter.worlds import worker_context


LOAD_ORDERS = ("serialization_load", "to_state_dict")
# Row-code sources of the stored chunks start here, apart from the stand-ins' own weights (source t)
# and the requests' fill (999), so a load that returns anything but stored rows is seen.
STORED_SOURCE = 100


def load_state(ctx, req):
    """The seam's load_state on Megatron's own dist_checkpointing. The checkpoint is written for
    real by dist_checkpointing.save in a one-rank world; the request tree is then loaded on every
    rank of the world of its GTP factories' layout (one rank when it has none), along
    serialization.load (dist_checkpointing.load, validate_access_integrity=False: one rank's request
    alone never covers a tensor) or MCoreTensorAwareStateDict.to_state_dict. A GTP factory leaf
    (the seam's gtp_pieces parameters) becomes that rank's real in_proj factory, built by the
    mixer's sharded_state_dict, loaded and merged by Megatron; every rank's answer is cached, so
    asking rank after rank costs one world run (docs/adapter-protocol.md)."""
    import json
    import shutil
    import tempfile
    order = string(req, "order")
    if order not in LOAD_ORDERS:
        raise BadRequest(f"order must be one of {', '.join(LOAD_ORDERS)}")
    index = {}

    def codes(blocks, where):
        out = []
        for b in blocks:
            if not isinstance(b, list) or len(b) != 3 or not all(is_int(x) for x in b) or min(b) < 0:
                raise BadRequest(f"{where}: a block is [storage, first_row, rows]")
            s, first, n = b
            if len(out) + n > 2_000_000:
                raise BadRequest(f"{where}: too many rows")
            out.extend([0.0] * n if s == 0 else [worker_context.row_code(index.setdefault(s, STORED_SOURCE + len(index)), first + j)
                                                   for j in range(n)])
        return out

    chunks, boxes = [], set()
    for i, c in enumerate(field(req, "chunks")):
        where = f"chunks[{i}]"
        c = dict(c)
        box = json.dumps([c.get("key"), c.get("global_shape"), c.get("global_offset"), c.get("local_shape")])
        if box in boxes:
            continue  # the same box from another writer: stored once (first writer wins, as DCP's dedup)
        boxes.add(box)
        c["codes"] = codes(field(field(c, "data", where), "blocks", where), where)
        chunks.append(c)
    objects = [[str(k), v] for k, v in field(req, "objects")]
    common = req.get("common") or {}
    if not isinstance(common, dict):
        raise BadRequest("common must be an object")

    # GTP factory leaves: {"kind": "factory", "gtp": <gtp_pieces request>}; the leaf becomes
    # {"kind": "factory", "factory_id": i} and the world builds rank's own factory from factories[i].
    factories = []
    layout = None

    def strip(node, where):
        if not isinstance(node, list) or len(node) != 2 or node[0] not in ("dict", "list", "leaf"):
            raise BadRequest(f"{where}: a request node is [\"dict\"|\"list\"|\"leaf\", ...]")
        if node[0] == "dict":
            return ["dict", [[k, strip(v, f"{where}.{k}")] for k, v in node[1]]]
        if node[0] == "list":
            return ["list", [strip(v, f"{where}[{i}]") for i, v in enumerate(node[1])]]
        e = node[1]
        if not isinstance(e, dict) or e.get("kind") != "factory":
            return node
        nonlocal layout
        r = e.get("retargeted")
        if isinstance(r, dict):
            # A factory Megatron's retargeting returned: rebuilt from its recipe and retargeted again
            # by Megatron in the world (checked here first: a bad entry is this request's error).
            if not isinstance(r.get("pattern"), str) or not isinstance(r.get("entry"), dict):
                raise BadRequest(f"{where}: retargeted needs \"pattern\" and the original factory \"entry\"")
            Codec(ctx.M).leaf(r["entry"], where)
            return ["leaf", {"kind": "retargeted_factory", "pattern": r["pattern"], "entry": r["entry"]}]
        g = e.get("gtp")
        if not isinstance(g, dict):
            raise Unsupported("load_state of a factory other than a GTP in_proj factory or one Megatron's "
                              "retargeting returned (its Megatron construction did not cross the seam)")
        params = gtp_params(g)
        if params["design"] == "shard-split" and not is_mamba(g) and shard_split_reason(ctx.M):
            raise Unsupported(shard_split_reason(ctx.M))
        here = (params["tp_size"], params["gtp_size"])
        if layout is not None and layout != here:
            raise BadRequest(f"{where}: GTP factories of one request must share one (T, G) layout")
        layout = here
        factories.append(dict(params, tp_rank=params["tp_rank"], gtp_rank=params["gtp_rank"]))
        return ["leaf", {"kind": "factory", "factory_id": len(factories) - 1}]

    request = strip(field(req, "request"), "request")
    # The rank asked about; every other rank of the world loads the same tree with its own factories.
    t = factories[0]["tp_rank"] if factories else 0
    g = factories[0]["gtp_rank"] if factories else 0
    if any((f["tp_rank"], f["gtp_rank"]) != (t, g) for f in factories):
        raise BadRequest("GTP factories of one request must belong to one (t, g) rank")
    rank_free = [{k: v for k, v in f.items() if k not in ("tp_rank", "gtp_rank")} for f in factories]
    case = json.dumps([order, chunks, objects, common, request, rank_free], sort_keys=True, default=str)
    cache = ctx.load_cache
    ops = ctx.gtp
    world = ops.world(factories[0] if factories else {"tp_size": 1, "gtp_size": 1})
    hit = cache.get(case)
    if hit is not None and hit[0] is world:
        results = hit[1]
    else:
        tmp = tempfile.mkdtemp(prefix="ih-load-")
        payload = {"chunks": chunks, "objects": objects, "common": common, "request": request,
                   "factories": {str(i): f for i, f in enumerate(factories)}, "order": order,
                   "dir": os.path.join(tmp, "ckpt")}
        try:
            if order == "serialization_load":
                saver = ops.world({"tp_size": 1, "gtp_size": 1})
                saver.run("ckpt_save", payload, timeout=120)
                world = ops.world(factories[0] if factories else {"tp_size": 1, "gtp_size": 1})
            results = world.run("load_state", payload, timeout=120)
        except gloo_worlds.WorldTaskError as exc:
            text = exc.message
            kind = exc.kind(kind_of(exc.facts, LOAD_FAILURE_KINDS) or "megatron_error")
            last = [ln for ln in text.splitlines() if ln.strip()]
            where = f" (at {exc.frame})" if exc.frame else ""
            raise OpError(kind, (last[-1] if last else text)[:1500] + where, megatron_frame=exc.frame)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # every load wrote a checkpoint: never leave it behind
        if len(cache) > 16:
            cache.clear()
        cache[case] = (world, results)
    result = results[world.rank_of(0, t, g)]
    storage = {k: s for s, k in index.items()}

    def to_blocks(rows):
        blocks = []
        for src in rows:
            s, row = (0, 0) if src is None else (storage.get(src[0], -1), src[1])
            if s == -1:
                raise OpError("megatron_error", "the load produced a row no stored chunk holds (a factory's own "
                              "data or a wrong fill instead of the checkpoint's)")
            last = blocks[-1] if blocks else None
            if last and last[0] == s and (s == 0 or last[1] + last[2] == row):
                last[2] += 1
            else:
                blocks.append([s, row if s else 0, 1])
        return blocks

    def convert(node):
        kind = node[0]
        if kind == "dict":
            return ["dict", [[k, convert(v)] for k, v in node[1]]]
        if kind == "list":
            return ["list", [convert(v) for v in node[1]]]
        if kind == "tensor":
            return ["tensor", node[1], to_blocks(node[2])]
        return node

    return {"tree": convert(result)}
