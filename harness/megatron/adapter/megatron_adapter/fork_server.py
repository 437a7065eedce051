"""A warm adapter for a mutation campaign (`interop-harness mutate`; docs/guides/mutation-testing.md, "How a
mutant runs"): one process that has imported torch and the adapter's own modules, and forks a child per adapter
start, which imports Megatron fresh from its own tree and serves the harness on the starter's stdin, stdout and
stderr (fork_client.py hands them over with SCM_RIGHTS).

Megatron itself is never imported here: its modules bind each other's names at import (`from x import y`), so a
module of one mutant's tree, once imported, cannot be swapped for the next mutant's by reloading it; every child
imports all of Megatron from its own overlay. What a child inherits instead is what no mutant touches: the
interpreter, torch and the adapter.

Protocol (one SOCK_SEQPACKET connection per start, each message one JSON object):
  client -> server  {"argv", "env", "cwd", "pgid", "python", "adapter"} with fds 0, 1, 2 attached
  server -> client  {"cold": why}     this start cannot be warm (another Python or adapter, an environment that
                                      differs beyond WARM_SAFE_ENV): the client starts the adapter itself
  child  -> client  {"started": pid}  the forked child serves from now on
  server -> client  {"exit": code}    the child ended (code: its exit status, 128 + N for signal N)
A child joins the client's process group (a kill of the group, the harness's way to end an adapter, ends it too)
and dies with its group as soon as the client's end of the connection closes (the client killed alone).

Control: the server reads lines on stdin and answers each with one line of JSON status on stdout
({"ok", "socket", "warm_seconds", "preloaded", "started", "cold", "last_cold": why the last cold one was};
started and cold count the starts so far); end of stdin ends the server (children serving go on).
"""

import atexit
import json
import os
import random
import selectors
import signal
import socket
import sys
import tempfile
import threading
import time

MAX_MESSAGE = 1 << 20  # a start request: its environment, a few KiB

# What may differ between the server's environment and a client's: what the harness sets per run or per check,
# read after the warm imports (tempfile's folder is reset in each child; coverage starts in the child).
WARM_SAFE_ENV = ("TMPDIR", "IH_COVERAGE_DIR", "IH_COVERAGE_SOURCE", "IH_COVERAGE_CONTEXT", "COVERAGE_CORE",
                 "IH_ADAPTER_FORK_SERVER")


def why_cold(request, server_env, adapter):
    """Why a client's start cannot be served warm (None: it can)."""
    if request.get("python") != sys.executable:
        return f"the client runs {request.get('python')}, the fork server {sys.executable}"
    if request.get("adapter") != adapter:
        return f"the client's adapter is {request.get('adapter')}, the fork server's {adapter}"
    env = request.get("env", {})
    differ = sorted(k for k in set(env) | set(server_env) if k not in WARM_SAFE_ENV and env.get(k) != server_env.get(k))
    if differ:
        return "the environment differs from the fork server's in " + ", ".join(differ)
    return None


