"""The real adapter started through its fork server (adapter.py --fork-server; docs/guides/mutation-testing.md):
the forked child imports Megatron itself, answers hello like a cold adapter, and measures coverage from before
Megatron's import (gate --coverage's variables reach the child, the server never imported coverage.py); its gloo
worlds, forked from it, answer an op as a cold adapter's do."""

import contextlib
import json
import os
import subprocess
import sys

import pytest
from test_ops import STORED, tensor_leaf  # a load_state request test_ops.py runs in a world

ADAPTER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "adapter.py")
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


HELLO = {"op": "hello", "protocol": 1}


def replies(env, tree, requests=(HELLO,)):
    argv = [sys.executable, ADAPTER] + (["--megatron-path", tree] if tree else [])
    proc = subprocess.run(argv, input="".join(json.dumps(r) + "\n" for r in requests), capture_output=True,
                          text=True, env=env, timeout=600)
    return [json.loads(line) for line in proc.stdout.splitlines()], proc.stderr


@contextlib.contextmanager
def fork_server(tmp_path, tree):
    """A running fork server: (its socket, a function answering its status)."""
    sock = str(tmp_path / "fork.sock")
    server = subprocess.Popen([sys.executable, ADAPTER, "--fork-server", sock] + ([tree] if tree else []),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=BASE_ENV)

    def status():
        server.stdin.write("status\n")
        server.stdin.flush()
        return json.loads(server.stdout.readline())
    try:
        assert status()["ok"]  # answered once it listens
        yield sock, status
    finally:
        server.stdin.close()
        server.wait(30)


def test_a_warm_start_answers_as_a_cold_one_and_measures_megatron_from_its_import(tmp_path, M, request):
    tree = request.config.getoption("--megatron-path")
    with fork_server(tmp_path, tree) as (sock, status):
        assert (status()["preloaded"] > 50) == bool(tree), status()
        data = tmp_path / "coverage"
        data.mkdir()
        source = os.path.join(M.megatron_path, "megatron")
        (warm,), warm_err = replies(dict(BASE_ENV, IH_ADAPTER_FORK_SERVER=sock, IH_COVERAGE_DIR=str(data),
                                         IH_COVERAGE_SOURCE=source), tree)
        (cold,), _ = replies(BASE_ENV, tree)
        assert status()["started"] == 1
    assert "cold start" not in warm_err, warm_err
    assert warm == cold and warm["ok"], (warm, cold)
    files = [f for f in os.listdir(data) if f.startswith(".coverage.")]
    assert files, "the warm child wrote no coverage data"
    subprocess.run([sys.executable, "-m", "coverage", "combine", "--quiet", f"--data-file={data}/.coverage",
                    str(data)], check=True)
    subprocess.run([sys.executable, "-m", "coverage", "json", "--quiet", f"--data-file={data}/.coverage", "-o",
                    str(data / "c.json")], check=True, cwd=M.megatron_path)
    measured = json.loads((data / "c.json").read_text())["files"]
    init = next(f for f in measured if f.endswith("megatron/core/__init__.py"))
    assert measured[init]["executed_lines"], "megatron/core/__init__.py's import was not measured"


LOAD = {"op": "load_state", "order": "serialization_load", "chunks": STORED, "objects": [], "common": {},
        "request": ["dict", [["w", tensor_leaf("w", 8)]]]}


@pytest.mark.worlds
def test_a_warm_starts_worlds_answer_as_a_cold_starts_do(tmp_path, gtp_ctx, request):
    tree = request.config.getoption("--megatron-path")
    with fork_server(tmp_path, tree) as (sock, status):
        warm, warm_err = replies(dict(BASE_ENV, IH_ADAPTER_FORK_SERVER=sock), tree, (HELLO, LOAD))
        assert status()["started"] == 1
    cold, _ = replies(BASE_ENV, tree, (HELLO, LOAD))
    assert "cold start" not in warm_err, warm_err
    assert warm == cold and warm[1]["ok"], (warm, cold)
    assert warm[1]["result"]["tree"] == ["dict", [["w", ["tensor", [8, 2], [[500, 0, 8]]]]]]
