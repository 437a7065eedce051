"""A round-trip rank's load (docs/roundtrip.md): its state built for the scenario's kind (loaded entries hold the
sentinel -1, fresh ones their segments' values), retargeted with Megatron's own layer maps where the kind asks,
the checkpoint's files checked against its metadata, Megatron's load measured, and what was loaded dumped to
loaded_rank_<r>.pt for the C++ verifier."""

import collections
import json
import os
import time

from megatron_adapter.roundtrip import checkpoint_files, rank, states
from megatron_adapter.roundtrip.failures import harness_kind, staged
from megatron_adapter.roundtrip.plan import SENTINEL, PlanError, scenario_files

# What a rank loads into: the state dict tree, and for a real model its chunks, optimizer, model request and the
# objects its linears answer before the load; the paths of plain common values (dumped as JSON).
Loading = collections.namedtuple("Loading", "sd chunks optimizer model preload_objects plain_paths",
                                 defaults=(None, None, None, None, frozenset()))


def _synthetic_state(world, files):
    torch, rank_plan = world.torch, files.rank_plan

    def data_of(shape, path):
        pre = rank_plan["prefill"][path]
        if pre == "sentinel":
            return torch.full(tuple(shape), SENTINEL, dtype=torch.int64, device=world.device)
        return files.oracle.values(torch, shape, pre, world.device)
    sd = states.entries_state(world, rank_plan, "load", data_of)
    return Loading(sd, plain_paths={i["path"] for i in rank_plan["entries"] if i["entry"]["kind"] == "plain"})


def _gdp_gtp_state(world, files):
    # Sentinel -1 everywhere; Megatron's own wrap zeroes the pad rows of the shard.
    torch = world.torch
    return Loading(states.gtp_state(world, files.rank_plan,
                                    lambda shape: torch.full(shape, SENTINEL, dtype=torch.int64)))


def _real_state(world, files):
    rank_plan = files.rank_plan
    chunks, optimizer, sd = states.real_state(world, rank_plan, rank_plan["prefill"], "load", files.oracle)
    if files.training:
        from megatron_adapter.real_models import training_path
        states.training_args(world, rank_plan, "load", files.path("checkpoint"))
    return Loading(sd, chunks, optimizer, rank_plan["model"], rank_plan["objects"])


def _interop_retarget(world, files, loading):
    maps = world.M.interop.gpt_compatible_layer_maps(files.scenario["pattern"])
    world.M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(loading.sd, maps)


def _chunks_retarget(world, files, loading):
    """Each model chunk's state dict, as the training load path retargets them."""
    from megatron_adapter.real_models import roundtrip_models
    roundtrip_models.retarget(world.M, loading.sd, files.scenario["pattern"])


def dump_loaded(world, files, entry, loading, loaded, expected):
    """What the load returned, per path (plain values and objects as JSON, float64 tensors as the int64 the
    oracle's values are), into loaded_rank_<r>.pt."""
    torch, dump = world.torch, {}
    for path, value in loaded.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.to(torch.int64)  # the GTP stand-in's float64 holds the oracle's integers exactly
        if path in loading.plain_paths:
            dump[path] = "json:" + json.dumps(value, default=repr)
        elif isinstance(value, torch.Tensor):
            dump[path] = value.detach().to("cpu").contiguous()
        elif isinstance(value, str):
            dump[path] = value
        else:
            dump[path] = "json:" + json.dumps(value, default=repr)
    checkpoint_files.write_dump(files.dir, world.rank, dump, torch)
    stage = world.stage("load: barrier after dump")
    world.dist.barrier()
    return stage


def _model_dump(world, loading, loaded, expected):
    """The real model's parameters and optimizer states after the load, the loaded objects (the linears'
    _extra_state: the model keeps no copy) and common values (the optimizer's param_groups)."""
    from megatron_adapter.codec import leaves
    from megatron_adapter.real_models import roundtrip_models
    stage = world.stage("load: dump the model's parameters (torch.save)")
    try:
        dump = roundtrip_models.dump_model(world.M, loading.chunks, loading.optimizer, loading.model,
                                           [t["path"] for t in expected["tensors"]], loaded)
    except roundtrip_models.RealModelPlanError as exc:
        raise staged(exc, stage, "harness_error")
    loaded_objects = dict(leaves(loaded, whole=frozenset(o["path"] for o in expected["objects"])))
    for o in expected["objects"]:
        value = loaded_objects.get(o["path"])
        carried = o.get("carried", False)  # Megatron's own value, compared as JSON even where it is a string
        dump[o["path"]] = value if isinstance(value, str) and not carried else "json:" + json.dumps(value, default=repr)
    for p in expected["plain"]:
        if p["path"] in loaded_objects:
            dump[p["path"]] = "json:" + json.dumps(loaded_objects[p["path"]], default=repr)
    if expected.get("param_groups_after_load_checkpoint"):
        from megatron_adapter.real_models import training_path
        dump.update(training_path.param_groups_after_load(loading.optimizer))
    return dump


