"""Persistent gloo worlds that run Megatron's own GTP checkpoint code on CPU (docs/adapter-protocol.md).

A World is DP x T x G Python worker processes (rank = (d*T + t)*G + g) joined in one gloo
process group, with the groups Megatron's GTP code is handed: TP (same d, g), GTP remat (same
d, t), the GTP-inclusive dp_cp (same t) and the GTP-excluded DP group (same t, g) that GTP
params carry as gtp_replica_group. Workers import torch and Megatron once, apply the GPU-only
patches of megatron_patches.py, point parallel_state's TP/dp_cp globals at those groups (what
initialize_model_parallel would do), and then run tasks on request.

API (what the adapter and the round-trip scenarios use):

    world = get_world(tp=2, gtp=2, dp=1, megatron_path=None)   # cached by layout
    results = world.run("gdp_save", {...} or [per-rank dicts])  # one result per rank, rank order
    world.rank_of(d, t, g); world.size; world.startup_seconds; world.patches
    close_all()

Tasks (functions named task_<name> below) get (ctx, payload) and return picklable values. A
task that raises on any rank makes run() raise WorldTaskError naming the rank and Megatron's
frame; a rank that does not answer within the timeout kills the world (it is dropped from the
cache, the next get_world starts a fresh one). Every tensor a task builds is float64 whose rows
carry their provenance as a code (see row_code): Megatron's row logic does not depend on the
dtype, and float64 keeps every code exact.
"""

import os
import pickle
import queue
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback

ADAPTER_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
if ADAPTER_ROOT not in sys.path:  # run as a script (--worker): the package and candidates/ live there
    sys.path.insert(1, ADAPTER_ROOT)

from megatron_adapter.error_kinds import exception_facts  # noqa: E402
from candidates import shard_split  # noqa: E402 - selects the candidate design per task (inactive unless installed)

CODE_BASE = float(1 << 26)  # row codes: (source + 1) * CODE_BASE + row + 1; 0 = zero (pad) row


def row_code(source, row):
    return (source + 1) * CODE_BASE + row + 1


def decode_rows(values):
    """[(source, row) or None for a zero row] from a 1-D sequence of row codes."""
    out = []
    for v in values:
        v = float(v)
        if v == 0.0:
            out.append(None)
            continue
        q = int(v // CODE_BASE)
        out.append((q - 1, int(v - q * CODE_BASE) - 1))
    return out


class WorldError(Exception):
    """The world could not start or stopped answering."""


class WorldTaskError(Exception):
    """A task raised on a rank: Megatron (or the stand-in) failed on this input."""

    def __init__(self, rank, exc_type, message, frame, facts=()):
        super().__init__(f"rank {rank}: {exc_type}: {message}" + (f" (at {frame})" if frame else ""))
        self.rank, self.exc_type, self.message, self.frame = rank, exc_type, message, frame
        self.facts = list(facts)  # error_kinds.exception_facts of what the task raised


def _write_frame(f, obj):
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    f.write(struct.pack("<Q", len(data)))
    f.write(data)
    f.flush()


def _read_frame(f):
    head = f.read(8)
    if len(head) < 8:
        raise EOFError("world worker closed its pipe")
    (n,) = struct.unpack("<Q", head)
    data = f.read(n)
    if len(data) < n:
        raise EOFError("world worker closed its pipe mid-frame")
    return pickle.loads(data)


class World:
    """One persistent world of worker processes for a (dp, tp, gtp) layout."""

    def __init__(self, tp, gtp, dp=1, megatron_path=None, python=None, startup_timeout=180.0, timeout=120.0,
                 fork=True):
        """fork=True (default) forks the workers from this process, which must have imported
        Megatron already (megatron_import.load_megatron): start-up costs no import. fork=False starts
        fresh interpreters (python, default sys.executable) that import Megatron themselves."""
        self.tp, self.gtp, self.dp = int(tp), int(gtp), int(dp)
        if min(self.tp, self.gtp, self.dp) < 1 or self.size > 64:
            raise WorldError(f"world layout dp={dp} tp={tp} gtp={gtp} is not 1..64 ranks")
        self.megatron_path = megatron_path
        self.timeout = timeout
        self.dir = tempfile.mkdtemp(prefix="ih-gtp-world-")
        self.procs, self.replies = [], queue.Queue()  # (rank, frame) from every rank's reader thread
        t0 = time.monotonic()
        store = os.path.join(self.dir, "store")
        for rank in range(self.size):
            if fork:
                proc = _ForkedWorker(rank, self, store, timeout)
            else:
                cmd = [python or sys.executable, os.path.abspath(__file__), "--worker", "--rank", str(rank),
                       "--tp", str(self.tp), "--gtp", str(self.gtp), "--dp", str(self.dp), "--store", store,
                       "--timeout", str(int(max(30, timeout)))]
                if megatron_path:
                    cmd += ["--megatron-path", megatron_path]
                proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(os.path.join(self.dir, f"stderr_{rank}.txt"), "wb"))
            threading.Thread(target=self._reader, args=(rank, proc, self.replies), daemon=True).start()
            self.procs.append(proc)
        try:
            hellos = self._collect(startup_timeout, "start-up")
            if not all(h.get("ok") for h in hellos):
                bad = next(h for h in hellos if not h.get("ok"))
                raise WorldError(f"world start-up failed: {bad.get('type')}: {bad.get('message')}")
        except Exception:
            self.close()
            raise
        self.patches = hellos[0].get("patches", [])
        self.startup_seconds = round(time.monotonic() - t0, 2)

    @property
    def size(self):
        return self.tp * self.gtp * self.dp

    def rank_of(self, d, t, g):
        return (d * self.tp + t) * self.gtp + g

    def coords(self, rank):
        d, rest = divmod(rank, self.tp * self.gtp)
        t, g = divmod(rest, self.gtp)
        return d, t, g

    @staticmethod
    def _reader(rank, proc, replies):
        try:
            while True:
                replies.put((rank, _read_frame(proc.stdout)))
        except Exception as exc:  # noqa: BLE001 - EOF or a broken frame ends the reader
            replies.put((rank, {"eof": f"{type(exc).__name__}: {exc}"}))

    def stderr_tail(self, rank, n=3000):
        try:
            with open(os.path.join(self.dir, f"stderr_{rank}.txt"), "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    # After one rank reports an error its peers may wait forever in a collective it left: they get
    # this long to answer, then the world is closed and the failing rank's error is reported.
    PEER_GRACE_SECONDS = 5.0

    def _collect(self, timeout, what):
        """One reply per rank, in rank order. A rank that died, or no answer within `timeout`, closes
        the world (WorldError naming the rank, with its stderr). Once a rank answered with an error,
        the others get PEER_GRACE_SECONDS; those still silent then get a placeholder error and the
        world is closed, so a failed task costs seconds, not the whole timeout."""
        deadline = time.monotonic() + timeout
        out = [None] * self.size
        failed_at = None
        while any(r is None for r in out):
            limit = deadline if failed_at is None else min(deadline, failed_at + self.PEER_GRACE_SECONDS)
            try:
                rank, reply = self.replies.get(timeout=max(0.0, limit - time.monotonic()))
            except queue.Empty:
                if failed_at is not None:
                    self.close()
                    for r, x in enumerate(out):
                        if x is None:
                            out[r] = {"ok": False, "type": "WorldError", "peer_stuck": True,
                                      "message": f"no answer to {what} within {self.PEER_GRACE_SECONDS:.0f} s after "
                                                 "another rank failed (left waiting in a collective)"}
                    return out
                silent = next(r for r, x in enumerate(out) if x is None)
                message = (f"world dp={self.dp} tp={self.tp} gtp={self.gtp}: rank {silent} gave no answer to "
                           f"{what} within {timeout:.0f} s; its stderr:\n{self.stderr_tail(silent)}")
                self.close()
                raise WorldError(message)
            if "eof" in reply:
                message = f"world rank {rank} died during {what} ({reply['eof']}); its stderr:\n{self.stderr_tail(rank)}"
                self.close()
                raise WorldError(message)
            out[rank] = reply
            if not reply.get("ok") and failed_at is None:
                failed_at = time.monotonic()
        return out

    def run(self, task, payload, timeout=None):
        """Runs task_<task> on every rank: payload is one object for all or a list per rank."""
        if not self.procs:
            raise WorldError("the world is closed")
        per_rank = payload if isinstance(payload, list) else [payload] * self.size
        for proc, p in zip(self.procs, per_rank):
            try:
                _write_frame(proc.stdin, {"task": task, "payload": p})
            except (BrokenPipeError, OSError) as exc:
                self.close()
                raise WorldError(f"world worker pipe broken: {exc}")
        replies = self._collect(timeout or self.timeout, f"task {task}")
        # A rank's own error first; a peer left stuck by it is only the consequence.
        failed = [(rank, r) for rank, r in enumerate(replies) if not r.get("ok")]
        failed.sort(key=lambda item: bool(item[1].get("peer_stuck")))
        if failed:
            rank, r = failed[0]
            raise WorldTaskError(rank, r.get("type", "Exception"), r.get("message", ""), r.get("frame"),
                                     r.get("facts", ()))
        return [r["result"] for r in replies]

    def close(self):
        for proc in self.procs:
            try:
                if proc.poll() is None:
                    proc.stdin.close()
            except OSError:
                pass
            if isinstance(proc, _ForkedWorker):
                _PARENT_FDS.difference_update(proc.fds)
        deadline = time.monotonic() + 5
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)  # the store and the ranks' stderr files


