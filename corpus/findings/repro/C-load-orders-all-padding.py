"""Finding C as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python C-load-orders-all-padding.py --megatron-path DIR

Two gloo ranks on CPU. Each rank's GDP in_proj shard (R = 16 rows of which rank 0 holds the 6 real
rows and rank 1 only padding) is handed to dist_checkpointing through a ShardedTensorFactory that
builds what the shard-split design (spec 4.7, the PR of seed 003) builds: the rank's real rows as a
ShardedTensor, or on the all-padding rank one zero-element LocalNonpersistentObject. That factory
is this script's, written from the design's description: no factory in the snapshot builds a
LocalNonpersistentObject, so this is a hazard of the design against Megatron's to_state_dict, not a
finding of the snapshot's own save path.

The tree is saved with dist_checkpointing.save and loaded with both of Megatron's orderings:
dist_checkpointing.load (serialization.load) and MCoreTensorAwareStateDict.from_state_dict(...)
.to_state_dict(...). Exit 1 while the orderings disagree (the finding reproduces), 0 when both give
the same tree, 3 when the script itself could not run.

Declared shims (each lifts a CPU-only or optional-package guard; none touches the code under test):
- torch.cuda.synchronize -> no-op, torch.cuda.current_device -> "cpu": no GPU on the machine.
- filesystem_async._process_memory -> 0 when psutil is absent; _results_queue -> queue.Queue().
- tensor_aware_state_dict.HAVE_NVRX -> True: from_state_dict refuses to run without
  nvidia_resiliency_ext, whose base class it does not use on this path.
"""

import argparse
import os
import queue
import sys
import tempfile

DATA_ROWS, SHARD_ROWS, COLS, WORLD = 6, 16, 4, 2
KEY = "decoder.layers.0.mixer.in_proj.weight"


def cpu_shims(torch):
    from megatron.core.dist_checkpointing import tensor_aware_state_dict
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
    if getattr(filesystem_async, "_results_queue", "absent") is None:
        filesystem_async._results_queue = queue.Queue()
    tensor_aware_state_dict.HAVE_NVRX = True


def real_rows(rank):
    return max(0, min(SHARD_ROWS, DATA_ROWS - rank * SHARD_ROWS))


def tree(torch, mapping, rank, shard):
    real = real_rows(rank)

    def build(key, data, replica_id, flattened_range=None):
        if real == 0:  # the design's placeholder on an all-padding rank
            return [mapping.LocalNonpersistentObject(data[0:0])]
        return [mapping.ShardedTensor.from_rank_offsets(key + ".z", data[:real], replica_id=replica_id)]

    def merge(pieces):
        out = torch.zeros(SHARD_ROWS, COLS)
        out[: pieces[0].shape[0]] = pieces[0]
        return out

    factory = mapping.ShardedTensorFactory(KEY, shard, build, merge, (0, 0, 0))
    return {"mixer": {"in_proj.weight": factory}, "local": mapping.LocalNonpersistentObject(500 + rank),
            "iteration": 7}


def rank_main(rank, megatron_path, directory, results):
    sys.path.insert(0, megatron_path)
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing import mapping
    from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict

    dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                            world_size=WORLD)
    cpu_shims(torch)
    shard = torch.zeros(SHARD_ROWS, COLS)
    shard[: real_rows(rank)] = torch.arange(1.0, real_rows(rank) + 1).unsqueeze(1)
    ckpt = os.path.join(directory, "ckpt")
    if rank == 0:
        os.makedirs(ckpt)
    dist.barrier()
    dist_checkpointing.save(tree(torch, mapping, rank, shard), ckpt)
    dist.barrier()
    orders = {
        "serialization.load": lambda: dist_checkpointing.load(tree(torch, mapping, rank, torch.zeros_like(shard)), ckpt),
        "to_state_dict": lambda: MCoreTensorAwareStateDict.from_state_dict(tree(torch, mapping, rank, shard),
                                                                           algo="atomic")[0]
        .to_state_dict(tree(torch, mapping, rank, torch.zeros_like(shard)), algo="atomic"),
    }
    outcome = {}
    for name, load in orders.items():
        try:
            loaded = load()
            outcome[name] = "ok" if torch.equal(loaded["mixer"]["in_proj.weight"], shard) else "wrong rows"
        except Exception as exc:  # noqa: BLE001 - the outcome of Megatron's call is what is reported
            outcome[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        dist.barrier()
    results.put((rank, outcome))
    dist.destroy_process_group()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron-path", required=True)
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.megatron_path, "megatron", "core", "__init__.py")):
        print(f"not a Megatron-LM checkout: {args.megatron_path}", file=sys.stderr)
        return 3
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    results = context.Queue()
    with tempfile.TemporaryDirectory() as directory:
        ranks = [context.Process(target=rank_main, args=(r, args.megatron_path, directory, results))
                 for r in range(WORLD)]
        for p in ranks:
            p.start()
        outcomes = {}
        try:
            for _ in ranks:
                rank, outcome = results.get(timeout=300)
                outcomes[rank] = outcome
        except queue.Empty:
            print("a rank did not report within 300 s", file=sys.stderr)
        for p in ranks:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    if len(outcomes) != WORLD:
        print("harness error: not every rank reported", file=sys.stderr)
        return 3
    disagree = False
    for rank in sorted(outcomes):
        kind = "all padding" if real_rows(rank) == 0 else f"{real_rows(rank)} real rows"
        print(f"rank {rank} ({kind}): " + "; ".join(f"{k}: {v}" for k, v in outcomes[rank].items()))
        disagree |= len(set(outcomes[rank].values())) > 1 or "ok" not in outcomes[rank].values()
    print("finding C reproduces: the load orderings disagree" if disagree else "finding C does not reproduce")
    return 1 if disagree else 0


if __name__ == "__main__":
    sys.exit(main())