def dump_real(world, files, entry, loading, loaded, expected):
    """The model (load_state_dict, strict) and its optimizer take what was loaded, as training does; then the
    model is dumped, and a DistributedOptimizer takes its part after (what Megatron loaded is verified even if
    that raises)."""
    from megatron_adapter.real_models import roundtrip_models
    stage = world.stage("load: the model (load_state_dict, strict) and its optimizer take what was loaded")
    try:
        if not files.training:  # load_checkpoint already did
            roundtrip_models.apply_loaded(loading.chunks, loading.optimizer, loaded, loading.model)
    except BaseException as exc:  # Megatron's model refusing Megatron's loaded state dict
        raise staged(exc, stage, "megatron_error")
    dump = _model_dump(world, loading, loaded, expected)
    checkpoint_files.write_dump(files.dir, world.rank, dump, world.torch)
    stage = world.stage("load: barrier after dump")
    world.dist.barrier()
    entry["dumped"] = True  # what Megatron loaded is verified even if what follows raises
    if loading.optimizer is not None and roundtrip_models.is_distributed(loading.model) and not files.training:
        stage = _distributed_optimizer_load(world, files, loading, loaded, expected, dump)
    roundtrip_models.done()
    return stage


AFTER_LOAD_STATE_DICT = "after_load_state_dict/"  # the verifier's kAfterLoadStateDict (verifier/verify_main.cc)


def _load_state_dict(world, loading, loaded, past_f):
    """The DistributedOptimizer's load_state_dict (under the shim of what finding F lacks where `past_f`):
    None, or what it raised, marked with its stage."""
    from megatron_adapter.real_models import roundtrip_models
    stage = world.stage("load: the DistributedOptimizer takes what was loaded (load_state_dict" +
                        (", again under the declared shim of what finding F lacks)" if past_f else ")"))
    try:
        roundtrip_models.apply_distributed_optimizer(loading.optimizer, loaded, loading.model, past_f=past_f)
    except BaseException as exc:  # Megatron's optimizer refusing Megatron's loaded state dict
        return staged(exc, stage, harness_kind(exc) or "megatron_error")
    return None


def _distributed_optimizer_load(world, files, loading, loaded, expected, dump):
    """The DistributedOptimizer takes its part (load_state_dict) as training does; where that raises (finding F
    on CPU), it loads again under the declared shim of what F lacks. Once every rank's load ran to the end, the
    optimizer's own states are read back in model space and dumped beside what Megatron loaded (under
    AFTER_LOAD_STATE_DICT + path) for the verifier. The unshimmed load's error is raised after, so F stays
    observed; a shimmed load that raises is raised instead (its states were never dumped: the verifier names
    them missing)."""
    from megatron_adapter.real_models import roundtrip_models
    unshimmed = _load_state_dict(world, loading, loaded, past_f=False)
    shimmed = None if unshimmed is None else _load_state_dict(world, loading, loaded, past_f=True)
    stage = world.stage("load: every rank's DistributedOptimizer load ran to the end (all_reduce)")
    torch = world.torch
    ran = torch.tensor([int(shimmed is None)])
    world.dist.all_reduce(ran, op=world.dist.ReduceOp.MIN)
    if int(ran.item()) == 1:
        stage = world.stage("load: dump the DistributedOptimizer's own states after load_state_dict (model space)")
        try:
            own = roundtrip_models.own_optimizer_states(world.M, loading.chunks, loading.optimizer, loading.model,
                                                        [t["path"] for t in expected["tensors"]])
        except BaseException as exc:
            raise staged(exc, stage)
        dump.update({AFTER_LOAD_STATE_DICT + path: value for path, value in own.items()})
        checkpoint_files.write_dump(files.dir, world.rank, dump, torch)
        world.dist.barrier()
    if shimmed is not None or unshimmed is not None:
        raise shimmed if shimmed is not None else unshimmed
    return stage


# The rank plan's "kind" (harness/roundtrip/world_plan.h ScenarioKind) -> (how its state is built, how Megatron
# retargets it before the load or None, how what was loaded is dumped).
LoadKind = collections.namedtuple("LoadKind", "build retarget dump")
LOADS = {
    "gpt_hybrid": LoadKind(_synthetic_state, _interop_retarget, dump_loaded),
    "gdp_gtp": LoadKind(_gdp_gtp_state, None, dump_loaded),
    "real_gpt_hybrid": LoadKind(_real_state, _chunks_retarget, dump_real),
    "real_hybrid_hybrid": LoadKind(_real_state, None, dump_real),
}


