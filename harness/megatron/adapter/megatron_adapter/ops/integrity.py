"""The sharding-integrity ops: Megatron's validation helpers and PyTorch DCP's global save-plan
validation over the entries of every rank."""

from megatron_adapter.codec import Codec
from megatron_adapter.errors import BadRequest, OpError, Unsupported, is_int, field, opt, str_list_field
from megatron_adapter import patches


def integrity(ctx, req):
    M = ctx.M
    validation = ctx.need("validation", "sharding validation")
    items = field(req, "entries")
    if not isinstance(items, list):
        raise BadRequest("entries must be a list")
    codec = Codec(M)
    ranks = {}
    for i, item in enumerate(items):
        where = f"entries[{i}]"
        entry = item.get("entry", item) if isinstance(item, dict) else item
        rank = item.get("rank", entry.get("rank", 0) if isinstance(entry, dict) else 0) \
            if isinstance(item, dict) else 0
        if not is_int(rank) or rank < 0 or rank > 1 << 20:
            raise BadRequest(f"{where}: rank must be a small non-negative integer")
        leaf = codec.leaf(entry, where)
        if isinstance(leaf, M.ShardedTensorFactory):
            leaves = [x for x in M.nested_values(leaf.build())]
        else:
            leaves = [leaf]
        for x in leaves:
            if isinstance(x, M.ShardedBase):
                ranks.setdefault(rank, []).append(x.without_data())
    global_metadata = [ranks.get(r, []) for r in range(max(ranks) + 1 if ranks else 0)]
    for st in (x for r in global_metadata for x in r):
        if isinstance(st, M.ShardedTensor) and st.axis_fragmentations is not None:
            cells = 1
            for f in st.axis_fragmentations:
                cells *= max(f, 0)
            if cells > 50_000_000:
                raise OpError("too_large", f"access counter for {st.key!r} would have {cells} cells")
    problems, details = [], []
    by_key = {}
    for rank, shardings in enumerate(global_metadata):
        for sh in shardings:
            by_key.setdefault(sh.key, []).append((rank, sh))
    for key, shardings in by_key.items():
        is_object = isinstance(shardings[0][1], M.ShardedObject)
        helper = validation._validate_objects_for_key if is_object else validation._validate_sharding_for_key
        try:
            for err in helper(shardings):
                details.append({"key": key, "kind": "objects" if is_object else "access", "message": str(err)})
        except AssertionError as exc:
            details.append({"key": key, "kind": "assertion", "message": f"[AssertionError] {exc!r}"})
        except Exception as exc:  # noqa: BLE001
            details.append({"key": key, "kind": "exception", "message": f"[{type(exc).__name__}] {exc}"})
    problems = [d["message"] if d["kind"] in ("assertion", "exception") else f"{d['key']}: {d['message']}"
                for d in details]
    verdict = {"ok": True}
    try:
        with patches.applied("one_process_ranks"):
            validation.validate_sharding_integrity(global_metadata)
    except Exception as exc:  # noqa: BLE001
        verdict = {"ok": False, "exception_type": type(exc).__name__, "message": str(exc)}
    out = {"ok": not problems and verdict["ok"], "problems": problems, "details": details, "verdict": verdict}
    plans = _dcp_plan_errors(M, global_metadata, max(len(global_metadata), int(opt(req, "world_size", 0) or 0)))
    if plans is not None:
        out["dcp_plan_errors"] = plans
    return out


