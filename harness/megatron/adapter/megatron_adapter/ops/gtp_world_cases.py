"""GTP cases run on Megatron's own GDP mixer code in persistent gloo worlds (worlds/gloo_worlds.py):
the request fields of a GTP factory, and the per-case save results every gtp_* op reads."""

import candidates

from megatron_adapter.error_kinds import ELECTION_FAILURE_KINDS, kind_of
from megatron_adapter.errors import BadRequest, OpError, Unsupported, is_int, boolean, field, integer, opt, \
    str_list_field, string
from megatron_adapter.megatron_import import require_importable, world_start_error
from megatron_adapter.worlds import gloo_worlds
from megatron_adapter.worlds import worker_context

MAX_WORLD_RANKS = 32  # one process per rank on this machine; MegatronImplementation::kMaxWorldRanks says the same


def gtp_params(req):
    """The seam's GtpFactoryParams fields of a gtp_* request, checked."""
    key = string(req, "key")
    if not key.endswith("in_proj.weight"):
        raise BadRequest("key must end with 'in_proj.weight' (a GDP or Mamba mixer's in_proj)")
    sections = field(req, "sections")
    names = str_list_field(req, "names")
    if not isinstance(sections, list) or not all(is_int(s) and s > 0 for s in sections) or len(sections) != len(names):
        raise BadRequest("sections must be positive integers, one per name")
    p = {"key": key, "sections": sections, "names": names,
         "tp_size": integer(req, "tp_size", minimum=1), "tp_rank": integer(req, "tp_rank", minimum=0),
         "gtp_size": integer(req, "gtp_size", minimum=1), "gtp_rank": integer(req, "gtp_rank", minimum=0),
         "pad_for_alignment": integer(req, "pad_for_alignment", minimum=0), "cols": integer(req, "cols", minimum=1),
         "dtype": opt(req, "dtype", "float32"), "design": design(req)}
    if p["tp_rank"] >= p["tp_size"] or p["gtp_rank"] >= p["gtp_size"]:
        raise BadRequest("tp_rank/gtp_rank out of range")
    if p["tp_size"] * p["gtp_size"] > MAX_WORLD_RANKS:
        raise Unsupported(f"a GTP world of more than {MAX_WORLD_RANKS} ranks (T*G) on this machine")
    if sum(sections) * p["cols"] > 4_000_000:
        raise BadRequest("in_proj larger than 4M elements is beyond this adapter's world")
    return p


def design(req):
    design = opt(req, "design", "gather")
    if design not in ("gather", "shard-split", "shard_split"):
        raise BadRequest("design must be \"gather\" or \"shard-split\"")
    return "gather" if design == "gather" else "shard-split"


def shard_split_reason(M):
    """Why the shard-split design cannot run through this adapter's worlds, or None when it can (the
    candidate is applied; Mamba's mixer keeps the gather design whatever is asked, spec 4.10)."""
    if M.candidate.get("applied"):
        return None
    if candidates.find_real_gtp_split_factory(M) is None:
        return "the shard-split design: " + candidates.not_in_checkout_reason()
    return ("the shard-split design with data through the adapter: the checkout's own "
            f"{candidates.REAL_GTP_SPLIT_FACTORY.name} is not wired into the worlds (only gtp_split, metadata)")


def _blocks(view, storage_of):
    if view is None:
        return None
    return [[storage_of[view["storage"]], view["first_row"], view["rows"]]]


def is_mamba(req):
    return req.get("mixer") == "mamba" or req.get("names") == ["z", "x", "B", "C", "dt"]


def gtp_available(M):
    """True when this Megatron has the GTP modules the worlds' patches target (else GTP ops are unsupported)."""
    return all(getattr(M, mod, None) is not None for mod in ("gtp", "gdp"))


def start_world(pool, tp, gtp, dp):
    """The (cached) world of this layout from the op context's pool. Start-up is the harness's own work (the
    patches, gloo, the groups): a world that cannot start is a harness error, never a verdict on Megatron
    (docs/megatron-patches.md)."""
    try:
        return pool.get(tp, gtp, dp, None)
    except gloo_worlds.WorldError as exc:
        raise world_start_error(pool.M, exc, "[world_failed]")


