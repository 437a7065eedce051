"""Persistent gloo worlds that run Megatron's own GTP checkpoint code on CPU (docs/adapter-protocol.md).

A World is DP x T x G Python worker processes (rank = (d*T + t)*G + g) joined in one gloo
process group, with the groups Megatron's GTP code is handed: TP (same d, g), GTP remat (same
d, t), the GTP-inclusive dp_cp (same t) and the GTP-excluded DP group (same t, g) that GTP
params carry as gtp_replica_group. Workers import torch and Megatron once, hold the GTP flag
patches (the registry's "gtp" family, patches/table.py) for their life, point parallel_state's
TP/dp_cp globals at those groups (what initialize_model_parallel would do), and then run tasks on
request, each under the patch families its row of the task table names.

API (what the adapter and the round-trip scenarios use):

    pool = WorldPool(M)                                          # one per adapter process (its op context's)
    world = pool.get(tp=2, gtp=2, dp=1)                          # cached by layout
    results = world.run("gdp_save", {...} or [per-rank dicts])  # one result per rank, rank order
    world.rank_of(d, t, g); world.size; world.startup_seconds; world.patches
    pool.close_all()

Tasks (task_table.py: gdp_tasks.py, checkpoint_tasks.py) get (ctx, payload) and return picklable values. A
task that raises on any rank makes run() raise WorldTaskError naming the rank and Megatron's
frame; a rank that does not answer within the timeout kills the world (it is dropped from the
cache, the next get_world starts a fresh one). Every tensor a task builds is float64 whose rows
carry their provenance as a code (worker_context.row_code): Megatron's row logic does not depend on the
dtype, and float64 keeps every code exact.
"""

import contextlib
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
from megatron_adapter.worlds.task_table import TASKS  # noqa: E402
from megatron_adapter import coverage_run, patches  # noqa: E402
from megatron_adapter.errors import OpError  # noqa: E402
from megatron_adapter.worlds.worker_context import (Ctx, build_groups, destroy_groups_made_since, megatron_frame,  # noqa: E402
                                                   raised_in_harness, registered_groups, transport_failed)


class WorldError(Exception):
    """The world could not start or stopped answering."""


class WorldTaskError(Exception):
    """A task raised on a rank: Megatron (or the stand-in) failed on this input."""

    def __init__(self, rank, exc_type, message, frame, facts=(), in_harness=False, not_applicable=()):
        super().__init__(f"rank {rank}: {exc_type}: {message}" + (f" (at {frame})" if frame else ""))
        self.rank, self.exc_type, self.message, self.frame = rank, exc_type, message, frame
        self.facts = list(facts)  # error_kinds.exception_facts of what the task raised
        self.in_harness = in_harness  # raised in the adapter's own code (worker_context.raised_in_harness)
        self.not_applicable = list(not_applicable)  # the world's patches this checkout has no code for

    def kind(self, megatron_kind="megatron_error"):
        """harness_error when the adapter's own code raised, else megatron_kind."""
        return "harness_error" if self.in_harness else megatron_kind

    def op_error(self, prefix=""):
        """The OpError of this failure: Megatron's (megatron_error, with its frame) or the harness's."""
        where = " (raised in the adapter's own code, not Megatron's)" if self.in_harness else ""
        if self.not_applicable:
            where += (" [patches not applicable to this checkout, its code ran as it is: "
                      + ", ".join(self.not_applicable) + "]")
        return OpError(self.kind(), prefix + str(self) + where, exception_type=self.exc_type,
                       megatron_frame=self.frame)


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
                 fork=True, pool=None):
        """fork=True (default) forks the workers from this process, which must have imported Megatron
        already (the pool's M, megatron_import.load_megatron): start-up costs no import. fork=False starts
        fresh interpreters (python, default sys.executable) that import Megatron themselves."""
        self._start_args = dict(tp=tp, gtp=gtp, dp=dp, megatron_path=megatron_path, python=python,
                                startup_timeout=startup_timeout, timeout=timeout, fork=fork, pool=pool)
        self.pool = pool if pool is not None else WorldPool()
        self.instance = object()  # this start of the world: what its workers hold lives as long as it
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
        """Runs task_<task> on every rank: payload is one object for all or a list per rank. When gloo's
        transport fails under it (a peer process gone, seen intermittently in 16-32-rank worlds on 2
        cores), the world is started afresh and the task run once more: tasks are functions of their
        payload, and a second transport failure is the harness error it reports."""
        try:
            return self._run_once(task, payload, timeout)
        except WorldTaskError as exc:
            if not transport_failed(exc.message):
                raise
            print(f"world dp={self.dp} tp={self.tp} gtp={self.gtp}: task {task}: gloo's transport failed "
                  f"({exc.message[:200]}); restarting the world and running it once more", file=sys.stderr)
            self.close()
            self.__init__(**self._start_args)
            return self._run_once(task, payload, timeout)

    def _run_once(self, task, payload, timeout):
        if not self.procs:
            raise WorldError("the world is closed")
        per_rank = payload if isinstance(payload, list) else [payload] * self.size
        for proc, p in zip(self.procs, per_rank):
            try:
                _write_frame(proc.stdin, {"task": task, "payload": p, "coverage_context": coverage_run.current()})
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
                                 r.get("facts", ()), r.get("in_harness", False),
                                 [p["name"] for p in self.patches if p.get("not_applicable")])
        return [r["result"] for r in replies]

    def close(self):
        for proc in self.procs:
            try:
                if proc.poll() is None:
                    proc.stdin.close()
            except OSError:
                pass
            if isinstance(proc, _ForkedWorker):
                self.pool.parent_fds.difference_update(proc.fds)
        deadline = time.monotonic() + 5
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = []
        shutil.rmtree(self.dir, ignore_errors=True)  # the store and the ranks' stderr files


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
                for fd in list(world.pool.parent_fds) + [w_req, r_rep]:
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
                                   world.dp, store, int(max(30, timeout)), world.megatron_path, M=world.pool.M,
                                   parent=parent)
            except BaseException:  # noqa: BLE001
                traceback.print_exc()
            finally:
                os._exit(code)
        os.close(r_req)
        os.close(w_rep)
        self.pid = pid
        self.fds = {w_req, r_rep}
        world.pool.parent_fds.update(self.fds)
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