def _dcp_plan_errors(M, global_metadata, world_size):
    """PyTorch DCP's own save planning of these entries, as Megatron's torch_dist save reaches it: each
    rank's main-replica tensors as write items, the coordinator's de-duplication, global plan and
    _validate_global_plan (bounds, overlaps, fill). Its messages, or None where this torch lacks them."""
    import logging
    try:
        from megatron.core.dist_checkpointing.mapping import is_main_replica
        from torch.distributed.checkpoint._dedup_save_plans import dedup_save_plans
        from torch.distributed.checkpoint.default_planner import (_validate_global_plan,
                                                                  create_default_global_save_plan)
        from torch.distributed.checkpoint.metadata import ChunkStorageMetadata, MetadataIndex, TensorProperties
        from torch.distributed.checkpoint.planner import SavePlan, TensorWriteData, WriteItem, WriteItemType
    except ImportError:
        return None
    torch = M.torch
    plans = []
    for rank in range(world_size):
        items = []
        for st in global_metadata[rank] if rank < len(global_metadata) else []:
            if not isinstance(st, M.ShardedTensor) or not is_main_replica(st.replica_id):
                continue
            offsets = torch.Size(st.global_offset)
            sizes = torch.Size((1,) * st.prepend_axis_num + tuple(st.local_shape))
            items.append(WriteItem(index=MetadataIndex(st.key, offsets), type=WriteItemType.SHARD,
                                   tensor_data=TensorWriteData(chunk=ChunkStorageMetadata(offsets, sizes),
                                                               properties=TensorProperties(dtype=st.dtype),
                                                               size=torch.Size(st.global_shape))))
        plans.append(SavePlan(items))
    planner_log = logging.getLogger("torch.distributed.checkpoint.default_planner")
    level = planner_log.level
    planner_log.setLevel(logging.ERROR)  # its warnings repeat the errors returned
    try:
        global_plan, metadata = create_default_global_save_plan(dedup_save_plans(plans))
        return [str(e) for e in _validate_global_plan(global_plan, metadata) or []]
    finally:
        planner_log.setLevel(level)


class _Problems:
    """[{"kind", "key", "message", "ranks"}], one per (kind, key): Megatron and DCP often report the same hole."""

    def __init__(self):
        self.rows, self.seen = [], set()

    def add(self, kind, key, message, ranks=()):
        if (kind, key) not in self.seen:
            self.seen.add((kind, key))
            self.rows.append({"kind": kind, "key": key, "message": f"{key}: {message}", "ranks": sorted(set(ranks))})


def _shardings_by_key(M, items):
    """{key: [(rank, entry without data)]} of the request's entries, and the ranks seen."""
    codec, by_key, ranks_seen = Codec(M), {}, set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise BadRequest(f"entries[{i}] must be an object")
        rank = item.get("rank", 0)
        if not is_int(rank) or rank < 0 or rank > 1 << 20:
            raise BadRequest(f"entries[{i}]: rank must be a small non-negative integer")
        leaf = codec.leaf(field(item, "entry", f"entries[{i}]"), f"entries[{i}]")
        if isinstance(leaf, M.ShardedBase):
            by_key.setdefault(leaf.key, []).append((rank, leaf.without_data()))
            ranks_seen.add(rank)
    return by_key, ranks_seen


def _megatron_grid(validation, problems, key, shardings):
    """A dtype or global-shape disagreement, else Megatron's access counter over a regular grid; True when the
    key's entries agree (DCP then judges them too)."""
    ranks, first = [r for r, _ in shardings], shardings[0][1]
    for r, sh in shardings:
        if sh.dtype != first.dtype:
            problems.add("dtype_mismatch", key, f"dtype {sh.dtype} vs {first.dtype}", [r])
            return False
        if tuple(sh.global_shape) != tuple(first.global_shape):
            problems.add("shape_mismatch", key, f"global shape {sh.global_shape} vs {first.global_shape}", [r])
            return False
    if first.has_regular_grid and all(sh.has_regular_grid for _, sh in shardings):
        try:
            if all(tuple(sh.local_shape) == tuple(first.local_shape) for _, sh in shardings):
                counts = validation._compute_shards_access(shardings)
                if (counts == 0).any():
                    problems.add("hole", key, "Megatron's access counter: a grid cell no main replica writes", ranks)
                if (counts > 1).any():
                    problems.add("overlap", key, "Megatron's access counter: a grid cell written twice", ranks)
        except Exception as exc:  # noqa: BLE001 - an index outside the grid
            problems.add("out_of_bounds", key, f"Megatron's access counter: {type(exc).__name__}: {exc}", ranks)
    return True


