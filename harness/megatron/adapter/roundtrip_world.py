#!/usr/bin/env python3
"""One rank of an Open MPI-launched save or load world (interop-harness roundtrip --scenario/--all).

    mpirun -np N python roundtrip_world.py --work DIR --phase save|load [--mutant M] [--fault F]

The rank reads its rank and world size from Open MPI's environment (OMPI_COMM_WORLD_RANK,
OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK) and the rendezvous from MASTER_ADDR /
MASTER_PORT (chosen by the harness), initializes torch.distributed (gloo on CPU, NCCL with
--device cuda) and then, for every scenario of DIR/plan.json in order:

  save: builds its GPT entries (megatron_adapter.codec: real ShardedTensor / ShardedObject /
        ShardedTensorFactory objects), fills every tensor from the fill segments the C++ plan
        gives (value = key_id << key_shift | global linear index, int64; key_shift is the scenario's
        catalogue.json "oracle": {"key_shift": N}, the oracle's encoding as the C++ side chose it), and calls
        megatron.core.dist_checkpointing.save. Rank 0 then lists the checkpoint's writers from
        the DCP metadata (which file wrote which chunk).
  load: builds its hybrid entries (loaded entries hold the sentinel -1, fresh ones their
        segments' values), retargets them with Megatron's own gpt_compatible_layer_maps +
        retarget_sharded_state_dict_to_gpt_checkpoint, checks the checkpoint's files against
        its metadata (truncation), calls dist_checkpointing.load and torch.saves what it loaded
        to DIR/<scenario>/loaded_rank_<r>.pt for the C++ verifier.

A real scenario whose plan says "load_path": "training" calls Megatron's training entry points instead
(megatron_adapter/real_models/training_path.py): save_checkpoint in the save world, load_checkpoint in the load
world under Megatron's own parsed args, which retargets and loads the model itself (no retarget here).

No layout or retarget rule lives here: the segments and the expected values come from the C++
reference (harness/roundtrip/world_plan.cc); this file only fills, saves, loads and dumps.

The rank's parts live in megatron_adapter/roundtrip/ (plan, rank, states, save, load, checkpoint_files,
failures). It writes DIR/status/<phase>_rank_<r>.json at every stage change (pid, stage, step, scenario) so
the harness can name a hung rank, and DIR/results/<phase>_rank_<r>.json after every scenario
(seconds, peak memory, bytes, memcpy seconds, errors). Exit 0, or 1 after a recorded error.
"""

import argparse
import contextlib
import datetime
import json
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)

from megatron_adapter import coverage_run, patches  # noqa: E402
from megatron_adapter.megatron_import import DOES_NOT_IMPORT, raised_by_megatron, where_raised  # noqa: E402
from megatron_adapter.roundtrip.failures import error_entry, staged  # noqa: E402
from megatron_adapter.roundtrip.plan import read_json, write_atomic  # noqa: E402
from megatron_adapter.roundtrip.rank import World, exit_with_parent  # noqa: E402