_PARENT_FDS = set()  # pipe ends the parent holds for its forked workers (children close them)


class _ForkedWorker:
    """A worker forked from this process, with the Popen surface World uses."""

    def __init__(self, rank, world, store, timeout):
        r_req, w_req = os.pipe()
        r_rep, w_rep = os.pipe()
        err_path = os.path.join(world.dir, f"stderr_{rank}.txt")
        sys.stdout.flush()
        sys.stderr.flush()
        parent = os.getpid()
        pid = os.fork()
        if pid == 0:  # child
            code = 1
            try:
                keep = {r_req, w_rep}
                for fd in list(_PARENT_FDS) + [w_req, r_rep]:
                    if fd not in keep:
                        try:
                            os.close(fd)
                        except OSError:
                            pass
                err = os.open(err_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(err, 2)
                os.dup2(err, 1)
                null = os.open(os.devnull, os.O_RDONLY)
                os.dup2(null, 0)
                sys.stdin = open(os.devnull)
                code = worker_loop(os.fdopen(r_req, "rb"), os.fdopen(w_rep, "wb"), rank, world.tp, world.gtp,
                                   world.dp, store, int(max(30, timeout)), world.megatron_path, forked=True,
                                   parent=parent)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(r_req)
        os.close(w_rep)
        self.pid = pid
        self.fds = {w_req, r_rep}
        _PARENT_FDS.update(self.fds)
        self.stdin = os.fdopen(w_req, "wb")
        self.stdout = os.fdopen(r_rep, "rb")
        self.returncode = None

    def poll(self):
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                self.returncode = -1
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout=None):
        deadline = time.monotonic() + (timeout if timeout is not None else 1e9)
        while self.poll() is None:
            if time.monotonic() > deadline:
                raise subprocess.TimeoutExpired("world worker", timeout)
            time.sleep(0.02)
        return self.returncode

    def kill(self):
        try:
            os.kill(self.pid, 9)
        except ProcessLookupError:
            pass


_WORLDS = {}
MAX_WORLDS = 6  # least recently used worlds beyond this are closed


def get_world(tp, gtp, dp=1, megatron_path=None, **kwargs):
    """The cached world for this layout (started on first use; a dead one is replaced)."""
    key = (int(dp), int(tp), int(gtp), megatron_path)
    world = _WORLDS.pop(key, None)
    if world is None or not world.procs or any(p.poll() is not None for p in world.procs):
        if world is not None:
            world.close()
        while len(_WORLDS) >= MAX_WORLDS:
            _WORLDS.pop(next(iter(_WORLDS))).close()
        world = World(tp, gtp, dp, megatron_path, **kwargs)
    _WORLDS[key] = world  # most recently used last
    return world


def close_all():
    # Folders first: the harness gives the adapter about a second after end of input before it
    # kills it, less than closing several worlds' workers may take.
    for world in _WORLDS.values():
        shutil.rmtree(world.dir, ignore_errors=True)
    for world in list(_WORLDS.values()):
        world.close()
    _WORLDS.clear()


# ---------------------------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------------------------

class Ctx:
    """What a worker knows: Megatron, its coordinates and its groups."""


def _megatron_frame(tb):
    frame = None
    for fs in traceback.extract_tb(tb):
        if "/megatron/" in fs.filename.replace(os.sep, "/"):
            frame = f"{fs.filename.split('megatron/', 1)[-1]}:{fs.lineno} in {fs.name}"
    return frame


def _build_groups(ctx):
    import torch.distributed as dist
    T, G, D = ctx.tp_size, ctx.gtp_size, ctx.dp_size
    rank_of = lambda d, t, g: (d * T + t) * G + g  # noqa: E731
    ctx.tp_group = ctx.gtp_group = ctx.dp_cp_group = ctx.dp_excl_group = None
    for d in range(D):
        for g in range(G):
            grp = dist.new_group([rank_of(d, t, g) for t in range(T)], backend="gloo")
            if d == ctx.d and g == ctx.g:
                ctx.tp_group = grp
    for d in range(D):
        for t in range(T):
            grp = dist.new_group([rank_of(d, t, g) for g in range(G)], backend="gloo")
            if d == ctx.d and t == ctx.t:
                ctx.gtp_group = grp
    for t in range(T):
        grp = dist.new_group([rank_of(d, t, g) for d in range(D) for g in range(G)], backend="gloo")
        if t == ctx.t:
            ctx.dp_cp_group = grp
    for t in range(T):
        for g in range(G):
            grp = dist.new_group([rank_of(d, t, g) for d in range(D)], backend="gloo")
            if t == ctx.t and g == ctx.g:
                ctx.dp_excl_group = grp
    from megatron.core import parallel_state as ps
    # What initialize_model_parallel sets; the GTP-inclusive dp_cp is Megatron's default dp_cp.
    ps._TENSOR_MODEL_PARALLEL_GROUP = ctx.tp_group
    if hasattr(ps, "_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT"):
        # A Megatron with GTP: the default dp_cp includes the GTP remat axis; the plain globals
        # exclude it (the true replicas of a GTP shard).
        ps._DATA_PARALLEL_GROUP_WITH_GTP_REMAT = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP = ctx.dp_excl_group
        ps._DATA_PARALLEL_GROUP_WITH_CP = ctx.dp_excl_group
        ps._GTP_WEIGHT_REMAT_GROUP = ctx.gtp_group
    else:
        ps._DATA_PARALLEL_GROUP = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP_WITH_CP = ctx.dp_cp_group


