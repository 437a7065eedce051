"""The real adapter started through its fork server (adapter.py --fork-server; docs/guides/mutation-testing.md):
the forked child imports Megatron itself, answers hello like a cold adapter, and measures coverage from before
Megatron's import (gate --coverage's variables reach the child, the server never imported coverage.py)."""

import json
import os
import subprocess
import sys

ADAPTER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "adapter.py")
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


def hello(env, tree):
    argv = [sys.executable, ADAPTER] + (["--megatron-path", tree] if tree else [])
    proc = subprocess.run(argv, input=json.dumps({"op": "hello", "protocol": 1}) + "\n", capture_output=True,
                          text=True, env=env, timeout=600)
    return json.loads(proc.stdout.splitlines()[0]), proc.stderr


def test_a_warm_start_answers_as_a_cold_one_and_measures_megatron_from_its_import(tmp_path, M, request):
    tree = request.config.getoption("--megatron-path")
    sock = str(tmp_path / "fork.sock")
    server = subprocess.Popen([sys.executable, ADAPTER, "--fork-server", sock] + ([tree] if tree else []),
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=BASE_ENV)
    try:
        server.stdin.write("status\n")
        server.stdin.flush()
        status = json.loads(server.stdout.readline())
        assert status["ok"] and (status["preloaded"] > 50) == bool(tree), status
        data = tmp_path / "coverage"
        data.mkdir()
        source = os.path.join(M.megatron_path, "megatron")
        warm, warm_err = hello(dict(BASE_ENV, IH_ADAPTER_FORK_SERVER=sock, IH_COVERAGE_DIR=str(data),
                                    IH_COVERAGE_SOURCE=source), tree)
        cold, _ = hello(BASE_ENV, tree)
        server.stdin.write("status\n")
        server.stdin.flush()
        assert json.loads(server.stdout.readline())["started"] == 1
    finally:
        server.stdin.close()
        server.wait(30)
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