class ForkServer:
    def __init__(self, socket_path, adapter, run_child, env, warm_seconds):
        """run_child(argv) -> exit code: the adapter's main, run in each forked child; env: the environment
        before the warm imports (what a client's must match)."""
        self.path, self.adapter, self.run_child, self.env = socket_path, adapter, run_child, env
        self.status = {"ok": True, "socket": socket_path, "warm_seconds": round(warm_seconds, 3), "started": 0,
                       "cold": 0, "last_cold": None}
        self.children = {}  # pid -> the connection its exit status goes to
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if os.path.exists(socket_path):
            os.unlink(socket_path)
        self.listener.bind(socket_path)
        self.listener.listen(16)
        self.selector = selectors.DefaultSelector()
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        signal.set_wakeup_fd(self.wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd does the work
        self.control = os.fdopen(os.dup(1), "w", buffering=1)  # replies; fd 1 itself goes to stderr
        os.dup2(2, 1)

    def serve(self):
        """Until end of stdin: answers control lines, starts children, reports their ends."""
        self.selector.register(0, selectors.EVENT_READ, "control")
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(self.wake_r, selectors.EVENT_READ, "reap")
        pending = b""
        while True:
            for key, _ in self.selector.select():
                if key.data == "control":
                    chunk = os.read(0, 1 << 16)
                    if not chunk:
                        return self.close()
                    pending += chunk
                    while b"\n" in pending:
                        _, pending = pending.split(b"\n", 1)
                        self.control.write(json.dumps(self.status) + "\n")
                elif key.data == "accept":
                    self.accept()
                else:
                    os.read(self.wake_r, 4096)
                    self.reap()

    def accept(self):
        conn, _ = self.listener.accept()
        conn.settimeout(10)  # the client sends its request at once
        fds = []
        try:
            data, fds, _, _ = socket.recv_fds(conn, MAX_MESSAGE, 3)
            request = json.loads(data)
            if len(fds) != 3:
                raise ValueError(f"{len(fds)} descriptors, not 3")
        except (OSError, ValueError) as exc:
            print(f"fork server: a bad start request: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            for fd in fds:
                os.close(fd)
            conn.close()
            return
        why = why_cold(request, self.env, self.adapter)
        if why is not None:
            self.status["cold"] += 1
            self.status["last_cold"] = why
            _send(conn, {"cold": why})
            conn.close()
        else:
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:
                self.child(conn, fds, request)  # never returns
            self.status["started"] += 1
            self.children[pid] = conn
        for fd in fds:
            os.close(fd)

    def child(self, conn, fds, request):
        code = 70
        try:
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            for fd in (self.wake_r, self.wake_w, self.control.fileno()):
                os.close(fd)
            self.selector.close()
            self.listener.close()
            for other in self.children.values():
                other.close()
            _become_client_start(conn, fds, request)
            code = self.run_child(request["argv"])
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - the child must end here, never return into the server
            import traceback
            traceback.print_exc()
        finally:
            atexit._run_exitfuncs()  # what a cold adapter's exit runs (os._exit below must not return to the server)
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def reap(self):
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            conn = self.children.pop(pid, None)
            if conn is not None:
                code = os.waitstatus_to_exitcode(status)
                _send(conn, {"exit": code if code >= 0 else 128 - code})
                conn.close()

    def close(self):
        self.listener.close()
        os.unlink(self.path)
        return 0


def _send(conn, message):
    try:
        conn.send(json.dumps(message).encode())
    except OSError:
        pass  # the client is gone: nobody waits for this


def _become_client_start(conn, fds, request):
    """Turns the forked child into the process the client's start would have been: its stdin, stdout, stderr,
    working folder, environment (the server's as the warm imports left it, with the client's values of
    WARM_SAFE_ENV), arguments, process group and fresh random seeds."""
    conn.settimeout(None)
    conn.send(json.dumps({"started": os.getpid()}).encode())
    try:
        os.setpgid(0, int(request["pgid"]))
    except OSError:
        os.setpgid(0, 0)  # another session: a group of its own, still ended through the connection below
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    os.chdir(request["cwd"])
    for name in WARM_SAFE_ENV:
        if name in request["env"]:
            os.environ[name] = request["env"][name]
        else:
            os.environ.pop(name, None)
    tempfile.tempdir = None  # computed again from this start's TMPDIR
    sys.argv = [request["adapter"]] + list(request["argv"])
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    threading.Thread(target=_die_with_client, args=(conn,), daemon=True).start()


def _die_with_client(conn):
    """The client sends nothing after its request: any end of this wait is its end (killed alone, or its
    connection broken), and this start ends with it, its world workers included (its process group)."""
    try:
        conn.recv(1)
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def in_probe(fn):
    """fn()'s result (JSON) computed in a forked child that is thrown away: what importing Megatron would load,
    learnt without importing it here."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(r)
            with os.fdopen(w, "w") as out:
                json.dump(fn(), out)
            code = 0
        except BaseException:  # noqa: BLE001 - the probe must end here
            import traceback
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(w)
    with os.fdopen(r) as inp:
        text = inp.read()
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the probe failed (exit status {os.waitstatus_to_exitcode(status)})")
    return json.loads(text)


def preload(names):
    """Imports `names` in the order given (a module's import loads most of those after it); the number imported.
    A name without a spec of its own (a module some import registered under an alias) is left to that import."""
    import importlib
    import importlib.util
    count = 0
    for name in names:
        if name in sys.modules:
            continue
        try:
            if importlib.util.find_spec(name) is None:
                continue
        except (ImportError, ValueError):
            continue
        importlib.import_module(name)
        count += 1
    return count


def main(socket_path, adapter, warm, run_child):
    """Runs warm() (the imports every child inherits; returns how many modules it preloaded), then serves until
    end of stdin."""
    start, env = time.monotonic(), dict(os.environ)
    preloaded = warm() or 0
    loaded = sorted(m for m in sys.modules if m == "megatron" or m.startswith("megatron."))
    if loaded:  # never: a child must import every Megatron module from its own tree
        print(f"fork server: the warm imports loaded Megatron ({', '.join(loaded[:5])}): refusing to serve",
              file=sys.stderr, flush=True)
        return 3
    server = ForkServer(socket_path, os.path.realpath(adapter), run_child, env, time.monotonic() - start)
    server.status["preloaded"] = preloaded
    return server.serve()