def worker_main(argv):
    import argparse
    ap = argparse.ArgumentParser()
    ap.add_argument("--worker", action="store_true")
    ap.add_argument("--rank", type=int)
    ap.add_argument("--tp", type=int)
    ap.add_argument("--gtp", type=int)
    ap.add_argument("--dp", type=int)
    ap.add_argument("--store")
    ap.add_argument("--timeout", type=int, default=120)
    ap.add_argument("--megatron-path", default=None)
    args = ap.parse_args(argv)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return worker_loop(sys.stdin.buffer, out, args.rank, args.tp, args.gtp, args.dp, args.store, args.timeout,
                       args.megatron_path, forked=False, parent=os.getppid())


def _die_with_parent(parent):
    """A worker must not outlive the process that started it (the adapter killed alone, e.g. by a
    SIGKILL the harness's process-group kill did not reach): Linux sends it SIGKILL when that
    process dies. Elsewhere this is a no-op; the harness still ends the adapter's whole group."""
    try:
        import ctypes
        import signal
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # 1 = PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)


def worker_loop(inp, out, rank, tp, gtp, dp, store, timeout, megatron_path, forked, parent):
    _die_with_parent(parent)
    ctx = Ctx()
    ctx.rank, ctx.tp_size, ctx.gtp_size, ctx.dp_size = rank, tp, gtp, dp
    ctx.size = tp * gtp * dp
    ctx.d, rest = divmod(rank, tp * gtp)
    ctx.t, ctx.g = divmod(rest, gtp)
    ctx.megatron_path = megatron_path
    ctx.factories = {}
    try:
        import datetime
        import warnings
        warnings.filterwarnings("ignore")
        from megatron_adapter.megatron_import import load_megatron
        M = _PARENT_M if forked and _PARENT_M is not None else load_megatron(megatron_path)
        ctx.M, ctx.torch = M, M.torch
        M.torch.set_num_threads(1)
        from megatron_adapter import megatron_patches
        patches = megatron_patches.apply()
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method="file://" + store, rank=rank,
                                world_size=ctx.size, timeout=datetime.timedelta(seconds=timeout))
        _build_groups(ctx)
        _write_frame(out, {"ok": True, "patches": patches})
    except BaseException as exc:  # noqa: BLE001
        traceback.print_exc()
        _write_frame(out, {"ok": False, "type": type(exc).__name__, "message": str(exc)})
        return 1
    while True:
        try:
            req = _read_frame(inp)
        except EOFError:
            break
        try:
            fn = TASKS[req["task"]]
            result = fn(ctx, req["payload"])
            reply = {"ok": True, "result": result}
        except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
            traceback.print_exc()
            reply = {"ok": False, "type": type(exc).__name__, "message": str(exc)[:4000],
                     "frame": _megatron_frame(exc.__traceback__), "facts": exception_facts(exc)}
        _write_frame(out, reply)
    try:
        import torch.distributed as dist
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    return 0


_PARENT_M = None  # the Megatron namespace a forking parent imported (set_megatron)


def set_megatron(M):
    """Registers the parent's imported Megatron (megatron_import.load_megatron) for forked workers."""
    global _PARENT_M
    _PARENT_M = M


# ---- stand-ins ------------------------------------------------------------------------------

def _stand_in_classes(torch):
    from megatron.core.transformer.utils import ensure_metadata_has_dp_cp_group, make_sharded_tensors_for_checkpoint

    class InProj(torch.nn.Module):
        """Stands for TE's column-parallel in_proj: its sharded_state_dict is TE's (weight and bias
        TP-sharded on axis 0, the caller's dp_cp group) calling Megatron's own helper."""

        def __init__(self, weight, tp_group):
            super().__init__()
            self.weight = weight
            self._tp_group = tp_group

        def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
            metadata = ensure_metadata_has_dp_cp_group(metadata)
            state_dict = self.state_dict(prefix="", keep_vars=True)
            return make_sharded_tensors_for_checkpoint(state_dict, prefix, {"weight": 0, "bias": 0}, sharded_offsets,
                                                       tp_group=self._tp_group, dp_cp_group=metadata["dp_cp_group"])

    class Conv(torch.nn.Module):
        def __init__(self, rows):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.zeros(rows, 1, 4, dtype=torch.float64))

    return InProj, Conv


def _layout_dims(sections, names):
    """("gdp", d_inner, group_state, nheads, householder) or ("mamba", d_inner, group_state, nheads, 0)
    from an in_proj split layout."""
    if names == ["z", "x", "B", "C", "dt"]:
        return "mamba", sections[0], sections[2], sections[4], 0
    if "V0" not in names or names[0] != "z" or names[-1] != "a":
        raise ValueError(f"not a GDP or Mamba in_proj layout: {names}")
    m = sum(1 for n in names if n.startswith("V"))
    return "gdp", sections[0], sections[names.index("Q")], sections[-1], m


def _full_weight(ctx, rows, cols):
    """The TP-local weight before GTP: row r of TP rank t holds row_code(t, r)."""
    torch = ctx.torch
    full = torch.empty(rows, cols, dtype=torch.float64)
    for r in range(rows):
        full[r].fill_(row_code(ctx.t, r))
    return full


def _wrap_gtp(ctx, module, pad_for_alignment, replica_group):
    """Megatron's own post-init GTP path: wrap_module_params_gtp pads and slices the weight (and
    leaves it alone when the GTP group has one rank), stamping the caller's replica group."""
    gtp = ctx.M.gtp
    saved = gtp.GTP_CONFIG.pad_for_alignment
    gtp.GTP_CONFIG.pad_for_alignment = pad_for_alignment
    try:
        _call_wrap(gtp, module, ctx.gtp_group, replica_group=replica_group)
    finally:
        gtp.GTP_CONFIG.pad_for_alignment = saved
    module.weight.requires_grad_(False)
    return module.weight


def _call_wrap(gtp, module, group, replica_group=None, is_grouped=False):
    """wrap_module_params_gtp with the arguments this checkout's signature has (older checkouts
    stamp no replica group: their writer election is then whatever their code does)."""
    import inspect
    params = inspect.signature(gtp.wrap_module_params_gtp).parameters
    kwargs = {}
    if "replica_group" in params:
        kwargs["replica_group"] = replica_group
    if "is_grouped" in params and is_grouped:
        kwargs["is_grouped"] = is_grouped
    gtp.wrap_module_params_gtp(module, ["weight"], group, **kwargs)


