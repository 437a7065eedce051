#!/usr/bin/env python3
"""Megatron adapter: answers the interop harness's questions with Megatron-LM's own code.

The script the harness launches (MegatronImplementation); the adapter itself is the package
megatron_adapter/ beside it (docs/adapter-protocol.md, "Package layout").

Usage: adapter.py [--megatron-path DIR] [--mutant NAME] [--candidate shard-split] [--fix to_state_dict_order]

  --megatron-path DIR  put DIR first on sys.path before importing megatron.core (a Megatron-LM
                       checkout instead of the installed megatron-core)
  --mutant NAME        apply one mutant (megatron_adapter/mutants.py) before serving, like the "mutate" op
  --candidate NAME     apply a candidate design (candidates/): "shard-split" is the harness's own
                       candidate of the pending GTP shard-split save (not Megatron's code), applied
                       only when the checkout has no factory of its own
  --fix NAME           apply a declared optional fix of Megatron's code (megatron_patches.FIXES)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)

from megatron_adapter.server import main  # noqa: E402 - needs HERE on sys.path

if __name__ == "__main__":
    sys.exit(main())
