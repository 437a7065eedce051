"""The warm adapter's fork server (megatron_adapter/fork_server.py, fork_client.py) with a stand-in adapter
(fork_stand_in.py, no torch or Megatron): a start is served by a forked child on the client's own stdin/stdout,
in the client's process group and TMPDIR; its exit code comes back; a client killed alone takes its child with
it; no server, or an environment that differs, gives a cold start with a line saying why."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from megatron_adapter.fork_client import ENV

STAND_IN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fork_stand_in.py")
# The server's and the clients' environment (pytest's own variables change between a fixture and its test).
BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}


@pytest.fixture
def server(tmp_path):
    path = str(tmp_path / "fork.sock")
    proc = subprocess.Popen([sys.executable, STAND_IN, "--fork-server", path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=BASE_ENV)
    proc.status = lambda: (proc.stdin.write("status\n"), proc.stdin.flush(), json.loads(proc.stdout.readline()))[2]
    assert proc.status()["ok"]  # answered once it listens
    proc.path = path
    yield proc
    proc.stdin.close()
    assert proc.wait(10) == 0
    assert not os.path.exists(path), "the server left its socket behind"


def client(tmp_path, socket_path, extra_env=None):
    env = dict(BASE_ENV, TMPDIR=str(tmp_path), **{ENV: socket_path}, **(extra_env or {}))
    return subprocess.Popen([sys.executable, STAND_IN, "--megatron-path", "/x"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, process_group=0)


def who(proc):
    proc.stdin.write("who\n")
    proc.stdin.flush()
    return json.loads(proc.stdout.readline())


def gone(pid, seconds=10):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def test_a_start_is_a_forked_child_on_the_clients_streams_and_its_exit_code_comes_back(server, tmp_path):
    c = client(tmp_path, server.path)
    me = who(c)
    assert me["pid"] != c.pid, "served by the client itself, not a forked child"
    assert me["pgid"] == c.pid, "the child is not in the client's process group"
    assert me["tmpdir"] == str(tmp_path) and me["argv"] == ["--megatron-path", "/x"]
    c.stdin.write("exit 7\n")
    c.stdin.flush()
    assert c.wait(10) == 7
    assert c.stderr.read() == ""
    assert server.status()["started"] == 1


def test_a_client_killed_alone_takes_its_child_with_it(server, tmp_path):
    c = client(tmp_path, server.path)
    child = who(c)["pid"]
    c.stdin.write("sleep\n")
    c.stdin.flush()
    c.kill()  # the client alone, not its group
    c.wait(10)
    assert gone(child), "the forked adapter outlived its client"


def test_a_group_kill_ends_the_child_and_a_child_killed_by_a_signal_gives_128_plus_it(server, tmp_path):
    c = client(tmp_path, server.path)
    child = who(c)["pid"]
    os.kill(child, signal.SIGKILL)
    assert c.wait(10) == 128 + signal.SIGKILL
    c = client(tmp_path, server.path)
    child = who(c)["pid"]
    os.killpg(c.pid, signal.SIGKILL)  # what the harness does to stop an adapter
    c.wait(10)
    assert gone(child)


def test_no_server_is_a_cold_start_that_says_so(tmp_path):
    c = client(tmp_path, str(tmp_path / "none.sock"))
    assert who(c)["pid"] == c.pid
    c.stdin.write("exit 5\n")
    c.stdin.flush()
    assert c.wait(10) == 5
    err = c.stderr.read()
    assert "did not start this adapter" in err and "a cold start" in err, err


def test_a_server_gone_is_a_cold_start(server, tmp_path):
    server.stdin.close()
    assert server.wait(10) == 0
    c = client(tmp_path, server.path)
    assert who(c)["pid"] == c.pid
    c.stdin.close()
    assert c.wait(10) == 0
    assert "a cold start" in c.stderr.read()


def test_an_environment_that_differs_is_served_cold_naming_the_variable(server, tmp_path):
    c = client(tmp_path, server.path, {"IH_SOME_SETTING": "1"})
    assert who(c)["pid"] == c.pid
    c.stdin.close()
    assert c.wait(10) == 0
    err = c.stderr.read()
    assert "IH_SOME_SETTING" in err and "a cold start" in err, err
    assert server.status()["cold"] == 1
