"""The adapter's start through a warm fork server (fork_server.py): hands this process's stdin, stdout and
stderr to the server, whose forked child serves the harness on them, and passes the child's exit code on.

Standard library only: it runs instead of the adapter's own imports, so it must start in milliseconds.
"""

import json
import os
import socket
import sys

ENV = "IH_ADAPTER_FORK_SERVER"  # the server's socket; `interop-harness mutate` sets it for its gate children


def start(script, argv, warm, serve):
    """An adapter script's entry (adapter.py's; the tests' stand-in's): `--fork-server SOCKET [TREE]` runs a fork
    server whose children run serve(argv) after warm(TREE or None) ran once; with ENV set this process is that
    server's client, and starts cold (serve(argv) here, after a line on stderr saying why) when the server cannot
    start it. Returns the exit code."""
    if argv[:1] == ["--fork-server"] and len(argv) in (2, 3):
        from megatron_adapter import fork_server
        tree = argv[2] if len(argv) == 3 else None
        return fork_server.main(argv[1], script, lambda: warm(tree), serve)
    if os.environ.get(ENV):
        code, why = handoff(os.environ[ENV], argv, script)
        if why is None:
            return code
        print(f"megatron-adapter: fork server {os.environ[ENV]} did not start this adapter ({why}): a cold start",
              file=sys.stderr, flush=True)
    return serve(argv)


def _message(sock):
    """The next message (a dict), or None at end of connection."""
    data = sock.recv(1 << 16)  # the server's and the child's messages are a few words
    return json.loads(data) if data else None


def handoff(socket_path, argv, adapter):
    """Asks the server at socket_path to run the adapter with `argv` (adapter.py's arguments) on this process's
    fds 0-2. Returns (exit code, None) once the forked adapter ended, or (None, why) when the adapter must start
    cold here: no server, or the server cannot give this start a warm process. Nothing of stdin is read before
    a child said it started, so a cold start after (None, why) sees every request."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.connect(socket_path)
        request = {"argv": list(argv), "env": dict(os.environ), "cwd": os.getcwd(), "pgid": os.getpgrp(),
                   "python": sys.executable, "adapter": os.path.realpath(adapter)}
        socket.send_fds(sock, [json.dumps(request).encode()], [0, 1, 2])
        first = _message(sock)
    except (OSError, ValueError) as exc:
        sock.close()
        return None, f"{type(exc).__name__}: {exc}"
    if first is None or "started" not in first:
        sock.close()
        return None, (first or {}).get("cold", "the fork server closed the connection before a child started")
    # From here the forked child serves; it watches this connection and dies if this process does.
    try:
        last = _message(sock)
    except OSError as exc:
        last, why = None, f"{type(exc).__name__}: {exc}"
    else:
        why = "the fork server ended before the adapter did"
    if last is None or "exit" not in last:
        print(f"megatron-adapter: {why}: its exit status is unknown", file=sys.stderr, flush=True)
        return 1, None
    return int(last["exit"]), None