class GtpWorldCases:
    """gtp_pieces / gtp_merge / gtp_param_entry on Megatron's own GDP mixer code in a world."""

    def __init__(self, M, pool):
        self.M, self.pool = M, pool
        self.cache = {}  # case id -> per-rank gdp_save results

    def _case(self, p):
        import json
        return json.dumps([p["key"], p["sections"], p["names"], p["tp_size"], p["gtp_size"],
                           p["pad_for_alignment"], p["cols"], p["design"]])

    def world(self, p):
        """The world of a request's (tp_size, gtp_size) layout; unsupported without GTP and GDP."""
        require_importable(self.M, ("gdp", "gtp"), "a GTP world")
        if not gtp_available(self.M) or not hasattr(self.M.gdp, "GatedDeltaProductMixer"):
            raise Unsupported("GTP needs megatron.core.ssm.gated_delta_product and tensor_parallel."
                     "generalized_tensor_parallelism, not in megatron-core " + str(self.M.megatron_version))
        return start_world(self.pool, p["tp_size"], p["gtp_size"], 1)

    def save(self, p):
        """Every rank's gdp_save result for this case (cached)."""
        case = self._case(p)
        got = self.cache.get(case)
        world = self.world(p)
        if got is not None and got[0] is world.instance:
            return got[1], case, world
        payload = {"case": case, "prefix": p["key"][: -len("in_proj.weight")], "sections": p["sections"],
                   "names": p["names"], "cols": p["cols"], "pad_for_alignment": p["pad_for_alignment"],
                   "design": p["design"]}
        try:
            results = world.run("gdp_save", payload)
        except gloo_worlds.WorldTaskError as exc:
            raise exc.op_error()
        if len(self.cache) > 64:
            self.cache.clear()
        self.cache[case] = (world.instance, results)  # the workers' own state belongs to this start
        return results, case, world

    @staticmethod
    def raise_mixer_error(r):
        err = r.get("mixer_error")
        if err:
            raise OpError("megatron_error", f"{r.get('mixer', 'the mixer')}.sharded_state_dict raised {err['type']}: "
                          f"{err['message']}" + (f" (at {err['frame']})" if err.get("frame") else ""),
                          exception_type=err["type"], megatron_frame=err.get("frame"))

    def mine(self, p, results, world):
        return results[world.rank_of(0, p["tp_rank"], p["gtp_rank"])]

    def pieces(self, req):
        p = gtp_params(req)
        results, _, world = self.save(p)
        r = self.mine(p, results, world)
        storage_of = {"shard": req.get("shard_storage"), "gathered": req.get("gather_storage")}
        self.raise_mixer_error(r)
        if r.get("factory") is None:
            raise OpError("megatron_error", "the GDP mixer did not build a factory for in_proj.weight: "
                          + str(r.get("entry")))
        if r.get("gathered_rows_ok") is False:
            raise OpError("megatron_error", "the gathered in_proj is not the TP-local weight's real rows: "
                          + r.get("gathered_rows_problem", ""))
        out = []
        for piece in r["pieces"]:
            if piece.get("local"):
                item = {"kind": "local"}
                if piece.get("view") is not None and storage_of.get(piece["view"]["storage"]) is not None:
                    item["value"] = {"shape": [piece["rows"], p["cols"]], "dtype": p["dtype"],
                                     "blocks": _blocks(piece["view"], storage_of)}
                out.append(item)
                continue
            if "entry" not in piece:
                raise OpError("megatron_error", f"the in_proj factory built a {piece.get('other')}")
            entry = dict(piece["entry"])
            entry["dtype"] = p["dtype"]
            view = piece.get("view")
            if view is not None and storage_of.get(view["storage"]) is not None:
                entry["data"] = {"shape": list(entry["local_shape"]), "dtype": p["dtype"],
                                 "blocks": _blocks(view, storage_of)}
            out.append(entry)
        return {"design": p["design"] if r["factory"]["base"] == "shard" else "gather", "pieces": out, "factory_replica_id": r["factory"]["replica_id"],
                "gathered_rows": r["factory"]["data_rows"]}

    def merge(self, req):
        p = gtp_params(req)
        results, case, world = self.save(p)
        self.raise_mixer_error(self.mine(p, results, world))
        loaded = field(req, "loaded")
        bare = boolean(req, "bare", False)
        tensors = [loaded] if bare else loaded
        if not isinstance(tensors, list):
            raise BadRequest("loaded must be a list of tensors ({\"rows\", \"blocks\"})")
        index = {}
        codes_per = []
        for i, t in enumerate(tensors):
            if not isinstance(t, dict) or not isinstance(t.get("blocks"), list):
                raise BadRequest(f"loaded[{i}] must be tensor data {{\"shape\", \"blocks\"}}")
            codes = []
            for b in t["blocks"]:
                if not isinstance(b, list) or len(b) != 3 or not all(is_int(x) for x in b) or min(b) < 0:
                    raise BadRequest(f"loaded[{i}]: a block is [storage, first_row, rows]")
                s, first, n = b
                if len(codes) + n > 10_000_000:
                    raise BadRequest("loaded tensor too large")
                if s == 0:
                    codes.extend([0.0] * n)
                    continue
                k = index.setdefault(s, len(index))
                codes.extend(worker_context.row_code(k, first + j) for j in range(n))
            shape = t.get("shape") or [len(codes)]
            rows = shape[0] if isinstance(shape, list) and shape and is_int(shape[0]) else -1
            if rows != len(codes):
                raise BadRequest(f"loaded[{i}]: blocks cover {len(codes)} rows, rows says {rows}")
            codes_per.append(codes)
        per_rank = [None] * world.size
        per_rank[world.rank_of(0, p["tp_rank"], p["gtp_rank"])] = {
            "loaded": codes_per[0] if bare else codes_per, "bare": bare}
        try:
            results = world.run("gdp_merge", {"case": case, "cols": p["cols"], "per_rank": per_rank})
        except gloo_worlds.WorldTaskError as exc:
            raise exc.op_error()
        r = results[world.rank_of(0, p["tp_rank"], p["gtp_rank"])]
        if r.get("problem"):
            raise OpError("megatron_error", f"the in_proj factory's merge_fn gave a tensor with {r['problem']}")
        storage = {k: s for s, k in index.items()}
        blocks = []
        for src in worker_context.decode_rows(r["codes"]):
            s, row = (0, 0) if src is None else (storage.get(src[0], -1), src[1])
            if s == -1:
                raise OpError("megatron_error", "the merge produced a row no loaded tensor holds")
            last = blocks[-1] if blocks else None
            if last and last[0] == s and (s == 0 or last[1] + last[2] == row):
                last[2] += 1
            else:
                blocks.append([s, row if s else 0, 1])
        return {"shape": [r["rows"], p["cols"]], "dtype": p["dtype"], "blocks": blocks}

    def election(self, req):
        """gtp_param_entry of one global rank of an election world (spec addendum A)."""
        import json
        e = field(req, "election")
        if not isinstance(e, dict):
            raise BadRequest("election must be an object")
        sizes = ("tp", "gtp", "cp", "dp", "etp", "ep", "egtp")
        world = e.get("world")
        if not isinstance(world, dict) or not all(is_int(world.get(k)) and world[k] >= 1 for k in sizes):
            raise BadRequest(f"election.world needs positive integers {sizes}")
        n = world["tp"] * world["gtp"] * world["cp"] * world["dp"]
        if n > MAX_WORLD_RANKS:
            raise Unsupported(f"an election world of more than {MAX_WORLD_RANKS} ranks")
        if n % (world["etp"] * world["ep"] * world["egtp"]):
            raise BadRequest("the expert grid does not divide the world")
        glob = e.get("globals")
        key = string(req, "key")
        if not key.endswith("weight"):
            raise BadRequest("key must end with 'weight'")
        task = {"world": world, "globals": glob, "caller": bool(e.get("caller")), "expert": bool(e.get("expert")),
                "rows": integer(req, "rows", minimum=1), "cols": integer(req, "cols", minimum=1),
                "pad_for_alignment": integer(req, "pad_for_alignment", minimum=0), "key": key}
        rank = integer(e, "global_rank", "election", minimum=0)
        if rank >= n:
            raise BadRequest("election.global_rank outside the world")
        case = json.dumps(task, sort_keys=True)
        got = self.cache.get(case)
        if not gtp_available(self.M):
            raise Unsupported("GTP is not in megatron-core " + str(self.M.megatron_version))
        w = start_world(self.pool, 1, 1, n)
        if got is None or got[0] is not w.instance:
            try:
                results = w.run("election", task)
            except gloo_worlds.WorldTaskError as exc:
                raise exc.op_error()
            finally:
                # The election builds and destroys its own parallel_state on the borrowed world,
                # which a one-rank election shares with every (1, 1) op: point it back at the world's groups.
                if w.procs:
                    w.run("restore_parallel_state", {})
            self.cache[case] = (w.instance, results)
            got = self.cache[case]
        r = got[1][rank]
        if "error" in r:
            err = r["error"]
            kind = kind_of(err.get("facts"), ELECTION_FAILURE_KINDS) or "megatron_error"
            raise OpError(kind, f"{err['type']}: {err['message']}" + (f" (at {err['frame']})" if err.get("frame") else ""),
                          exception_type=err["type"], megatron_frame=err.get("frame"))
        entry = dict(r["entry"])
        entry["dtype"] = opt(req, "dtype", "float32")
        if r["view"] is not None and req.get("shard_storage") is not None:
            entry["data"] = {"shape": list(entry["local_shape"]), "dtype": entry["dtype"],
                             "blocks": [[req["shard_storage"], r["view"]["first_row"], r["view"]["rows"]]]}
        return {"entry": entry, "is_view": r["view"] is not None, "gtp_param": r["gtp_param"]}

    def param_entry(self, req):
        p = gtp_params(req)
        results, _, world = self.save(p)
        ranks = []
        for rank, r in enumerate(results):
            d, t, g = world.coords(rank)
            entry = dict(r["param_entry"])
            entry["dtype"] = p["dtype"]
            view = r.get("param_entry_view")
            ranks.append({"dp": d, "ep": 0, "tp": t, "gtp": g, "entry": entry, "is_view": view is not None,
                          "view": view})
        mine = ranks[world.rank_of(0, p["tp_rank"], p["gtp_rank"])]
        entry = dict(mine["entry"])
        if mine["view"] is not None and req.get("shard_storage") is not None:
            entry["data"] = {"shape": list(entry["local_shape"]), "dtype": p["dtype"],
                             "blocks": [[req["shard_storage"], mine["view"]["first_row"], mine["view"]["rows"]]]}
        return {"entry": entry, "is_view": mine["is_view"], "ranks": ranks}
