#!/usr/bin/env python3
"""SIGINT/SIGTERM of a run mid-way: exit 130/143, no process of the run left 5 s after the signal
(every descendant recorded before it, reparented ones included), and the run's TMPDIR empty.

Usage: run_pytest.sh interrupt_test.py --cli INTEROP_HARNESS --root SOURCE_DIR --case CASE
The Megatron cases run against the Megatron-LM snapshot of ci/megatron-snapshot.sh (it has GTP, so the
gate starts world workers); without one, against the installed megatron-core, interrupted once the
adapter is up.
  gate_sigint     gate --target megatron, SIGINT once the adapter's world workers are up
  gate_sigterm    the same with SIGTERM
  mutants         mutants --target megatron, SIGTERM once world workers are up
  roundtrip       roundtrip --all --save-ranks 4 --load-ranks 2, SIGINT once mpirun's ranks are up
  properties      a long properties run (no children), SIGINT after 2 s
Exit 77 (skipped) when the Megatron venv is not installed for the cases that need it."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

VENV_PYTHON = os.path.join(os.environ.get("INTEROP_MEGATRON_VENV",
                                          os.path.expanduser("~/.cache/interop-harness/megatron-venv")), "bin", "python")
GRACE_S = 5.0


def proc_stat(pid):
    """(ppid, pgrp, state, starttime) of a live pid, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[2]), fields[0], int(fields[19])


def cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode("utf-8", "replace")
    except OSError:
        return ""


def descendants(root):
    """{pid: (starttime, cmdline)} of every live descendant of root."""
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            st = proc_stat(int(name))
            if st:
                children.setdefault(st[0], []).append(int(name))
    out, todo = {}, [root]
    while todo:
        for child in children.get(todo.pop(), []):
            st = proc_stat(child)
            if st and st[2] != "Z":
                out[child] = (st[3], cmdline(child))
                todo.append(child)
    return out


def still_running(recorded):
    """The recorded processes that still run (same pid and start time, not a zombie)."""
    left = {}
    for pid, (start, line) in recorded.items():
        st = proc_stat(pid)
        if st and st[3] == start and st[2] != "Z":
            left[pid] = line
    return left


CASES = {
    # argv, signal, what must be running before the signal, needs the venv
    "gate_sigint": (["gate", "--target", "megatron"], signal.SIGINT, "world workers", True),
    "gate_sigterm": (["gate", "--target", "megatron"], signal.SIGTERM, "world workers", True),
    "mutants": (["mutants", "--target", "megatron"], signal.SIGTERM, "world workers", True),
    "roundtrip": (["roundtrip", "--all", "--save-ranks", "4", "--load-ranks", "2", "--timeout", "240"], signal.SIGINT,
                  "mpirun ranks", True),
    "properties": (["properties", "--cases", "100000"], signal.SIGINT, None, False),
}


def megatron_snapshot(source_dir):
    out = subprocess.run(["bash", os.path.join(source_dir, "ci", "megatron-snapshot.sh")], capture_output=True,
                         text=True)
    path = out.stdout.strip().splitlines()[-1] if out.returncode == 0 and out.stdout.strip() else ""
    return path if os.path.isdir(path) else None


def ready(tree, what):
    """True once the run has started what the case must interrupt."""
    if what in ("world workers", "the adapter"):  # the adapter (a child), then its forked world workers
        adapters = [p for p, (_, line) in tree.items() if "adapter.py" in line]
        return bool(adapters) if what == "the adapter" else any(
            proc_stat(p) and proc_stat(p)[0] in adapters for p in tree)
    if what == "mpirun ranks":
        return sum("roundtrip_world.py" in line and "mpirun" not in line for _, line in tree.values()) >= 2
    return True


