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


class _StoredRows:
    """The request's storages as row-code sources (STORED_SOURCE on): the chunks' data blocks become row codes,
    and the loaded rows' codes become blocks again."""

    def __init__(self):
        self.index = {}  # storage -> row-code source

    def codes(self, blocks, where):
        out = []
        for b in blocks:
            if not isinstance(b, list) or len(b) != 3 or not all(is_int(x) for x in b) or min(b) < 0:
                raise BadRequest(f"{where}: a block is [storage, first_row, rows]")
            s, first, n = b
            if len(out) + n > 2_000_000:
                raise BadRequest(f"{where}: too many rows")
            out.extend([0.0] * n if s == 0 else [
                worker_context.row_code(self.index.setdefault(s, STORED_SOURCE + len(self.index)), first + j)
                for j in range(n)])
        return out

    def blocks(self, rows):
        storage = {k: s for s, k in self.index.items()}
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

    def tree(self, node):
        """A world's loaded tree (tensors as decoded rows) with its tensors as blocks of the request's storages."""
        kind = node[0]
        if kind == "dict":
            return ["dict", [[k, self.tree(v)] for k, v in node[1]]]
        if kind == "list":
            return ["list", [self.tree(v) for v in node[1]]]
        if kind == "tensor":
            return ["tensor", node[1], self.blocks(node[2])]
        return node


def _stored_chunks(req, rows):
    """The checkpoint's chunks, each box once (the same box from another writer is stored once: first writer
    wins, as DCP's dedup), with its data as row codes."""
    import json
    chunks, boxes = [], set()
    for i, c in enumerate(field(req, "chunks")):
        where = f"chunks[{i}]"
        c = dict(c)
        box = json.dumps([c.get("key"), c.get("global_shape"), c.get("global_offset"), c.get("local_shape")])
        if box in boxes:
            continue
        boxes.add(box)
        c["codes"] = rows.codes(field(field(c, "data", where), "blocks", where), where)
        chunks.append(c)
    return chunks


class _Request:
    """The request tree with its GTP factory leaves ({"kind": "factory", "gtp": <gtp_pieces request>}) replaced by
    {"kind": "factory", "factory_id": i}: the world builds each rank's own factory from factories[i]."""

    def __init__(self, ctx, node):
        self.ctx, self.factories, self.layout = ctx, [], None
        self.tree = self.strip(node, "request")

    def strip(self, node, where):
        if not isinstance(node, list) or len(node) != 2 or node[0] not in ("dict", "list", "leaf"):
            raise BadRequest(f"{where}: a request node is [\"dict\"|\"list\"|\"leaf\", ...]")
        if node[0] == "dict":
            return ["dict", [[k, self.strip(v, f"{where}.{k}")] for k, v in node[1]]]
        if node[0] == "list":
            return ["list", [self.strip(v, f"{where}[{i}]") for i, v in enumerate(node[1])]]
        e = node[1]
        if not isinstance(e, dict) or e.get("kind") != "factory":
            return node
        if isinstance(e.get("retargeted"), dict):
            return self.retargeted(e["retargeted"], where)
        return self.gtp_factory(e.get("gtp"), where)

    def retargeted(self, r, where):
        """A factory Megatron's retargeting returned: rebuilt from its recipe and retargeted again by Megatron in
        the world (checked here first: a bad entry is this request's error)."""
        if not isinstance(r.get("pattern"), str) or not isinstance(r.get("entry"), dict):
            raise BadRequest(f"{where}: retargeted needs \"pattern\" and the original factory \"entry\"")
        Codec(self.ctx.M).leaf(r["entry"], where)
        return ["leaf", {"kind": "retargeted_factory", "pattern": r["pattern"], "entry": r["entry"]}]

    def gtp_factory(self, g, where):
        if not isinstance(g, dict):
            raise Unsupported("load_state of a factory other than a GTP in_proj factory or one Megatron's "
                              "retargeting returned (its Megatron construction did not cross the seam)")
        params = gtp_params(g)
        if params["design"] == "shard-split" and not is_mamba(g) and shard_split_reason(self.ctx.M):
            raise Unsupported(shard_split_reason(self.ctx.M))
        here = (params["tp_size"], params["gtp_size"])
        if self.layout is not None and self.layout != here:
            raise BadRequest(f"{where}: GTP factories of one request must share one (T, G) layout")
        self.layout = here
        self.factories.append(params)
        return ["leaf", {"kind": "factory", "factory_id": len(self.factories) - 1}]

    def asked_rank(self):
        """The (t, g) rank asked about; every other rank of the world loads the same tree with its own factories."""
        t, g = (self.factories[0]["tp_rank"], self.factories[0]["gtp_rank"]) if self.factories else (0, 0)
        if any((f["tp_rank"], f["gtp_rank"]) != (t, g) for f in self.factories):
            raise BadRequest("GTP factories of one request must belong to one (t, g) rank")
        return t, g

    def world_layout(self):
        return self.factories[0] if self.factories else {"tp_size": 1, "gtp_size": 1}


def _world_load(ctx, payload, request):
    """Every rank's loaded tree: the checkpoint saved by a one-rank world first (serialization_load), then the
    load in the world of the request's layout. Megatron refusing it is its error kind."""
    import shutil
    import tempfile
    tmp = tempfile.mkdtemp(prefix="ih-load-")
    try:
        payload = dict(payload, dir=os.path.join(tmp, "ckpt"))
        if payload["order"] == "serialization_load":
            ctx.gtp.world({"tp_size": 1, "gtp_size": 1}).run("ckpt_save", payload, timeout=120)
        world = ctx.gtp.world(request.world_layout())
        return world, world.run("load_state", payload, timeout=120)
    except gloo_worlds.WorldTaskError as exc:
        text = exc.message
        kind = exc.kind(kind_of(exc.facts, LOAD_FAILURE_KINDS) or "megatron_error")
        last = [ln for ln in text.splitlines() if ln.strip()]
        where = f" (at {exc.frame})" if exc.frame else ""
        raise OpError(kind, (last[-1] if last else text)[:1500] + where, megatron_frame=exc.frame)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # every load wrote a checkpoint: never leave it behind


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
    order = string(req, "order")
    if order not in LOAD_ORDERS:
        raise BadRequest(f"order must be one of {', '.join(LOAD_ORDERS)}")
    rows = _StoredRows()
    chunks = _stored_chunks(req, rows)
    objects = [[str(k), v] for k, v in field(req, "objects")]
    common = req.get("common") or {}
    if not isinstance(common, dict):
        raise BadRequest("common must be an object")
    request = _Request(ctx, field(req, "request"))
    t, g = request.asked_rank()
    rank_free = [{k: v for k, v in f.items() if k not in ("tp_rank", "gtp_rank")} for f in request.factories]
    case = json.dumps([order, chunks, objects, common, request.tree, rank_free], sort_keys=True, default=str)
    world = ctx.gtp.world(request.world_layout())
    hit = ctx.load_cache.get(case)
    if hit is not None and hit[0] is world:
        results = hit[1]
    else:
        payload = {"chunks": chunks, "objects": objects, "common": common, "request": request.tree,
                   "factories": {str(i): f for i, f in enumerate(request.factories)}, "order": order}
        world, results = _world_load(ctx, payload, request)
        if len(ctx.load_cache) > 16:
            ctx.load_cache.clear()
        ctx.load_cache[case] = (world, results)
    return {"tree": rows.tree(results[world.rank_of(0, t, g)])}