def run(args):
    exit_with_parent()
    world = World(args)
    world.status("import")
    world.flush()
    from megatron_adapter.megatron_import import load_megatron
    M = load_megatron(args.megatron_path)
    torch = M.torch
    res = world.result
    res["megatron_version"], res["torch_version"] = M.megatron_version, torch.__version__
    if M.interop is None:
        if "interop" in M.broken_imports:  # Megatron's own module raised at import: its failure
            raise staged(ImportError(f"{DOES_NOT_IMPORT}: {M.broken_imports['interop']}"), "start", "megatron_error")
        raise staged(RuntimeError("this Megatron lacks gpt_checkpoint_interop: " + json.dumps(M.import_errors)),
                     "start", "unsupported")
    device = world.device
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch.cuda.is_available() is false on this machine")
        torch.cuda.set_device(world.local_rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
    # What dist_checkpointing's save needs on a CPU-only machine (docs/roundtrip.md), for the whole run.
    cpu = () if device != "cpu" or args.no_cpu_patches else ("cpu_save",)
    with patches.applied(*cpu) as cpu_patches, patches.applied("save_speed") as speed_patches:
        res["cpu_patches"], res["speed_patches"] = cpu_patches.summaries, speed_patches.summaries
        return run_scenarios(world, M, device)


def join_world(world, M, device):
    """This phase's mutant planted, then the process group (gloo on CPU; NCCL with one GPU per rank)."""
    from megatron_adapter import mutants
    from megatron_adapter.codec import Codec
    args, res, torch = world.args, world.result, M.torch
    if args.mutant and mutants.planted_in(args.mutant, world.phase):
        mutants.apply_in_world(args.mutant, M)
        res["mutant"] = args.mutant
    world.attach(M, Codec(M), device)
    world.status("init_process_group")
    # NCCL needs one GPU per rank; more ranks than GPUs share them, with gloo carrying the
    # collectives (dist_checkpointing exchanges only metadata objects and flags).
    backend = "gloo"
    if device.startswith("cuda"):
        backend = "nccl" if world.size <= torch.cuda.device_count() else "gloo"
    timeout = datetime.timedelta(seconds=max(10, int(args.timeout)))
    world.dist.init_process_group(backend, init_method="env://", rank=world.rank, world_size=world.size,
                                  timeout=timeout)
    res["backend"] = backend
    world.flush()


def run_scenarios(world, M, device):
    """The plan's scenarios in order in this warm world: 0, or 1 after the first that failed (recorded: the other
    ranks may wait in a collective, mpirun ends the world)."""
    import gc
    join_world(world, M, device)
    gc.freeze()  # the imports' objects stay out of the collection after each scenario (destroy_groups_made_since)
    for scenario in world.plan["scenarios"]:
        if not run_scenario(world, scenario):
            return 1
        world.flush()
    world.status("done")
    world.dist.barrier()
    world.flush()
    return 0


def run_scenario(world, scenario):
    """One scenario: build, fill and save, or build, retarget, load and dump, under the patches it needs (undone
    after it) in this warm world; the groups it made destroyed. A real scenario planned in its worlds is built and
    described first (roundtrip/handshake.py); one the C++ side skipped leaves no entry. False after a failure
    (recorded)."""
    from megatron_adapter.roundtrip import handshake
    from megatron_adapter.roundtrip.load import load_scenario
    from megatron_adapter.roundtrip.save import save_scenario
    from megatron_adapter.worlds import worker_context
    world.status.scenario = scenario["name"]
    coverage_run.switch(coverage_run.context_of(os.environ.get(coverage_run.CONTEXT_ENV), scenario["name"]))
    entry = {"name": scenario["name"], "ok": False}
    world.result["scenarios"].append(entry)
    started = time.perf_counter()
    groups_before = worker_context.registered_groups()
    try:
        with contextlib.ExitStack() as world.scenario_patches:
            runs = handshake.prepared(world, scenario, entry)
            if runs:
                (save_scenario if world.phase == "save" else load_scenario)(world, scenario, entry)
        world.built = None
        worker_context.destroy_groups_made_since(groups_before)  # the scenario's layouts, wherever kept
        if not runs:
            world.result["scenarios"].remove(entry)
            return True
        entry["ok"] = True
        # The whole scenario in this warm world: build, fill and save, or build, retarget, load and dump (not the
        # handshake's wait for the plan or the checkpoint).
        entry["scenario_seconds"] = time.perf_counter() - started - entry.get("handshake_wait_seconds", 0.0)
    except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        entry["error"] = error_entry(exc, "prepare", world.device)
        world.flush()
        return False
    return True


def start_error_text(exc):
    text = f"{type(exc).__name__}: {exc}"
    return f"{DOES_NOT_IMPORT}: {text} (at {where_raised(exc)})" if raised_by_megatron(exc) else text


def start_error_kind(exc):
    """A rank that failed before its first scenario: Megatron's failure where its own code raised importing (or
    the raiser said so), else the harness's (its setup, the environment)."""
    return getattr(exc, "_ih_kind", None) or ("megatron_error" if raised_by_megatron(exc) else "harness_error")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work", required=True)
    ap.add_argument("--phase", choices=("save", "load"), required=True)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--megatron-path")
    ap.add_argument("--mutant")
    ap.add_argument("--fault", help="kill_save:RANK[:SCENARIO] or hang_load:RANK[:SCENARIO] (tests)")
    ap.add_argument("--no-cpu-patches", action="store_true")
    args = ap.parse_args()
    coverage_run.start()  # before Megatron's import, when the harness asked for coverage (gate --coverage)
    os.dup2(2, 1)  # stdout is diagnostics only
    sys.stdout = sys.stderr
    try:
        code = run(args)
    except BaseException as exc:  # noqa: BLE001 - import or init failures
        print(traceback.format_exc(), file=sys.stderr, flush=True)
        path = os.path.join(os.path.abspath(args.work), "results", f"{args.phase}_rank_"
                            f"{os.environ.get('OMPI_COMM_WORLD_RANK', '0')}.json")
        try:
            res = read_json(path) if os.path.exists(path) else {"scenarios": []}
            res["error"] = {"kind": start_error_kind(exc), "stage": "start", "message": start_error_text(exc)[:2000]}
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, res)
        except OSError:
            pass
        code = 1
    coverage_run.save()
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (gloo/NCCL atexit work can hang on a dead peer)


if __name__ == "__main__":
    main()