def _retarget(world, files, kind, loading):
    if kind.retarget is None:
        return world.stage(f"load: no retarget ({files.scenario['kind']})")
    if files.training:
        return world.stage("load: no retarget by the worker (load_checkpoint's own GPT -> hybrid setup)")
    stage = world.stage("load: retarget (Megatron's gpt_compatible_layer_maps)")
    try:
        kind.retarget(world, files, loading)
    except BaseException as exc:
        raise staged(exc, stage)
    return stage


def _checked_checkpoint(world, files, expected):
    """The checkpoint folder the load reads, every chunk of a key this rank reads checked against its file."""
    ckpt = files.path("checkpoint")
    if files.training:
        from megatron_adapter.real_models import training_path
        ckpt = training_path.iteration_dir(ckpt)
    stage = world.stage("load: check checkpoint files against the metadata")
    # The keys this rank reads (its oracle's segments): a damaged chunk of one of them is named.
    key_of = {k["id"]: k["key"] for k in files.catalogue["keys"]}
    needed = {key_of[seg[2]] for t in expected["tensors"] if not t["fresh"] for seg in t["segments"] if seg[2] in key_of}
    try:
        checkpoint_files.check_files(ckpt, needed)
    except ValueError as exc:
        raise staged(exc, stage, "checkpoint_truncated")
    except Exception as exc:  # noqa: BLE001 - an unreadable .metadata
        raise staged(ValueError(f"checkpoint metadata {os.path.join(ckpt, '.metadata')} unreadable: "
                                f"{type(exc).__name__}: {exc}"), stage, "checkpoint_corrupt")
    return ckpt


def _measured_load(world, files, entry, loading, ckpt):
    """Megatron's load of the state, measured: load_checkpoint on the training path (it retargets, loads and
    hands each chunk its state dict), to_state_dict of the local checkpoint, or dist_checkpointing.load."""
    rank.measure_state(world, entry, loading.sd)
    cuda, stage = rank.start_measured_call(world, entry, "load", "megatron.training.checkpointing.load_checkpoint"
                                           if files.training else None)
    t0 = time.perf_counter()
    try:
        if files.training:
            from megatron_adapter.real_models import training_path
            with training_path.object_values(loading.chunks, loading.preload_objects):
                loaded = training_path.load(loading.chunks, loading.optimizer)
        elif files.scenario.get("load_order") == "to_state_dict":
            loaded = checkpoint_files.load_local(world, files.dir, loading.sd)
        elif files.fully_parallel:
            loaded = world.dcp.load(loading.sd, ckpt, sharded_strategy=fully_parallel_load(ckpt))
        else:
            loaded = world.dcp.load(loading.sd, ckpt)
    except BaseException as exc:
        # Name the file when DCP's error does (a corrupt chunk surfaces here).
        raise staged(exc, getattr(exc, "_ih_stage", stage), getattr(exc, "_ih_kind", None) or harness_kind(exc))
    if cuda:
        world.torch.cuda.synchronize()
    rank.record_peaks(world, entry, cuda, t0)
    return loaded


def fully_parallel_load(ckpt):
    """Megatron's load strategy for `ckpt` wrapped as training's --ckpt-fully-parallel-load wraps it: each rank of
    the DP x CP group reads its share of the chunks they need alike and receives the rest by exchange. The
    exchange is Megatron's own `gather_object` algorithm: training's default `broadcast` moves every exchanged
    tensor to CUDA (exchange_utils.py), which a CPU run cannot; both hand on the same shards."""
    from megatron.core import parallel_state
    from megatron.core.dist_checkpointing.serialization import get_default_load_sharded_strategy
    from megatron.core.dist_checkpointing.strategies.fully_parallel import FullyParallelLoadStrategyWrapper
    return FullyParallelLoadStrategyWrapper(get_default_load_sharded_strategy(ckpt),
                                            parallel_state.get_data_parallel_group(with_context_parallel=True),
                                            exchange_algo="gather_object")


def load_scenario(world, scenario, entry):
    """This rank's load of one scenario; returns the last stage it entered."""
    files, kind = scenario_files(world, scenario, LOADS)
    if files.training and kind.dump is not dump_real:
        raise PlanError(f"scenario {scenario['name']}: the training load path needs a real model")
    loading = kind.build(world, files)
    if world.fault("hang_load"):
        world.stage("load: before retarget (this rank stopped answering: injected hang)")
        while True:
            time.sleep(60)
    _retarget(world, files, kind, loading)
    expected = files.expected()
    ckpt = _checked_checkpoint(world, files, expected)
    loaded = _measured_load(world, files, entry, loading, ckpt)
    return kind.dump(world, files, entry, loading, loaded, expected)
