"""A round-trip rank's save (docs/roundtrip.md): its state built for the scenario's kind and filled from the plan's
segments, then saved by Megatron (dist_checkpointing.save, or save_checkpoint on the training path), measured, and
the checkpoint's writers listed from its metadata."""

import os
import signal
import time

from megatron_adapter.roundtrip import checkpoint_files, rank, states
from megatron_adapter.roundtrip.failures import harness_kind, staged
from megatron_adapter.roundtrip.plan import scenario_files


def _synthetic(world, files, entry):
    fill = files.rank_plan["fill"]
    sd = states.entries_state(world, files.rank_plan, "save",
                              lambda shape, path: files.oracle.values(world.torch, shape, fill[path], world.device))
    return save_sd(world, files.dir, entry, sd)


def _gdp_gtp(world, files, entry):
    segments = files.rank_plan["fill"][states.IN_PROJ]
    sd = states.gtp_state(world, files.rank_plan, lambda shape: files.oracle.values(world.torch, shape, segments))
    if files.scenario.get("load_order") == "to_state_dict":
        checkpoint_files.save_local(world, files.dir, sd)
    return save_sd(world, files.dir, entry, sd)


def _real(world, files, entry):
    rank_plan = files.rank_plan
    chunks, optimizer, tree = states.real_state(world, rank_plan, rank_plan["fill"], "save", files.oracle)
    if files.fully_parallel:
        ckpt = files.path("checkpoint")
        return save_sd(world, files.dir, entry, tree, read_stored=True,
                       call=("dist_checkpointing.save (FullyParallelSaveStrategyWrapper)",
                             lambda: world.dcp.save(tree, ckpt, sharded_strategy=fully_parallel_save(world)), ckpt))
    if not files.training:
        return save_sd(world, files.dir, entry, tree, read_stored=True)
    from megatron_adapter.real_models import training_path
    ckpt = files.path("checkpoint")
    states.training_args(world, rank_plan, "save", ckpt)
    return save_sd(world, files.dir, entry, tree,
                   call=("megatron.training.checkpointing.save_checkpoint",
                         lambda: training_path.save(chunks, optimizer, rank_plan["objects"],
                                                    older=files.saved_by_older_megatron),
                         training_path.iteration_dir(ckpt)), read_stored=True)


def fully_parallel_save(world):
    """Megatron's default save strategy wrapped as training's --ckpt-fully-parallel-save wraps it: the DP x CP
    group shares the writes of the chunks its ranks hold alike."""
    from megatron.core import parallel_state
    from megatron.core.dist_checkpointing.serialization import get_default_save_sharded_strategy
    from megatron.core.dist_checkpointing.strategies.fully_parallel import FullyParallelSaveStrategyWrapper
    return FullyParallelSaveStrategyWrapper(get_default_save_sharded_strategy(),
                                            parallel_state.get_data_parallel_group(with_context_parallel=True))


# The rank plan's "kind" (harness/roundtrip/world_plan.h ScenarioKind) -> how this rank builds and saves it.
SAVES = {"gpt_hybrid": _synthetic, "gdp_gtp": _gdp_gtp, "real_gpt_hybrid": _real, "real_hybrid_hybrid": _real}


def save_scenario(world, scenario, entry):
    """This rank's save of one scenario; returns the last stage it entered."""
    files, save = scenario_files(world, scenario, SAVES)
    return save(world, files, entry)


def _repeated_saves(world, sdir, sd):
    """Reserved CUDA memory across three consecutive saves (the GTP PR's symptom: ~48 GB per save)."""
    torch = world.torch
    reserved = [torch.cuda.memory_reserved()]
    for i in range(3):
        world.stage(f"save: repeated save {i + 1} of 3")
        os.makedirs(os.path.join(sdir, f"checkpoint_repeat_{i}"), exist_ok=True)
        world.dcp.save(sd, os.path.join(sdir, f"checkpoint_repeat_{i}"))
        reserved.append(torch.cuda.memory_reserved())
    return reserved


def save_sd(world, sdir, entry, sd, call=None, read_stored=False):
    """dist_checkpointing.save of `sd` into sdir/checkpoint, or `call` = (its name, the save, the folder it
    writes the DCP checkpoint into): Megatron's save_checkpoint of the same model (the training path). With
    `read_stored` (the real models) rank 0 then reads every stored chunk back with DCP's reader."""
    rank.measure_state(world, entry, sd)
    ckpt = os.path.join(sdir, "checkpoint")
    os.makedirs(ckpt, exist_ok=True)
    name, save, written = call or ("dist_checkpointing.save", lambda: world.dcp.save(sd, ckpt), ckpt)
    killer = checkpoint_files.kill_when_writing(written, world.rank) if world.fault("kill_save") else None
    cuda, stage = rank.start_measured_call(world, entry, "save", name)
    t0 = time.perf_counter()
    try:
        save()
    except BaseException as exc:
        raise staged(exc, stage, harness_kind(exc))
    if killer:
        os.kill(os.getpid(), signal.SIGKILL)  # the save finished before the watcher saw a file
    rank.record_peaks(world, entry, cuda, t0)
    if cuda:
        entry["cuda_reserved_after_saves"] = _repeated_saves(world, sdir, sd)
    stage = world.stage("save: barrier after dist_checkpointing.save")
    world.dist.barrier()
    if world.rank == 0:
        stage = world.stage("save: list writers from the DCP metadata")
        entry["writers"] = checkpoint_files.list_writers(written)
        if read_stored:
            stage = world.stage("save: read every stored chunk back (DCP FileSystemReader)")
            entry["stored_chunks"] = checkpoint_files.write_stored_chunks(written, sdir, world.torch)
    return stage