def _standin_mixer(ctx, p):
    """A stand-in mixer (GDP or Mamba, by the layout's names) carrying the attributes and
    parameters that the mixer's sharded_state_dict reads, shaped as Megatron shapes them, with a
    GTP-wrapped in_proj. Returns (module, in_proj weight, the mixer class)."""
    torch = ctx.torch
    import types
    InProj, Conv = _stand_in_classes(torch)
    sections, names = list(p["sections"]), list(p["names"])
    kind, d_inner, group_state, nheads, m = _layout_dims(sections, names)
    mod = torch.nn.Module()
    mod.d_inner_local_tp, mod.ngroups_local_tp, mod.d_state, mod.nheads_local_tp = d_inner, 1, group_state, nheads
    for name in ("A_log", "dt_bias", "D"):
        mod.register_parameter(name, torch.nn.Parameter(torch.zeros(nheads, dtype=torch.float64), requires_grad=False))
    in_proj = InProj(torch.nn.Parameter(_full_weight(ctx, sum(sections), int(p["cols"])), requires_grad=False),
                     ctx.tp_group)
    weight = _wrap_gtp(ctx, in_proj, int(p["pad_for_alignment"]), ctx.dp_excl_group)
    if kind == "gdp":
        mod.num_householder = m
        mod.pg_collection = types.SimpleNamespace(tp=ctx.tp_group)
        mod.in_proj = in_proj
        mod.conv1d = Conv(d_inner * m + (1 + m) * group_state)
        return mod, weight, ctx.M.gdp.GatedDeltaProductMixer
    conv_dim = d_inner + 2 * group_state
    mod.tp_group = ctx.tp_group
    mod.register_parameter("conv1d_weight", torch.nn.Parameter(torch.zeros(conv_dim, 1, 4, dtype=torch.float64),
                                                               requires_grad=False))
    mod.register_parameter("conv1d_bias", torch.nn.Parameter(torch.zeros(conv_dim, dtype=torch.float64),
                                                             requires_grad=False))
    mod.in_proj = in_proj
    import importlib
    return mod, weight, importlib.import_module("megatron.core.ssm.mamba_mixer").MambaMixer


def _data_view(torch, tensor, base, base_id):
    """{"storage", "first_row", "rows"} when `tensor` is a row view of `base`, else None."""
    if tensor is None or base is None:
        return None
    if tensor.untyped_storage().data_ptr() != base.untyped_storage().data_ptr():
        return None
    if tensor.dim() == 0 or tensor.shape[1:] != base.shape[1:] or not tensor.is_contiguous():
        return None
    stride = base.stride(0) if base.dim() else 1
    delta = tensor.storage_offset() - base.storage_offset()
    if stride == 0 or delta % stride:
        return None
    return {"storage": base_id, "first_row": delta // stride, "rows": int(tensor.shape[0])}


def _st_json(st):
    return {"kind": "tensor", "key": st.key, "global_shape": list(st.global_shape),
            "global_offset": list(st.global_offset), "local_shape": list(st.local_shape),
            "axis_fragmentations": None if st.axis_fragmentations is None else list(st.axis_fragmentations),
            "replica_id": list(st.replica_id) if isinstance(st.replica_id, tuple) else st.replica_id,
            "prepend_axis_num": st.prepend_axis_num, "allow_shape_mismatch": bool(st.allow_shape_mismatch)}


# ---- tasks ----------------------------------------------------------------------------------

def task_ping(ctx, payload):
    return {"rank": ctx.rank, "coords": [ctx.d, ctx.t, ctx.g]}


def task_gdp_save(ctx, p):
    """Builds the stand-in GDP mixer and calls GatedDeltaProductMixer.sharded_state_dict unbound.
    Returns the GTP parameter's own entry (what the in_proj submodule built), the in_proj
    factory and its built pieces, with data described as views of the shard ("shard") or of the
    gathered buffer ("gathered"), and a check of the gathered rows' values."""
    torch, M = ctx.torch, ctx.M
    prefix = p.get("prefix", "decoder.layers.0.mixer.")
    mod, shard, mixer_cls = _standin_mixer(ctx, p)
    metadata = {"dp_cp_group": ctx.dp_cp_group}
    param_sd = mod.in_proj.sharded_state_dict(prefix=prefix + "in_proj.", metadata=dict(metadata))
    param_entry = param_sd[prefix + "in_proj.weight"]
    out = {"param_entry": _st_json(param_entry), "param_entry_dtype": str(param_entry.dtype),
           "param_entry_view": _data_view(torch, param_entry.data, shard, "shard"),
           "shard_rows": int(shard.shape[0]), "pad_length": int(getattr(shard, "pad_length", 0))}
    out["mixer"] = mixer_cls.__name__
    try:
        with shard_split.selected(p.get("design", "gather")):
            sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata=metadata)
    except Exception as exc:  # noqa: BLE001 - reported per op: the parameter entry does not depend on it
        out["mixer_error"] = {"type": type(exc).__name__, "message": str(exc)[:3000],
                              "frame": _megatron_frame(exc.__traceback__)}
        return out
    factory = sd[prefix + "in_proj.weight"]
    ctx.factories[p.get("case", "default")] = factory
    if isinstance(factory, M.ShardedTensorFactory):
        base = factory.data
        gathered = base is not None and base.untyped_storage().data_ptr() != shard.untyped_storage().data_ptr()
        base_id = "gathered" if gathered else "shard"
        out["factory"] = {"key": factory.key, "replica_id": list(factory.replica_id)
                          if isinstance(factory.replica_id, tuple) else factory.replica_id,
                          "data_rows": None if base is None else int(base.shape[0]), "base": base_id}
        built = factory.build()
        items = built if isinstance(built, list) else [built]
        pieces = []
        for x in items:
            if isinstance(x, M.ShardedTensor):
                pieces.append({"entry": _st_json(x), "view": _data_view(torch, x.data, base, base_id)})
            elif isinstance(x, M.LocalNonpersistentObject):
                obj = x.unwrap()
                pieces.append({"local": True, "rows": int(obj.shape[0]) if hasattr(obj, "shape") else None,
                               "view": _data_view(torch, obj, base, base_id) if hasattr(obj, "shape") else None})
            else:
                pieces.append({"other": type(x).__name__})
        out["pieces"] = pieces
        if gathered and base is not None:
            # The gathered buffer must be the TP-local weight's real rows, in order.
            want = [(ctx.t, r) for r in range(int(base.shape[0]))]
            got = decode_rows(base[:, 0].tolist()) if base.dim() == 2 else []
            out["gathered_rows_ok"] = got == want
            if got != want:
                bad = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) == len(want) else None
                out["gathered_rows_problem"] = (f"gathered {len(got)} rows, first wrong row {bad}: {got[bad] if bad is not None else ''}"
                                                if bad is not None else f"gathered {len(got)} rows, expected {len(want)}")
    else:
        out["factory"] = None
        out["entry"] = _st_json(factory) if isinstance(factory, M.ShardedTensor) else {"other": type(factory).__name__}
    return out


