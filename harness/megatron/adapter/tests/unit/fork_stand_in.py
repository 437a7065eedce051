"""A stand-in adapter script for the fork server's tests (test_fork_server.py): adapter.py's entry
(fork_client.start) around a serve loop without torch or Megatron. Commands on stdin, one a line:
`who` prints {"pid", "pgid", "tmpdir", "argv"}; `exit N` ends with exit code N; `sleep` blocks."""

import json
import os
import sys
import time

sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from megatron_adapter import fork_client  # noqa: E402


def serve(argv):
    for line in sys.stdin:
        word = line.split()
        if word[0] == "who":
            print(json.dumps({"pid": os.getpid(), "pgid": os.getpgrp(), "tmpdir": os.environ.get("TMPDIR"),
                              "argv": argv}), flush=True)
        elif word[0] == "exit":
            return int(word[1])
        elif word[0] == "sleep":
            time.sleep(3600)
    return 0


if __name__ == "__main__":
    sys.exit(fork_client.start(__file__, sys.argv[1:], lambda tree: None, serve))
