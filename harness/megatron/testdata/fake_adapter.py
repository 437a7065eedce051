#!/usr/bin/env python3
"""A stand-in for adapter.py in the Megatron client's unit tests (megatron_implementation_test.cc):
it speaks the line protocol of docs/adapter-protocol.md as the test scripts it, with no torch and no
Megatron.

The script is the JSON object in $IH_FAKE_ADAPTER:
  "hello":   what to do with the first request (default: a hello reply serving pattern_maps);
  "replies": what to do with each later request in turn (the last one repeats; default: the hello);
  "log":     a file that gets this process's arguments, then every request line it read.
Each action is a line to send as it is, or one of "!hang" (read on, never answer), "!crash" (write a
line on stderr and exit 3 without answering) and "!close" (exit 0 without answering).
"""

import json
import os
import sys
import time

HELLO = json.dumps({"ok": True, "protocol": 1, "megatron_version": "0.0-fake", "supports": ["pattern_maps"]})


def act(action):
    if action == "!hang":
        while True:
            time.sleep(60)
    if action == "!crash":
        print("fake adapter: crashed on purpose", file=sys.stderr, flush=True)
        sys.exit(3)
    if action == "!close":
        sys.exit(0)
    print(action, flush=True)


def main():
    script = json.loads(os.environ.get("IH_FAKE_ADAPTER", "{}"))
    log = open(script["log"], "a", encoding="utf-8") if "log" in script else None
    if log:
        print(json.dumps(sys.argv[1:]), file=log, flush=True)
    actions = [script.get("hello", HELLO)] + script.get("replies", [])
    for count, line in enumerate(sys.stdin):
        if log:
            print(line.rstrip("\n"), file=log, flush=True)
        act(actions[min(count, len(actions) - 1)])


if __name__ == "__main__":
    main()
