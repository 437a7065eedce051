#!/usr/bin/env python3
"""Per-rank peak memory of a GDP in_proj save under GTP: Megatron's gather design against the candidate
shard-split design (not Megatron's code), measured in the same run (build/bin/gtp_save_memory_bench).

Each rank of a gloo world (TP 1, GTP G) builds `layers` GDP mixers (the adapter's stand-in mixer,
Megatron's own sharded_state_dict and GTP wrapping) whose in_proj has the PR's production rows
(61,760 TP-local rows, p = 32) and fewer columns, then saves them with Megatron's
dist_checkpointing.save; once per design. The peak is the rank's resident-set high-water mark during
sharded_state_dict + save, above its resident set just before (Linux: /proc/self/clear_refs "5"
resets the mark); on CPU the gathered copies are process memory, so this is what the PR's claim is
about. The last line: `ratio gather/shard-split peak per rank: X` (the median rank's peaks).

  save_memory_bench.py --megatron-path DIR [--gtp G] [--cols C] [--layers L] [--pad P]
Exit 0 measured, 2 bad input, 3 a world failed, 5 the candidate cannot be applied to this checkout.
"""

import argparse
import os
import shutil
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, os.path.dirname(HERE))

PROD = {"rows": 61_760, "cols": 10_240, "layers": 72, "gtp": 64, "pad": 32, "bytes": 2}  # seed 003, spec 4.8


def _status_kib(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def task_save_memory(ctx, p):
    """World task: the rank's RSS high-water mark above its start during sharded_state_dict + save."""
    import gc

    from megatron_adapter.worlds import gdp_tasks
    import torch.distributed as dist
    from candidates import shard_split
    from megatron.core import dist_checkpointing
    mixers = [gdp_tasks.standin_mixer(ctx, p) for _ in range(int(p["layers"]))]
    gc.collect()
    dist.barrier()
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before = _status_kib("VmRSS")
    with shard_split.selected(p["design"]):
        sd = {}
        for i, (mod, _, mixer_cls) in enumerate(mixers):
            sd.update(mixer_cls.sharded_state_dict(mod, prefix=f"decoder.layers.{i}.mixer.", sharded_offsets=(),
                                                   metadata={"dp_cp_group": ctx.dp_cp_group}))
        if ctx.rank == 0:
            os.makedirs(p["dir"], exist_ok=True)
        dist.barrier()
        dist_checkpointing.save(sd, p["dir"])
        dist.barrier()
    peak = _status_kib("VmHWM")
    shard = mixers[0][1]
    return {"peak_bytes": (peak - before) * 1024, "shard_rows": int(shard.shape[0]),
            "shard_bytes": int(shard.numel() * shard.element_size()) * len(mixers)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megatron-path", required=True)
    ap.add_argument("--gtp", type=int, default=8)
    ap.add_argument("--cols", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--pad", type=int, default=PROD["pad"])
    args = ap.parse_args(argv)
    if not (1 < args.gtp <= 16 and 1 <= args.cols <= 4096 and 1 <= args.layers <= 8 and args.pad >= 0):
        print("ERROR: invalid_argument: need 1 < --gtp <= 16, 1 <= --cols <= 4096, 1 <= --layers <= 8, --pad >= 0",
              file=sys.stderr)
        return 2
    from megatron_adapter.megatron_import import load_megatron
    M = load_megatron(args.megatron_path)
    from candidates import shard_split
    applied = shard_split.install(M)
    if not applied["applied"]:
        print(f"NOT RUN: the candidate shard-split design cannot be applied here: {applied['reason']}")
        return 5
    from megatron_adapter.worlds import gdp_tasks, gloo_worlds, task_table
    torch = M.torch

    def zero_weight(ctx, rows, cols):  # the bench needs bytes, not the row codes the checks read
        return torch.zeros(rows, cols, dtype=torch.bfloat16)
    gdp_tasks.full_weight = zero_weight
    task_table.TASKS["save_memory"] = task_table.Task(task_save_memory, task_table.SAVES_ON_CPU)
    # The PR's row structure: 61,760 TP-local rows = 4 x (d_inner 10,240 + Gr*S 5,120 + heads 80), M = 3
    # (the gate's production case pr_61760_g64_p32; the seed gives D, not the split).
    sections, names = M.gdp._get_in_proj_checkpoint_split_layout(10_240, 5_120, 80, 3)
    rows = sum(sections)
    print(f"INFO: candidate shard-split design, not Megatron's code, against Megatron's gather design at "
          f"{M.megatron_path}")
    print(f"INFO: in_proj {rows} x {args.cols} bf16 (production {PROD['rows']} x {PROD['cols']}), {args.layers} "
          f"layers (production {PROD['layers']}), TP 1, GTP {args.gtp} (production {PROD['gtp']}), p {args.pad}; "
          f"scale: columns x{args.cols / PROD['cols']:.4g}, layers x{args.layers / PROD['layers']:.4g}")
    world = gloo_worlds.World(1, args.gtp, pool=gloo_worlds.WorldPool(M))
    peaks = {}
    try:
        for design in ("gather", "shard-split"):
            tmp = tempfile.mkdtemp(prefix="ih-save-memory-")
            try:
                out = world.run("save_memory", {"sections": sections, "names": names, "cols": args.cols,
                                                "pad_for_alignment": args.pad, "layers": args.layers,
                                                "design": design, "dir": os.path.join(tmp, "ckpt")}, timeout=900)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
            peaks[design] = [r["peak_bytes"] for r in out]
            print(f"{design}: per-rank peak bytes during save: median {statistics.median(peaks[design]):,.0f}, "
                  f"max {max(peaks[design]):,} (ranks: {', '.join(f'{b:,}' for b in peaks[design])}); "
                  f"shard {out[0]['shard_rows']} rows, {out[0]['shard_bytes']:,} bytes of shards per rank")
    except gloo_worlds.WorldError as exc:
        print(f"ERROR: harness_error: {exc}", file=sys.stderr)
        return 3
    finally:
        world.close()
    gathered = rows * args.cols * 2 * args.layers
    print(f"INFO: the gathered copies alone: {gathered:,} bytes per rank ({rows} x {args.cols} x 2 B x "
          f"{args.layers}); at the production shape {PROD['rows'] * PROD['cols'] * 2 * PROD['layers'] / 2**30:.1f} GiB")
    g, s = statistics.median(peaks["gather"]), statistics.median(peaks["shard-split"])
    print(f"ratio gather/shard-split peak per rank: {g / max(s, 1):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