def task_gdp_save_unpatched(ctx, p):
    """task_gdp_save with the GPU-only patches undone: shows they are still needed (Megatron then
    skips its GTP branch and trips on the shard's size)."""
    from megatron_adapter import megatron_patches
    with megatron_patches.unpatched():
        try:
            out = task_gdp_save(ctx, dict(p, case="unpatched"))
        except Exception as exc:  # noqa: BLE001
            return {"failed": True, "error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    if out.get("mixer_error"):
        err = out["mixer_error"]
        return {"failed": True, "error": f"{err['type']}: {err['message'][:300]}", "frame": err.get("frame")}
    return {"failed": False, "pieces": len(out.get("pieces", []))}


def task_gdp_merge(ctx, p):
    """Calls the merge_fn of the factory task_gdp_save built for p["case"] on loaded tensors given
    as row codes (one list of codes per loaded tensor); returns the merged rows' codes."""
    torch = ctx.torch
    factory = ctx.factories.get(p.get("case", "default"))
    if factory is None:
        raise RuntimeError("no factory built for this case on this rank (call gdp_save first)")
    mine = p["per_rank"][ctx.rank] if isinstance(p.get("per_rank"), list) else p
    if mine is None:
        return None
    cols = int(p["cols"])

    def tensor(codes):
        t = torch.empty(len(codes), cols, dtype=torch.float64)
        for i, c in enumerate(codes):
            t[i].fill_(c)
        return t

    loaded = mine["loaded"]
    arg = tensor(loaded) if mine.get("bare") else [tensor(c) for c in loaded]
    merged = factory.merge_fn(arg)
    return {"rows": int(merged.shape[0]), "codes": merged[:, 0].tolist() if merged.dim() == 2 else []}


# ---- real save and load through dist_checkpointing (item 3) -----------------------------------

OPT_SOURCE = 50  # exp_avg rows carry row_code(OPT_SOURCE + t, x): distinct from the weight's


def _cpu_save_patches(torch):
    """What dist_checkpointing's synchronous save needs on a CPU-only machine (docs/megatron-patches.md,
    the same facts as docs/roundtrip.md): no CUDA to synchronize, a CPU device for the
    failure-flag broadcast, no psutil, and a thread queue instead of a Manager process."""
    out = []
    if not torch.cuda.is_available():
        torch.cuda.synchronize = lambda *a, **k: None
        torch.cuda.current_device = lambda: "cpu"
        out += ["torch.cuda.synchronize -> no-op", "torch.cuda.current_device -> 'cpu'"]
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
        out.append("filesystem_async._process_memory -> 0")
    if hasattr(filesystem_async, "_results_queue") and filesystem_async._results_queue is None:
        import queue as _q
        filesystem_async._results_queue = _q.Queue()
        out.append("filesystem_async._results_queue -> queue.Queue()")
    return out


def _rt_state_dict(ctx, p, fill_weight, fill_opt):
    """The GDP mixer's sharded state dict plus the in_proj's exp_avg keyed by the parameter's own
    (padded composite) entry through make_sharded_optimizer_tensor, as the distributed optimizer
    does. Returns (sharded state dict, weight param, exp_avg tensor)."""
    torch, M = ctx.torch, ctx.M
    prefix = "decoder.layers.0.mixer."
    mod, weight, mixer_cls = _standin_mixer(ctx, p)
    rows_per = weight.shape[0]
    exp_avg = torch.zeros_like(weight.data)
    D = sum(p["sections"])
    for j in range(rows_per):
        x = ctx.g * rows_per + j if getattr(weight, "is_gtp_weight_remat", False) else j
        if x < D:
            exp_avg[j].fill_(row_code(OPT_SOURCE + ctx.t, x))
    if fill_weight is not None:
        weight.data.fill_(fill_weight)
    if fill_opt is not None:
        exp_avg.fill_(fill_opt)
    metadata = {"dp_cp_group": ctx.dp_cp_group}
    param_entry = mod.in_proj.sharded_state_dict(prefix=prefix + "in_proj.", metadata=dict(metadata))[prefix + "in_proj.weight"]
    with shard_split.selected(p.get("design", "gather")):
        sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata=metadata)
    if p.get("optimizer", True):
        from megatron.core.dist_checkpointing.optimizer import make_sharded_optimizer_tensor
        sd["optimizer.exp_avg"] = make_sharded_optimizer_tensor(param_entry, exp_avg, "optimizer.state.exp_avg")
    return sd, weight, exp_avg


