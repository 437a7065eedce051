#!/usr/bin/env python3
"""Megatron adapter: answers the interop harness's questions with Megatron-LM's own code.

The script the harness launches (MegatronImplementation); the adapter itself is the package
megatron_adapter/ beside it (docs/adapter-protocol.md, "Package layout").

Usage: adapter.py [--megatron-path DIR] [--mutant NAME] [--candidate shard-split] [--fix to_state_dict_order]
       adapter.py --mutant-names
       adapter.py --fork-server SOCKET

  --mutant-names       print the names --mutant accepts, one a line, and exit: the mutant table alone,
                       without torch or Megatron (the harness refuses an unknown --mutant before it starts
                       the adapter)

  --fork-server SOCKET [TREE]
                       serve adapter starts warm on SOCKET (megatron_adapter/fork_server.py): torch, the adapter
                       and what Megatron's import (from TREE) loads from outside Megatron imported once, each
                       start a forked child importing Megatron itself from its own tree.
                       With IH_ADAPTER_FORK_SERVER=SOCKET in the environment, this script is that server's
                       client: it hands its stdin/stdout/stderr over and exits with the child's exit code (no
                       server, or a start it cannot serve warm: a line on stderr, and a cold start here)

  --megatron-path DIR  put DIR first on sys.path before importing megatron.core (a Megatron-LM
                       checkout instead of the installed megatron-core)
  --mutant NAME        apply one mutant (megatron_adapter/mutants.py) before serving, like the "mutate" op
  --candidate NAME     apply a candidate design (candidates/): "shard-split" is the harness's own
                       candidate of the pending GTP shard-split save (not Megatron's code), applied
                       only when the checkout has no factory of its own
  --fix NAME           apply a declared optional fix of Megatron's code (patches/table.py FIXES)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)


def print_mutant_names():
    """The names --mutant accepts, from the mutant table alone (no torch, no Megatron): fast enough to ask
    before every start."""
    from megatron_adapter import mutants
    print("\n".join(m.name for m in mutants.MUTANTS_TABLE))
    return 0


def serve(argv):
    """The adapter's main loop on this process's stdin/stdout: a cold start, or a fork server's child."""
    from megatron_adapter import coverage_run
    coverage_run.start()  # before Megatron's import, when the harness asked for coverage (gate --coverage)
    from megatron_adapter.server import main
    return main(argv)


def warm_imports(tree):
    """What a fork server's children inherit, never Megatron's own modules: torch, the adapter's modules and, with
    a tree, every module from outside it that importing its Megatron loads (most of that import's time), as a
    thrown-away probe found them."""
    import torch  # noqa: F401
    from megatron_adapter import fork_server, megatron_import, server  # noqa: F401
    return fork_server.preload(fork_server.in_probe(lambda: megatron_import.modules_outside(tree))) if tree else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--mutant-names"]:
        sys.exit(print_mutant_names())
    from megatron_adapter import fork_client
    sys.exit(fork_client.start(__file__, sys.argv[1:], warm_imports, serve))