def _dcp_chunks(M, shardings):
    """The coordinator's chunks of a key from the main replicas' write items (exact copies written once, as
    dedup_save_plans does)."""
    from torch.distributed.checkpoint.metadata import ChunkStorageMetadata
    seen, chunks = set(), []
    for r, sh in shardings:
        if not M.mapping.is_main_replica(sh.replica_id):
            continue
        off = tuple(sh.global_offset)
        size = tuple(1 if a < sh.prepend_axis_num else s
                     for a, s in enumerate((1,) * sh.prepend_axis_num + tuple(sh.local_shape)))
        if (off, size) not in seen:
            seen.add((off, size))
            chunks.append(ChunkStorageMetadata(offsets=torch_size(off), sizes=torch_size(size)))
    return chunks


def _dcp_problems(default_planner, problems, tensors_md, by_key, plans):
    """default_planner._validate_global_plan of the coordinator's metadata, its messages typed."""
    import math
    from torch.distributed.checkpoint.metadata import Metadata
    from torch.distributed.checkpoint.planner import SavePlan
    errors = default_planner._validate_global_plan([SavePlan([])] * plans, Metadata(state_dict_metadata=tensors_md))
    for text in errors:
        key = text[4:].split(" ", 1)[0] if text.startswith("key:") else ""
        ranks = [r for r, _ in by_key.get(key, [])]
        if "overlapping" in text:
            problems.add("overlap", key, "DCP: " + text, ranks)
        elif "out of bounds" in text:
            problems.add("out_of_bounds", key, "DCP: " + text, ranks)
        elif "fill" in text:
            md = tensors_md.get(key)
            vol = sum(math.prod(c.sizes) for c in md.chunks) if md else 0
            full = math.prod(md.size) if md else 0
            problems.add("hole" if vol < full else "overlap", key, "DCP: " + text, ranks)
        else:
            problems.add("hole", key, "DCP: " + text, [])


def integrity_report(ctx, req):
    """The seam's integrity: Megatron's validate_sharding_integrity per key (regular grids: its access
    counter; irregular grids it defers) and the global save-plan validation of PyTorch DCP's
    coordinator (default_planner._validate_global_plan) on the metadata the coordinator would build
    from the main replicas' write items (exact copies de-duplicated, as dedup_save_plans does); the
    reference key set gives missing/unexpected keys. Problems: [{"kind", "key", "message", "ranks"}]."""
    M = ctx.M
    validation = ctx.need("validation", "sharding validation")
    try:
        from torch.distributed.checkpoint import default_planner
        from torch.distributed.checkpoint.metadata import TensorProperties, TensorStorageMetadata
    except ImportError as exc:
        raise Unsupported(f"PyTorch DCP planner: {exc}")
    if not hasattr(default_planner, "_validate_global_plan"):
        raise Unsupported("this torch has no default_planner._validate_global_plan")
    items = field(req, "entries")
    if not isinstance(items, list):
        raise BadRequest("entries must be a list")
    by_key, ranks_seen = _shardings_by_key(M, items)
    problems, tensors_md = _Problems(), {}
    for key, shardings in by_key.items():
        ranks = [r for r, _ in shardings]
        if isinstance(shardings[0][1], M.ShardedObject):
            for err in validation._validate_objects_for_key(shardings):
                text = str(err)
                problems.add("duplicate_object" if "Duplicate" in text else "missing_object", key, text, ranks)
        elif _megatron_grid(validation, problems, key, shardings):
            chunks = _dcp_chunks(M, shardings)
            tensors_md[key] = TensorStorageMetadata(properties=TensorProperties(),
                                                    size=torch_size(shardings[0][1].global_shape), chunks=chunks)
            if not chunks:
                problems.add("hole", key, "no main replica writes this key", ranks)
    _dcp_problems(default_planner, problems, tensors_md, by_key, max(2, len(ranks_seen)))
    if req.get("reference_keys") is not None:
        ref = set(str_list_field(req, "reference_keys"))
        for k in sorted(ref - set(by_key)):
            problems.add("missing_key", k, "in the reference key set, not saved")
        for k in sorted(set(by_key) - ref):
            problems.add("unexpected_key", k, "saved, not in the reference key set", [r for r, _ in by_key[k]])
    return {"ok": not problems.rows, "problems": problems.rows}


def torch_size(values):
    import torch
    return torch.Size([int(v) for v in values])