def task_rt_save(ctx, p):
    torch = ctx.torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    patches = _cpu_save_patches(torch)
    sd, weight, _ = _rt_state_dict(ctx, p, None, None)
    if ctx.rank == 0:
        os.makedirs(p["dir"], exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(sd, p["dir"])
    dist.barrier()
    out = {"patches": patches}
    if ctx.rank == 0:
        from torch.distributed.checkpoint import FileSystemReader
        meta = FileSystemReader(p["dir"]).read_metadata()
        stored = {}
        for key, md in meta.state_dict_metadata.items():
            if hasattr(md, "size"):
                stored[key] = {"size": list(md.size), "chunks": [[list(c.offsets), list(c.sizes)] for c in md.chunks]}
        out["stored"] = stored
    return out


def task_rt_load(ctx, p):
    torch = ctx.torch
    from megatron.core import dist_checkpointing
    _cpu_save_patches(torch)
    sentinel = row_code(999, 0)
    sd, weight, exp_avg = _rt_state_dict(ctx, p, sentinel, sentinel)
    loaded = dist_checkpointing.load(sd, p["dir"])
    w = loaded["decoder.layers.0.mixer.in_proj.weight"]
    o = loaded.get("optimizer.exp_avg")
    return {"weight": decode_rows(w[:, 0].tolist()), "exp_avg": None if o is None else decode_rows(o[:, 0].tolist()),
            "rows": int(w.shape[0]), "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}


def task_fresh_retarget(ctx, p):
    """Triage (b): the GDP/Mamba mixer's sharded state dict under GTP, retargeted to a GPT checkpoint
    with the mixer's layer fresh (gpt_checkpoint_interop), then what the in_proj entry became and
    what a load hands back in place of the parameter (dist_checkpointing.load_preprocess +
    merge of the nonpersistent part, Megatron's own code)."""
    torch, M = ctx.torch, ctx.M
    mod, weight, mixer_cls = _standin_mixer(ctx, p)
    prefix = "decoder.layers.0.mixer."
    sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata={"dp_cp_group": ctx.dp_cp_group})
    maps = M.interop.gpt_compatible_layer_maps(p["pattern"])
    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)
    entry = sd[prefix + "in_proj.weight"]
    out = {"entry_type": type(entry).__name__, "param_shape": list(weight.shape),
           "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}
    if isinstance(entry, M.LocalNonpersistentObject):
        obj = entry.unwrap()
        out["payload_shape"] = list(obj.shape) if hasattr(obj, "shape") else None
        out["payload_is_param"] = obj is weight or (hasattr(obj, "data_ptr") and obj.data_ptr() == weight.data_ptr())
        from megatron.core.dist_checkpointing.state_dict_utils import load_preprocess
        from megatron.core.dist_checkpointing.dict_utils import merge
        sharded, nonpersistent, factories = load_preprocess({"w": entry})
        loaded = {}
        merge(loaded, nonpersistent)
        got = loaded.get("w")
        out["loaded_shape"] = list(got.shape) if hasattr(got, "shape") else None
        try:
            weight.data.copy_(got)  # what load_state_dict's param.copy_(input) does
            out["copy_into_param"] = "ok"
        except Exception as exc:  # noqa: BLE001
            out["copy_into_param"] = f"{type(exc).__name__}: {str(exc)[:200]}"
    return out


def task_ordering(ctx, p):
    """Triage (c): the two load orderings of Megatron (serialization.load and
    MCoreTensorAwareStateDict.to_state_dict) on one rank tree whose in_proj factory builds what
    spec 4.7 says the shard split builds on an all-padding GTP rank: one LocalNonpersistentObject
    holding the (0, C) view; other ranks build their real piece. The factory is the candidate
    shard-split design's when it is installed (--candidate shard-split), else a plain
    ShardedTensorFactory that builds the same; everything else is Megatron's."""
    torch, M = ctx.torch, ctx.M
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
    _cpu_save_patches(torch)
    G, g, C, R = ctx.gtp_size, ctx.g, int(p["cols"]), int(p["shard_rows"])
    real = [max(0, min(R, int(p["rows"]) - x * R)) for x in range(G)]
    shard = torch.zeros(R, C, dtype=torch.float64)
    for j in range(real[g]):
        shard[j].fill_(row_code(g, j))
    key = "decoder.layers.0.mixer.in_proj.weight"

    def build(k, t, replica_id, flattened_range=None):
        if real[g] == 0:
            return [M.LocalNonpersistentObject(t[0:0])]
        return [M.ShardedTensor.from_rank_offsets(k + ".z", t[: real[g]], replica_id=replica_id)
                if G == 1 else M.ShardedTensor(k + ".z", t[: real[g]], t.dtype, (real[g], C), (sum(real), C),
                                              (sum(real[:g]), 0), None, replica_id, 0)]

    def merge(sub):
        part = sub[0]
        out = torch.zeros(R, C, dtype=torch.float64)
        out[: part.shape[0]] = part
        return out

    def tree(data):
        if shard_split.installed():  # the candidate's own factory over this rank's GTP shard entry
            orig = M.ShardedTensor.from_rank_offsets(key, data, (0, g, G), replica_id=(0, 0, 0))
            factory = shard_split.gtp_split_tensor_factory(M, orig, [int(p["rows"])], ["z"], g, 0, 1)
        else:
            factory = M.ShardedTensorFactory(key, data, build, merge, (0, 0, 0))
        return {"mixer": {"in_proj.weight": factory}, "local": M.LocalNonpersistentObject(500 + ctx.rank),
                "iteration": 7}

    out = {"factory": shard_split.LABEL if shard_split.installed() else "a stand-in of the design's factory"}
    import megatron.core.dist_checkpointing.tensor_aware_state_dict as tasd
    if p.get("assume_nvrx") and not tasd.HAVE_NVRX:
        # Triage only (docs/megatron-findings.md): to_state_dict's guard wants nvidia_resiliency_ext,
        # whose base class it does not use on this path; not applied by any gate check.
        tasd.HAVE_NVRX = True
        out["patched"] = "tensor_aware_state_dict.HAVE_NVRX -> True"
    d = p["dir"]
    if ctx.rank == 0:
        os.makedirs(d, exist_ok=True)
    dist.barrier()
    dist_checkpointing.save(tree(shard), d)
    dist.barrier()
    orders = (("serialization_load", lambda: dist_checkpointing.load(tree(torch.zeros(R, C, dtype=torch.float64)), d)),
              ("to_state_dict", lambda: MCoreTensorAwareStateDict.from_state_dict(tree(shard), algo="atomic")[0]
                      .to_state_dict(tree(torch.zeros(R, C, dtype=torch.float64)), algo="atomic")))
    for name, fn in orders[: 1 if p.get("serialization_only") else 2]:
        try:
            loaded = fn()
            w = loaded["mixer"]["in_proj.weight"]
            out[name] = {"ok": True, "rows": decode_rows(w[:, 0].tolist()), "keys": sorted(loaded)}
        except Exception as exc:  # noqa: BLE001
            out[name] = {"ok": False, "error": f"{type(exc).__name__}: {str(exc)[:300]}",
                         "frame": _megatron_frame(exc.__traceback__)}
        dist.barrier()
    return out


def task_single_expert(ctx, p):
    """Triage (a): one expert (E = 1). A GPT save writes an expert's _extra_state ShardedObject with
    the layer and expert axes (make_sharded_object_for_checkpoint over ((0, l, L), (1, e, E)));
    the hybrid run's object has the expert axis only, (1,)/(0,) when E = 1, which retargeting
    treats as the layer-axis placeholder. Real save, retarget, load (one rank)."""
    torch, M = ctx.torch, ctx.M
    from megatron.core import dist_checkpointing
    from megatron.core.transformer.utils import make_sharded_object_for_checkpoint
    _cpu_save_patches(torch)
    E, pattern = int(p["experts"]), p["pattern"]
    maps = M.interop.gpt_compatible_layer_maps(pattern)
    L = int(maps.num_gpt_layers)
    suffix = "mlp.experts.linear_fc1._extra_state{e_unused}"
    gpt = {}
    for hybrid_idx, gpt_idx in sorted(maps.mlp_to_gpt.items()):
        for e in range(E):
            key = "decoder.layers." + suffix.format(e_unused="")
            gpt[f"{gpt_idx}.{e}"] = make_sharded_object_for_checkpoint(
                {"layer": gpt_idx, "expert": e}, key, ((0, gpt_idx, L), (1, e, E)), replica_id=(0, 0, 0))
    d = p["dir"]
    os.makedirs(d, exist_ok=True)
    saved_keys = sorted(v.unique_key for v in gpt.values())
    try:
        dist_checkpointing.save(gpt, d)
    except BaseException as exc:  # noqa: BLE001
        return {"saved": saved_keys, "save_error": f"{type(exc).__name__}: {str(exc)[:400]}"}
    hybrid = {}
    for hybrid_idx in sorted(maps.mlp_to_gpt):
        for e in range(E):
            key = f"decoder.layers.{hybrid_idx}." + suffix.format(e_unused="")
            hybrid[f"{key}#{e}"] = make_sharded_object_for_checkpoint(None, key, ((0, e, E),), replica_id=(0, 0, 0))
    before = {k: v.unique_key for k, v in hybrid.items()}
    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(hybrid, maps)
    after = {k: v.unique_key for k, v in hybrid.items()}
    out = {"saved": sorted(v.unique_key for v in gpt.values()), "hybrid_before": before, "requested": after}
    try:
        loaded = dist_checkpointing.load(hybrid, d)
        out["load"] = {k: v for k, v in loaded.items()}
    except BaseException as exc:  # noqa: BLE001
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        out["load_error"] = f"{type(exc).__name__}: " + (lines[-1] if lines else "")[:400]
        out["frame"] = _megatron_frame(exc.__traceback__)
    return out


def _rows_tensor(torch, shape, codes):
    """A float64 tensor of `shape` whose index along dim 0 carries codes[i] (all other elements)."""
    t = torch.zeros(tuple(shape) if shape else (1,), dtype=torch.float64)
    for i, c in enumerate(codes):
        t[i].fill_(c) if t.dim() > 1 else t.__setitem__(i, c)
    return t if shape else t.reshape(())


def task_ckpt_save(ctx, p):
    """The harness's checkpoint written for real by Megatron's dist_checkpointing.save (one rank):
    every stored chunk as a ShardedTensor of row codes, objects, common values."""
    torch, M = ctx.torch, ctx.M
    from megatron.core import dist_checkpointing
    _cpu_save_patches(torch)
    save = _ckpt_tree(ctx, p)
    d = p["dir"]
    os.makedirs(d, exist_ok=True)
    dist_checkpointing.save(save, d, validate_access_integrity=False)
    return {"saved": len(save)}


def _ckpt_tree(ctx, p, replica_id=0):
    """The checkpoint's chunks, objects and common values as one state dict to save."""
    torch, M = ctx.torch, ctx.M
    save = {}
    boxes = {}
    for c in p["chunks"]:
        prepend = int(c["prepend_axis_num"])
        boxes.setdefault((c["key"], tuple(c["global_shape"])), []).append(
            (1,) * prepend + tuple(int(x) for x in c["local_shape"]))
    for i, c in enumerate(p["chunks"]):
        prepend = int(c["prepend_axis_num"])
        local = [int(x) for x in c["local_shape"]]
        data = _rows_tensor(torch, local, c["codes"])
        # the stored box, prepended axes as extent-1 dims of the data (DCP's chunk is the full box)
        data = data.reshape((1,) * prepend + tuple(local))
        gshape = tuple(c["global_shape"])
        shapes = set(boxes[(c["key"], gshape)])
        frag = None
        if len(shapes) == 1 and all(b and g % b == 0 for g, b in zip(gshape, tuple(data.shape))) \
                and all(o % b == 0 for o, b in zip(c["global_offset"], tuple(data.shape))):
            frag = tuple(g // b for g, b in zip(gshape, tuple(data.shape)))  # a regular grid
        save[f"chunk{i}"] = M.ShardedTensor(c["key"], data, data.dtype, tuple(data.shape), gshape,
                                            tuple(c["global_offset"]), frag, replica_id, 0)
    for j, (ukey, value) in enumerate(p["objects"]):
        key, _, rest = ukey.rpartition("/shard_")
        offsets, _, shape = rest.partition("_")
        save[f"object{j}"] = M.ShardedObject(key, ("ih-object", value), tuple(int(x) for x in shape.split(".")),
                                             tuple(int(x) for x in offsets.split(".")), replica_id)
    save.update(p["common"])
    return save


def _gtp_factory_for(ctx, f):
    """The real in_proj factory of this rank for a request's GTP factory leaf: the stand-in mixer
    of the leaf's layout in this world, its sharded_state_dict called (GatedDeltaProductMixer or
    MambaMixer, unbound: the GTP all-gather, pad strip and Megatron's split factory)."""
    key = f["key"]
    prefix = key[: -len("in_proj.weight")]
    mod, _, mixer_cls = _standin_mixer(ctx, f)
    with shard_split.selected(f.get("design", "gather")):
        sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(), metadata={"dp_cp_group": ctx.dp_cp_group})
    return sd[prefix + "in_proj.weight"]


def _retargeted_factory(ctx, e):
    """A factory that Megatron's retargeting returned, made again the way it was made: the real
    factory from its recipe (codec.py: ssm/utils' split factory or apply_swiglu_sharded_factory)
    over a real tensor, then retarget_sharded_state_dict_to_gpt_checkpoint for its pattern, which
    wraps its build (the GPT layer axis). Megatron's load then builds, loads and merges it."""
    from megatron_adapter.codec import Codec
    torch, M = ctx.torch, ctx.M
    factory = Codec(M).leaf(e["entry"], "retargeted")
    if factory.data is not None:
        factory.data = torch.zeros(tuple(factory.data.shape), dtype=torch.float64)
    holder = {"x": factory}
    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(holder, M.interop.gpt_compatible_layer_maps(e["pattern"]))
    out = holder["x"]
    if isinstance(out, M.ShardedTensorFactory):
        # One rank's request alone in a one-rank world (as for the request's tensors in
        # task_load_state): the built entries are handed to torch as self-describing chunks, or torch
        # would place every fragment of their regular grid on this one rank. Only the grid
        # description changes; keys, boxes, data and Megatron's merge are untouched.
        # Prepended axes become extent-1 dims of the data (DCP's irregular chunks carry no
        # prepend_axis_num); Megatron's merge gets its loaded tensors back in the built shapes.
        inner, inner_merge, shapes = out.build_fn, out.merge_fn, []

        def items(x):
            return list(x) if isinstance(x, (list, tuple)) else list(x.values()) if isinstance(x, dict) else [x]

        def build_fn(*args, **kwargs):
            built = inner(*args, **kwargs)
            shapes.clear()
            for x in items(built):
                shapes.append(tuple(x.local_shape) if isinstance(x, M.ShardedTensor) else None)
                if isinstance(x, M.ShardedTensor):
                    p = x.prepend_axis_num
                    if p:
                        x.local_shape = (1,) * p + tuple(x.local_shape)
                        if x.data is not None:
                            x.data = x.data.reshape(x.local_shape)
                        x.prepend_axis_num = 0
                    x.axis_fragmentations = None
            return built

        def merge_fn(sub):
            if isinstance(sub, list):
                sub = [v.reshape(sh) if sh is not None and isinstance(v, torch.Tensor) else v for v, sh in zip(sub, shapes)]
            elif isinstance(sub, dict):
                sub = {k: v.reshape(sh) if sh is not None and isinstance(v, torch.Tensor) else v
                       for (k, v), sh in zip(sub.items(), shapes)}
            elif isinstance(sub, torch.Tensor) and shapes and shapes[0] is not None:
                sub = sub.reshape(shapes[0])
            return inner_merge(sub)
        out.build_fn, out.merge_fn = build_fn, merge_fn
    return out


def task_load_state(ctx, p):
    """The seam's load_state on Megatron's own code: the request tree built on every rank of the
    world (a GTP factory leaf is this rank's real in_proj factory, built by the mixer's
    sharded_state_dict on the stand-in; every other leaf as given), then loaded along p["order"]:
    serialization.load from the checkpoint in p["dir"], or MCoreTensorAwareStateDict.to_state_dict
    of an in-memory state dict holding the checkpoint's chunks (the local-checkpoint path). Factories
    are built, loaded and merged by Megatron's load path itself; every rank returns its tree."""
    torch, M = ctx.torch, ctx.M
    from megatron.core import dist_checkpointing
    _cpu_save_patches(torch)
    requested = {}
    factories = p.get("factories") or {}

    def build(node, path):
        kind = node[0]
        if kind == "dict":
            return {k: build(v, path + (k,)) for k, v in node[1]}
        if kind == "list":
            return [build(v, path + (i,)) for i, v in enumerate(node[1])]
        e = node[1]
        if e["kind"] == "factory":
            return _gtp_factory_for(ctx, factories[str(e["factory_id"])])
        if e["kind"] == "retargeted_factory":
            return _retargeted_factory(ctx, e)
        if e["kind"] == "tensor":
            local = [int(x) for x in e["local_shape"]]
            prepend = int(e.get("prepend_axis_num", 0))
            full = (1,) * prepend + tuple(local)
            # one rank's request alone: described as an irregular chunk (same box, prepended axes as
            # extent-1 dims) so torch places no other fragment on this rank
            st = M.ShardedTensor(e["key"], torch.full(full, row_code(999, 0), dtype=torch.float64),
                                 torch.float64, full, tuple(e["global_shape"]), tuple(e["global_offset"]), None,
                                 tuple(e["replica_id"]) if isinstance(e.get("replica_id"), list) else e.get("replica_id", 0),
                                 0, allow_shape_mismatch=bool(e.get("allow_shape_mismatch")))
            requested[path] = tuple(local)
            return st
        if e["kind"] == "object":
            so = M.ShardedObject(e["key"], None, tuple(e["global_shape"]), tuple(e["global_offset"]),
                                 tuple(e["replica_id"]) if isinstance(e.get("replica_id"), list) else e.get("replica_id", 0))
            return so
        if e["kind"] == "local":
            return M.LocalNonpersistentObject(("ih-local", e.get("value")))
        return ("ih-plain", e.get("value"))

    tree = build(p["request"], ())
    if p["order"] == "to_state_dict":
        from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
        # This rank's local checkpoint holds every stored chunk (a superset of what it saved, so
        # every shard id the request asks is there); the atomic algorithm exchanges nothing.
        # cached_metadata given: the global integrity check of a save is not what is judged here.
        held = _ckpt_tree(ctx, p, replica_id=ctx.rank)
        tasd, _ = MCoreTensorAwareStateDict.from_state_dict(held, algo="atomic", cached_metadata=(None,) * 4)
        loaded = tasd.to_state_dict(tree, algo="atomic", validate_access_integrity=False)
    else:
        loaded = dist_checkpointing.load(tree, p["dir"], validate_access_integrity=False)

    def back(x, path=()):
        if isinstance(x, dict):
            return ["dict", [[k, back(v, path + (k,))] for k, v in x.items()]]
        if isinstance(x, list):
            return ["list", [back(v, path + (i,)) for i, v in enumerate(x)]]
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "ih-local":
            return ["local", x[1]]
        if isinstance(x, tuple) and len(x) == 2 and x[0] == "ih-plain":
            return ["plain", x[1]]
        if isinstance(x, (tuple, list)) and len(x) == 2 and x[0] == "ih-object":
            return ["object", x[1]]
        if isinstance(x, torch.Tensor):
            if path in requested and x.numel() == math.prod(requested[path]):
                x = x.reshape(requested[path])
            rows = x.reshape(x.shape[0], -1)[:, 0].tolist() if x.dim() else [float(x)]
            return ["tensor", list(x.shape), decode_rows(rows)]
        return ["value", x]

    import math
    return back(loaded)


def _rank_lists(gen, token):
    return [list(r) for r in gen.get_ranks(token)]


def task_election(ctx, p):
    """One rank of a writer-election world (spec addendum A): Megatron's RankGenerator builds the
    dense and expert grids of initialize_model_parallel; parallel_state is initialized by
    initialize_model_parallel itself (p["globals"]: the sizes it gets, possibly a foreign layout)
    or left uninitialized; the caller's GTP-excluded group is stamped on the parameter when
    p["caller"]. The parameter is wrapped by wrap_module_params_gtp and described by
    make_sharded_tensors_for_checkpoint, whose GTP branch elects the writer (gtp_replica_rank)."""
    torch, M = ctx.torch, ctx.M
    import torch.distributed as dist
    from megatron.core import parallel_state as ps
    size = dist.get_world_size()
    rank = dist.get_rank()
    w = p["world"]
    dense = ps.RankGenerator(tp=w["tp"], ep=1, dp=w["dp"], pp=1, cp=w["cp"],
                             order=ps._inject_gtp_remat_axis("tp-cp-ep-dp-pp", after="tp"), gtp_remat=w["gtp"])
    edp = size // (w["etp"] * w["ep"] * w["egtp"])
    expert = ps.RankGenerator(tp=w["etp"], ep=w["ep"], dp=edp, pp=1, cp=1,
                              order=ps._inject_gtp_remat_axis("tp-cp-ep-dp-pp", after="ep"), gtp_remat=w["egtp"])
    is_expert = bool(p["expert"])
    gen = expert if is_expert else dense
    wanted = {"tp": _rank_lists(gen, "tp"), "gtp": _rank_lists(gen, "gtp_remat"),
              "replica": _rank_lists(gen, "dp") if is_expert else _rank_lists(gen, "dp-cp"),
              "dp_cp_incl": _rank_lists(gen, "gtp_remat-dp") if is_expert else _rank_lists(gen, "gtp_remat-dp-cp"),
              "ep": _rank_lists(gen, "ep")}
    groups = {}
    for name, lists in wanted.items():  # every rank creates every group, in the same order
        for ranks in lists:
            g = dist.new_group(ranks, backend="gloo")
            if rank in ranks:
                groups[name] = (g, ranks)
    ps.destroy_model_parallel()
    if p.get("globals"):
        gl = p["globals"]
        ps.initialize_model_parallel(tensor_model_parallel_size=gl["tp"], context_parallel_size=gl["cp"],
                                     expert_model_parallel_size=gl["ep"], gtp_remat_size=gl["gtp"],
                                     expert_gtp_remat_size=gl["egtp"], expert_tensor_parallel_size=gl["etp"],
                                     create_gloo_process_groups=False)
    InProj, _ = _stand_in_classes(torch)
    from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint
    full = torch.empty(int(p["rows"]), int(p["cols"]), dtype=torch.float64)
    param = torch.nn.Parameter(full, requires_grad=False)
    if is_expert:
        param.allreduce = False  # a routed-expert weight: replicated over expert DP
    module = torch.nn.Module()
    module.weight = param
    gtp = M.gtp
    saved = gtp.GTP_CONFIG.pad_for_alignment
    gtp.GTP_CONFIG.pad_for_alignment = int(p["pad_for_alignment"])
    try:
        _call_wrap(gtp, module, groups["gtp"][0], is_grouped=is_expert,
                   replica_group=groups["replica"][0] if p.get("caller") else None)
    finally:
        gtp.GTP_CONFIG.pad_for_alignment = saved
    weight = module.weight
    offsets = ()
    if is_expert:
        ep_ranks = groups["ep"][1]
        offsets = ((0, ep_ranks.index(rank), len(ep_ranks)),)  # the expert axis experts prepend
    try:
        sd = make_sharded_tensors_for_checkpoint({"weight": weight}, p["key"][: -len("weight")], {"weight": 0}, offsets,
                                                 tp_group=groups["tp"][0], dp_cp_group=groups["dp_cp_incl"][0])
        entry = sd[p["key"]]
        out = {"entry": _st_json(entry), "view": _data_view(torch, entry.data, weight, "shard"),
               "gtp_param": bool(getattr(weight, "is_gtp_weight_remat", False))}
    except Exception as exc:  # noqa: BLE001
        out = {"error": {"type": type(exc).__name__, "message": str(exc)[:2000],
                         "frame": _megatron_frame(exc.__traceback__), "facts": exception_facts(exc)}}
    finally:
        ps.destroy_model_parallel()
        for g, _ in groups.values():
            pass
    return out


def task_restore_parallel_state(ctx, payload):
    """parallel_state's globals pointed back at this world's own groups (_build_groups again,
    collectively on every rank): an election builds and destroys its own on a borrowed world."""
    _build_groups(ctx)
    return True


TASKS = {name[len("task_"):]: fn for name, fn in dict(globals()).items() if name.startswith("task_")}


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        sys.exit(worker_main(sys.argv[1:]))
    print(__doc__)