class WorldPool:
    """The persistent worlds of one adapter process by layout (its op context owns the pool), the Megatron its
    forked workers inherit, and the pipe ends it holds for them (each forked child closes them)."""

    MAX_WORLDS = 6  # least recently used worlds beyond this are closed

    def __init__(self, M=None):
        self.M = M
        self.worlds = {}  # (dp, tp, gtp, megatron_path) -> World, most recently used last
        self.parent_fds = set()

    def get(self, tp, gtp, dp=1, megatron_path=None, **kwargs):
        """The cached world for this layout (started on first use; a dead one is replaced)."""
        key = (int(dp), int(tp), int(gtp), megatron_path)
        world = self.worlds.pop(key, None)
        if world is None or not world.procs or any(p.poll() is not None for p in world.procs):
            if world is not None:
                world.close()
            while len(self.worlds) >= self.MAX_WORLDS:
                self.worlds.pop(next(iter(self.worlds))).close()
            world = World(tp, gtp, dp, megatron_path, pool=self, **kwargs)
        self.worlds[key] = world
        return world

    def close_all(self):
        # Folders first: the harness gives the adapter about a second after end of input before it
        # kills it, less than closing several worlds' workers may take.
        for world in self.worlds.values():
            shutil.rmtree(world.dir, ignore_errors=True)
        for world in list(self.worlds.values()):
            world.close()
        self.worlds.clear()


# ---------------------------------------------------------------------------------------------
# Worker side
# ---------------------------------------------------------------------------------------------


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
    coverage_run.start()  # a fresh interpreter measures itself (a forked worker inherits its parent's coverage)
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    return worker_loop(sys.stdin.buffer, out, args.rank, args.tp, args.gtp, args.dp, args.store, args.timeout,
                       args.megatron_path, M=None, parent=os.getppid())


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


def worker_loop(inp, out, rank, tp, gtp, dp, store, timeout, megatron_path, M, parent):
    """One worker: Megatron (the forking parent's M, else imported here), the GTP flag patches for its life,
    its gloo groups; then every task asked for, under the patch families its row names, until end of input."""
    _die_with_parent(parent)
    ctx = Ctx()
    ctx.rank, ctx.tp_size, ctx.gtp_size, ctx.dp_size = rank, tp, gtp, dp
    ctx.size = tp * gtp * dp
    ctx.d, rest = divmod(rank, tp * gtp)
    ctx.t, ctx.g = divmod(rest, gtp)
    ctx.megatron_path = megatron_path
    ctx.factories = {}
    with contextlib.ExitStack() as held:
        try:
            import warnings
            warnings.filterwarnings("ignore")
            from megatron_adapter.megatron_import import load_megatron
            ctx.M = M if M is not None else load_megatron(megatron_path)
            ctx.torch = ctx.M.torch
            ctx.M.torch.set_num_threads(1)
            ctx.gtp_patches = held.enter_context(patches.applied("gtp"))
            _join_world(ctx, store, timeout)
            _write_frame(out, {"ok": True, "patches": ctx.gtp_patches.rows})
        except BaseException as exc:  # noqa: BLE001 - start-up failed: the parent reads why
            traceback.print_exc()
            _write_frame(out, {"ok": False, "type": type(exc).__name__, "message": str(exc)})
            return 1
        _serve(ctx, inp, out)
    try:
        import torch.distributed as dist
        dist.destroy_process_group()
    except Exception:  # noqa: BLE001
        pass
    coverage_run.save()  # the worker ends in os._exit, which skips coverage.py's own save
    return 0


def _join_world(ctx, store, timeout):
    import datetime
    import gc
    import torch.distributed as dist
    dist.init_process_group("gloo", init_method="file://" + store, rank=ctx.rank, world_size=ctx.size,
                            timeout=datetime.timedelta(seconds=timeout))
    build_groups(ctx)
    gc.freeze()  # what Megatron's import made stays out of the collections after each task


def _serve(ctx, inp, out):
    """Runs each task asked for under its patch families (task_table.TASKS) and answers it; the process
    groups a task made are destroyed once it has answered."""
    while True:
        try:
            req = _read_frame(inp)
        except EOFError:
            return
        before = registered_groups()
        coverage_run.switch(req.get("coverage_context"))
        try:
            task = TASKS[req["task"]]
            with patches.applied(*task.patches) as ctx.task_patches:
                reply = {"ok": True, "result": task.run(ctx, req["payload"])}
        except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
            traceback.print_exc()
            reply = {"ok": False, "type": type(exc).__name__, "message": str(exc)[:4000],
                     "frame": megatron_frame(exc.__traceback__), "facts": exception_facts(exc),
                     "in_harness": raised_in_harness(exc)}
        _write_frame(out, reply)
        try:
            destroy_groups_made_since(before)
        except Exception:  # noqa: BLE001 - a group left alive costs CPU, not the answer already given
            traceback.print_exc()


if __name__ == "__main__":
    if "--worker" in sys.argv[1:]:
        sys.exit(worker_main(sys.argv[1:]))
    print(__doc__)
