"""The adapter's request reader (server.request_lines): whole lines however the bytes arrive, and the
idle hook that closes the worlds when no request comes."""

import os
import threading
import time

from megatron_adapter.server import request_lines


def test_lines_split_and_joined_across_reads_and_the_last_without_a_newline():
    r, w = os.pipe()
    os.write(w, b'{"op":"a"}\n{"op":')
    os.write(w, b'"b"}\n{"op":"c"}')
    os.close(w)
    assert list(request_lines(r, 5.0, lambda: None)) == [b'{"op":"a"}\n', b'{"op":"b"}\n', b'{"op":"c"}']
    os.close(r)


def test_idle_hook_runs_once_per_quiet_spell():
    r, w = os.pipe()
    calls = []

    def feed():
        os.write(w, b"first\n")
        time.sleep(0.5)  # a quiet spell of many idle periods: one call
        os.write(w, b"second\n")
        time.sleep(0.5)
        os.close(w)
    threading.Thread(target=feed).start()
    got = []
    for line in request_lines(r, 0.1, lambda: calls.append(len(got))):
        got.append(line)
    os.close(r)
    assert got == [b"first\n", b"second\n"]
    assert calls == [1, 2]
