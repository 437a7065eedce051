#!/usr/bin/env python3
"""Copies a Megatron-LM tree and plants a self-consistent layout change in the copy (docs/roundtrip.md,
"Cross-version round trips"): Megatron's SwiGLU fc1 factory (apply_swiglu_sharded_factory) keys its two halves
at each other's offsets, W at V's fragment and V at W's. The build defines both the save and the load, so the
copy round-trips with itself; a checkpoint it writes holds V where every other tree reads W.

    plant_swiglu_swap.py SNAPSHOT DEST

Exit 0 with DEST holding the changed copy (DEST is replaced), 2 when the snapshot does not hold the code the
change is made in (the test is then skipped, never passed)."""

import pathlib
import sys

from plant_slip import plant

TARGET = "megatron/core/transformer/mlp.py"
# The two halves' offsets of the non-singleton branch, each replaced by the other's.
W_OFFSET = "offset_w = (swiglu_shard_axis + prepend_axis_num, rank_offset, axis_frag * 2)"
V_OFFSET = "rank_offset + axis_frag,\n                axis_frag * 2,\n            )"


def main(argv):
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source, dest = pathlib.Path(argv[1]), pathlib.Path(argv[2])
    status = plant(source, dest, TARGET, [
        (W_OFFSET, "offset_w = (swiglu_shard_axis + prepend_axis_num, rank_offset + axis_frag, axis_frag * 2)"),
        (V_OFFSET, "rank_offset,\n                axis_frag * 2,\n            )")], who="plant_swiglu_swap")
    if status != 0:
        return status
    print(f"plant_swiglu_swap: {dest / TARGET}: the SwiGLU halves W and V keyed at each other's offsets")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