def start(cli, argv, tmp):
    """The run, in a session of its own (the test's signal only, not a terminal's), its output to a log."""
    out_path = os.path.join(os.path.dirname(tmp), os.path.basename(tmp) + ".log")
    with open(out_path, "wb") as log:
        run = subprocess.Popen([cli, *argv], stdout=log, stderr=subprocess.STDOUT, env=dict(os.environ, TMPDIR=tmp),
                               start_new_session=True)
    return run, out_path


def record_until_ready(run, what):
    """{pid: (start, cmdline)} of every process of the run seen until `what` is up (then a second more)."""
    recorded, started, deadline = {}, time.monotonic(), time.monotonic() + 400
    while True:
        tree = descendants(run.pid)
        recorded.update(tree)
        assert run.poll() is None, f"the run ended (exit {run.returncode}) before {what} were up"
        if ready(tree, what) and (what or time.monotonic() - started > 2):
            time.sleep(1.0)  # mid-run: let whatever starts with them start too
            recorded.update(descendants(run.pid))
            return recorded
        assert time.monotonic() < deadline, f"{what} not up within 400 s"
        time.sleep(0.2)


def interrupt(run, sig, recorded):
    """Sends the signal: (exit code or None, the recorded processes still running GRACE_S after it)."""
    sent = time.monotonic()
    os.kill(run.pid, sig)
    try:
        rc = run.wait(timeout=GRACE_S + 5)
    except subprocess.TimeoutExpired:
        rc = None
    exited_after = time.monotonic() - sent
    left = still_running(recorded)
    while left and time.monotonic() - sent < GRACE_S:
        time.sleep(0.1)
        left = still_running(recorded)
    print(f"{signal.Signals(sig).name}: exit {rc} after {exited_after:.2f} s; "
          f"{len(recorded) - len(left)}/{len(recorded)} processes gone after {time.monotonic() - sent:.2f} s")
    return rc, left


def end_what_is_left(run, recorded, out_path):
    """Never leave our own run behind, even when failing; its output's tail printed."""
    if run.poll() is None:
        os.killpg(run.pid, signal.SIGKILL)
        run.wait()
    for pid in still_running(recorded):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    with open(out_path, "rb") as f:
        tail = f.read()[-3000:].decode("utf-8", "replace")
    os.unlink(out_path)
    print("--- the run's output (tail) ---\n" + tail)


def test_interrupt(cli, root, pytestconfig):
    case = pytestconfig.getoption("--case")
    argv, sig, what, needs_venv = CASES[case]
    if needs_venv and not os.path.exists(VENV_PYTHON):
        pytest.skip(f"no Megatron venv at {VENV_PYTHON} (bash ci/install-megatron.sh)")
    if what == "world workers":
        snapshot = megatron_snapshot(root)
        if snapshot:
            argv = argv + ["--megatron-path", snapshot]
        else:
            print("no Megatron-LM snapshot: the installed megatron-core (no GTP) starts no world workers")
            what = "the adapter"
    tmp = tempfile.mkdtemp(prefix="ih-interrupt-test-")
    try:
        run, out_path = start(cli, argv, tmp)
        recorded = {}
        try:
            recorded = record_until_ready(run, what)
            print(f"{len(recorded)} processes of the run before the signal:")
            for pid, (_, line) in sorted(recorded.items()):
                print(f"  {pid} {line[:120]}")
            rc, left = interrupt(run, sig, recorded)
            leftovers = [os.path.relpath(os.path.join(d, n), tmp) for d, dirs, files in os.walk(tmp)
                         for n in dirs + files]
            print(f"{len(leftovers)} entries left in the run's TMPDIR")
        finally:
            end_what_is_left(run, recorded, out_path)
        assert rc == 128 + int(sig), f"exit code {rc}, expected {128 + int(sig)}"
        assert not left, (f"{len(left)} processes still running {GRACE_S:.0f} s after the signal: "
                          + "; ".join(f"{p} {line[:100]}" for p, line in sorted(left.items())))
        assert not leftovers, f"{len(leftovers)} entries left in TMPDIR: " + ", ".join(sorted(leftovers)[:20])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
