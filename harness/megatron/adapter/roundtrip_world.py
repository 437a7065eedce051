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

It writes DIR/status/<phase>_rank_<r>.json at every stage change (pid, stage, step, scenario) so
the harness can name a hung rank, and DIR/results/<phase>_rank_<r>.json after every scenario
(seconds, peak memory, bytes, memcpy seconds, errors). Exit 0, or 1 after a recorded error.
"""

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)

SENTINEL = -1  # what a loaded entry holds before the load: "never written"


def write_atomic(path, obj):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(obj, f)
    os.replace(tmp, path)


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def vm_field(name):
    """A /proc/self/status field in bytes (VmHWM, VmRSS), 0 where unavailable."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def reset_peak_rss():
    """Resets VmHWM to the current RSS (Linux clear_refs 5); False where not permitted."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
        return True
    except OSError:
        return False


class Status:
    """DIR/status/<phase>_rank_<r>.json: where this rank is, for naming a hung rank."""

    def __init__(self, work, phase, rank):
        os.makedirs(os.path.join(work, "status"), exist_ok=True)
        self.path = os.path.join(work, "status", f"{phase}_rank_{rank}.json")
        self.step = 0
        self.scenario = None

    def __call__(self, stage):
        self.step += 1
        write_atomic(self.path, {"pid": os.getpid(), "stage": stage, "step": self.step, "scenario": self.scenario,
                                 "since": time.time()})


class PlanError(Exception):
    """plan.json lacks what this file needs: a harness error (the C++ plan and this reader disagree)."""


class Oracle:
    """A scenario's oracle encoding, from its catalogue.json "oracle": {"key_shift": N, "dtype": D} (the C++
    plan's choice, harness/roundtrip/oracle_encoding.h; there is no copy of it in Python): element g of the key
    with id k holds (k << N) | its linear global index, exact in parameters of dtype D (float64, or float32
    where the scenario keeps Megatron's DistributedOptimizer)."""

    DTYPES = ("float64", "float32")

    def __init__(self, catalogue):
        oracle = catalogue.get("oracle") if isinstance(catalogue, dict) else None
        shift = oracle.get("key_shift") if isinstance(oracle, dict) else None
        dtype = oracle.get("dtype") if isinstance(oracle, dict) else None
        if not isinstance(shift, int) or isinstance(shift, bool) or not 1 <= shift <= 62 or dtype not in self.DTYPES:
            raise PlanError('catalogue.json needs "oracle": {"key_shift": N, "dtype": "float64" | "float32"} with N an '
                            "integer in 1..62 (the oracle's key encoding, written by the C++ plan); got "
                            f'"oracle": {json.dumps(oracle)}')
        self.key_shift, self.dtype = shift, dtype

    def values(self, torch, shape, segments, device="cpu"):
        return fill(torch, list(shape), segments, device, self.key_shift)


def fill(torch, shape, segments, device, key_shift):
    """An int64 tensor of `shape` whose rows follow the segments; rows no segment covers are 0."""
    t = torch.zeros(tuple(shape), dtype=torch.int64)
    for begin, rows, key_id, gshape, goff, p in segments:
        strides, s = [0] * len(gshape), 1
        for a in range(len(gshape) - 1, -1, -1):
            strides[a], s = s, s * gshape[a]
        base = key_id << key_shift
        for a in range(p):
            base += goff[a] * strides[a]
        if len(shape) == 0:
            t.fill_(base)
            continue
        local = [rows] + list(shape[1:])
        value = torch.full(tuple(local), base, dtype=torch.int64)
        for j, n in enumerate(local):
            idx = torch.arange(n, dtype=torch.int64) + goff[p + j]
            view = [1] * len(local)
            view[j] = n
            value += (idx * strides[p + j]).reshape(view)
        t[begin:begin + rows] = value
    return t.to(device)


def _leaf_values(sd):
    from megatron_adapter.codec import leaves
    return [leaf for _, leaf in leaves(sd)]


def tensor_bytes(sd, torch):
    n = 0
    for v in _leaf_values(sd):
        data = getattr(v, "data", None)
        if isinstance(data, torch.Tensor):
            n += data.numel() * data.element_size()
    return n


def memcpy_seconds(sd, torch, device):
    """Best of three copies of this rank's tensors (the bandwidth the save/load is compared to)."""
    tensors = [v.data for v in _leaf_values(sd) if isinstance(getattr(v, "data", None), torch.Tensor)]
    best = None
    for _ in range(3):
        if device != "cpu":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for t in tensors:
            torch.empty_like(t).copy_(t)
        if device != "cpu":
            torch.cuda.synchronize()
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    return best or 0.0


class World:
    def __init__(self, args):
        self.args = args
        self.work = os.path.abspath(args.work)
        self.plan = read_json(os.path.join(self.work, "plan.json"))
        self.rank = int(os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("RANK", "0")))
        self.size = int(os.environ.get("OMPI_COMM_WORLD_SIZE", os.environ.get("WORLD_SIZE", "1")))
        self.local_rank = int(os.environ.get("OMPI_COMM_WORLD_LOCAL_RANK", os.environ.get("LOCAL_RANK", "0")))
        self.phase = args.phase
        self.status = Status(self.work, self.phase, self.rank)
        os.makedirs(os.path.join(self.work, "results"), exist_ok=True)
        self.result_path = os.path.join(self.work, "results", f"{self.phase}_rank_{self.rank}.json")
        self.result = {"rank": self.rank, "world_size": self.size, "phase": self.phase, "pid": os.getpid(),
                       "scenarios": []}
        self.device = self.plan.get("device", "cpu")

    def flush(self):
        write_atomic(self.result_path, self.result)

    def fault(self, kind):
        """--fault KIND:RANK[:SCENARIO] applies to this rank (and scenario) only."""
        f = self.args.fault
        if not f:
            return False
        parts = f.split(":")
        if parts[0] != kind or int(parts[1]) != self.rank:
            return False
        return len(parts) < 3 or parts[2] == self.status.scenario


def exit_with_parent():
    """A rank whose mpirun is gone (killed at a timeout) must not live on as an orphan."""
    parent = os.getppid()

    def watch():
        while True:
            if os.getppid() != parent:
                os._exit(3)
            time.sleep(0.5)
    threading.Thread(target=watch, daemon=True).start()


def run(args):
    exit_with_parent()
    world = World(args)
    world.status("import")
    world.flush()
    from megatron_adapter.megatron_import import load_megatron
    from megatron_adapter.codec import Codec
    from megatron_adapter import roundtrip_support as rt  # the CPU patches, the mutants, megatron_frame
    from megatron_adapter.worlds import worker_context

    M = load_megatron(args.megatron_path)
    torch = M.torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing

    res = world.result
    res["megatron_version"], res["torch_version"] = M.megatron_version, torch.__version__
    if M.interop is None:
        raise RuntimeError("this Megatron lacks gpt_checkpoint_interop: " + json.dumps(M.import_errors))
    device = world.device
    if device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda but torch.cuda.is_available() is false on this machine")
        torch.cuda.set_device(world.local_rank % torch.cuda.device_count())
        device = f"cuda:{torch.cuda.current_device()}"
        res["cpu_patches"] = []
    else:
        res["cpu_patches"] = [] if args.no_cpu_patches else rt.apply_cpu_patches(torch, M)
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    res["speed_patches"] = rt.apply_speed_patches(filesystem_async)
    from megatron_adapter import mutants
    if args.mutant and world.phase == mutants.phase_of(args.mutant):
        rt.apply_mutant(args.mutant, M)
        res["mutant"] = args.mutant
    codec = Codec(M)

    world.status("init_process_group")
    # NCCL needs one GPU per rank; more ranks than GPUs share them, with gloo carrying the
    # collectives (dist_checkpointing exchanges only metadata objects and flags).
    backend = "gloo"
    if device.startswith("cuda"):
        backend = "nccl" if world.size <= torch.cuda.device_count() else "gloo"
    timeout = datetime.timedelta(seconds=max(10, int(args.timeout)))
    dist.init_process_group(backend, init_method="env://", rank=world.rank, world_size=world.size, timeout=timeout)
    res["backend"] = backend
    world.flush()

    import gc
    gc.freeze()  # the imports' objects stay out of the collection after each scenario (destroy_groups_made_since)
    for scenario in world.plan["scenarios"]:
        name = scenario["name"]
        world.status.scenario = name
        sdir = os.path.join(world.work, scenario["dir"])
        entry = {"name": name, "ok": False}
        res["scenarios"].append(entry)
        stage = "prepare"
        started = time.perf_counter()
        groups_before = worker_context.registered_groups()
        try:
            if world.phase == "save":
                stage = save_scenario(world, scenario, sdir, entry, M, torch, dist, codec, dist_checkpointing, device)
            else:
                stage = load_scenario(world, scenario, sdir, entry, M, torch, dist, codec, dist_checkpointing, device)
            worker_context.destroy_groups_made_since(groups_before)  # the scenario's layouts, wherever kept
            entry["ok"] = True
            # The whole scenario in this warm world: build, fill and save, or build, retarget, load and dump.
            entry["scenario_seconds"] = time.perf_counter() - started
        except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
            stage = getattr(exc, "_ih_stage", stage)
            text = " ".join(f"{type(exc).__name__}: {exc}".split())
            print(traceback.format_exc(), file=sys.stderr, flush=True)
            kind = getattr(exc, "_ih_kind", None)
            if kind is None:
                in_megatron = any(w in stage for w in ("dist_checkpointing", "retarget", "training.checkpointing"))
                in_megatron = in_megatron and not rt.never_left_the_harness(exc.__traceback__)
                kind = "megatron_error" if in_megatron else "harness_error"
                if in_megatron and any(w in text.lower() for w in rt.CUDA_WORDS) and device == "cpu":
                    kind = "cannot_run"
            entry["error"] = {"kind": kind, "stage": stage, "message": text[:2000],
                              "megatron_frame": rt.megatron_frame(exc.__traceback__, str(exc))}
            world.flush()
            return 1  # the other ranks may wait in a collective: mpirun ends the world
        world.flush()
    world.status("done")
    dist.barrier()
    world.flush()
    return 0


def staged(exc, stage, kind=None):
    exc._ih_stage = stage
    if kind:
        exc._ih_kind = kind
    return exc


def set_stage(world, stage):
    world.status(stage)
    return stage


def in_proj_design(world, M, gtp_plan):
    """The in_proj save design this side of the scenario uses: "gather" (Megatron's GTP save) or
    "shard-split" (the harness's candidate of the pending PR's design, spec 4.7, installed on the GDP
    mixer here). A checkout with its own shard-split factory runs its own design: its shard-split side
    is Megatron's code, and a gather side cannot be built from it (NOT RUN, never a pass)."""
    import candidates
    from candidates import shard_split
    design = gtp_plan.get("design")
    if design not in ("gather", "shard-split"):
        raise PlanError(f'plan.json rank plan needs "gtp": {{"design": "gather" | "shard-split"}}, got {design!r}')
    own = candidates.find_real_gtp_split_factory(M)
    if own is not None:
        if design == "gather":
            raise staged(PlanError(f"this checkout saves with its own shard-split factory "
                                   f"({own.__module__}.{own.__name__}): no gather side"), "build state", "cannot_run")
        return design
    if design == "shard-split" and not shard_split.installed():
        applied = shard_split.install(M)
        world.result["candidate"] = applied
        if not applied["applied"]:
            raise staged(PlanError(f"the candidate shard-split design cannot be applied: {applied['reason']}"),
                         "build state", "cannot_run")
    return design


def gtp_state(world, M, torch, rank_plan, values):
    """The GDP mixer's sharded state dict on this rank, built by Megatron's own code on the GTP
    stand-in of the gloo worlds' workers (its groups, its stand-in mixer, its GPU-only patches): the in_proj
    weight is wrapped by wrap_module_params_gtp (pads and slices to this rank's (R, C) shard),
    then `values` (a function of the shard's shape) fills the shard before sharded_state_dict
    runs, so the gathered copy carries the same values. Returns (state dict, in_proj path)."""
    from candidates import shard_split
    from megatron_adapter.worlds import gdp_tasks, worker_context
    g = rank_plan["gtp"]
    from megatron_adapter import megatron_patches
    world.result["gtp_patches"] = megatron_patches.apply()
    # The layout's groups, built for this scenario (run() destroys them after it) and installed in parallel_state.
    ctx = worker_context.Ctx()
    ctx.rank, ctx.tp_size, ctx.gtp_size, ctx.dp_size = world.rank, g["tp"], g["gtp"], 1
    ctx.size = world.size
    ctx.d, rest = divmod(world.rank, g["tp"] * g["gtp"])
    ctx.t, ctx.g = divmod(rest, g["gtp"])
    ctx.M, ctx.torch, ctx.factories, ctx.megatron_path = M, torch, {}, None
    if ctx.size != g["tp"] * g["gtp"]:
        raise ValueError(f"GTP world TP={g['tp']} x G={g['gtp']} does not match {world.size} ranks")
    worker_context.build_groups(ctx)
    design = in_proj_design(world, M, g)
    prefix = "decoder.layers.0.mixer."
    mod, weight, mixer_cls = gdp_tasks._standin_mixer(ctx, rank_plan["layout"])
    with torch.no_grad():
        weight.data.copy_(values(tuple(weight.shape)).to(weight.dtype))
    try:
        with shard_split.selected(design):
            sd = mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(),
                                              metadata={"dp_cp_group": ctx.dp_cp_group})
    except BaseException as exc:  # Megatron's own code failed on a valid layout: a finding
        raise staged(exc, f"{world.phase}: build state (Megatron's {mixer_cls.__name__}.sharded_state_dict)",
                     "megatron_error")
    return sd, prefix + "in_proj.weight", weight


def untensored_leaf(M, codec, e, path, where, rank_plan):
    """A plan entry that carries no tensor data, built alike for save and load: a ShardedObject with
    the plan's object value, a plain common value, or a LocalNonpersistentObject."""
    kind = e["kind"]
    if kind == "object":
        so = codec.leaf(e, where)
        so.data = rank_plan["objects"][path]
        return so
    if kind == "plain":
        return e.get("value")
    if kind == "local":
        return M.LocalNonpersistentObject(e.get("value"))
    raise ValueError(f"{where}: unknown entry kind {kind!r}")


REAL_KINDS = ("real_gpt_hybrid", "real_hybrid_hybrid")


def real_objects(M, tree, strings):
    """Every ShardedObject of a real model takes the plan's string for its path (what the verifier expects)."""
    from megatron_adapter.codec import leaves
    for path, leaf in leaves(tree):
        if isinstance(leaf, M.ShardedObject):
            if path not in strings:
                raise PlanError(f"the plan has no object value for {path}")
            leaf.data = strings[path]


def megatron_state_tree(M, chunks, optimizer, req, stage, is_loading=False):
    """The real chunks' (and optimizer's) sharded state dicts: Megatron's checkpoint code, where the mutants
    live, so its failure is Megatron's, unless the failure never reached it (or a shim fell short)."""
    from megatron_adapter import roundtrip_support
    from megatron_adapter.real_models import roundtrip_models as rm
    try:
        return rm.state_tree(M, chunks, optimizer, req, is_loading)
    except BaseException as exc:  # noqa: BLE001
        own = roundtrip_support.never_left_the_harness(exc.__traceback__)
        raise staged(exc, stage, harness_kind(exc) or ("harness_error" if own else "megatron_error"))


def real_state(world, M, rank_plan, values, side, oracle):
    """This rank's real model (Megatron's GPTModel or HybridModel) with the plan's values in its
    parameters, and its optimizer (or None) with them in its states: (chunks, optimizer, sharded state dict
    tree). A plan that does not fit the model is a harness error."""
    from megatron_adapter.real_models import roundtrip_models as rm
    torch, req = M.torch, rank_plan["model"]
    try:
        if req["gtp"] > 1:  # Megatron's GTP checkpoint code runs only with these (as model dump's)
            from megatron_adapter import megatron_patches
            world.result["gtp_patches"] = megatron_patches.apply()
        chunks, optimizer = rm.build(M, req, getattr(torch, oracle.dtype))
    except BaseException as exc:  # Megatron's model on a valid layout: the factory or shims fall short
        raise staged(exc, f"{side}: build Megatron's real model", "harness_error")
    tree = megatron_state_tree(M, chunks, optimizer, req, f"{side}: Megatron's sharded_state_dict "
                               "of the real model", is_loading=side == "load")
    oracle_values = lambda shape, segments: oracle.values(torch, shape, segments)  # noqa: E731
    distributed_save = side == "save" and rm.is_distributed(req)
    try:
        gtp_params = rank_plan.get("gtp_params")
        if not isinstance(gtp_params, dict):
            raise PlanError(f'the {side} rank plan needs "gtp_params" (an object), got {gtp_params!r}')
        reference_rows = rank_plan.get("reference_rows")
        if not isinstance(reference_rows, list):
            raise PlanError(f'the {side} rank plan needs "reference_rows" (a list), got {reference_rows!r}')
        rm.fill_model(M, chunks, tree, values, gtp_params, set(reference_rows), oracle_values, SENTINEL)
        if distributed_save:  # the tree's optimizer tensors are gathered copies: the states themselves take them
            rm.fill_distributed_states(M, optimizer, tree, values, oracle_values)
    except (rm.RealModelPlanError, PlanError) as exc:
        raise staged(exc, f"{side}: fill the real model from the plan", "harness_error")
    if gtp_params or distributed_save:  # the tree copied the filled tensors before the fill: build it again
        tree = megatron_state_tree(M, chunks, optimizer, req,
                                   f"{side}: the filled model's sharded state dict (GTP all-gather, or the "
                                   "DistributedOptimizer's gather of its states)")
    try:
        real_objects(M, tree, rank_plan["objects"])
    except (rm.RealModelPlanError, PlanError) as exc:
        raise staged(exc, f"{side}: fill the real model from the plan", "harness_error")
    return chunks, optimizer, tree


LOAD_PATHS = ("dist_checkpointing", "training")


def training_path_of(scenario):
    """Whether the scenario's worlds call Megatron's training entry points (the plan's "load_path")."""
    path = scenario.get("load_path")
    if path not in LOAD_PATHS:
        raise PlanError(f'plan.json scenario {scenario.get("name")!r} needs "load_path": one of {LOAD_PATHS}, '
                        f"got {path!r}")
    return path == "training"


def training_args(world, rank_plan, side, directory):
    """Megatron's global args for this rank's run of the training path; Megatron refusing the argv the
    harness wrote is a harness error."""
    from megatron_adapter.real_models import training_path
    stage = set_stage(world, f"{side}: Megatron's args (parse_args, validate_args, set_global_variables)")
    try:
        import megatron.training  # noqa: F401 - the pip package megatron-core ships megatron.core only
    except ModuleNotFoundError as exc:
        if exc.name not in ("megatron.training", "megatron"):
            raise staged(exc, stage, "harness_error")
        raise staged(RuntimeError("this Megatron has no megatron.training (the training entry points): "
                                  f"{exc}"), stage, "cannot_run")
    try:
        world.result["training_standins"] = training_path.check()  # still needed, still matching
        training_path.megatron_args(rank_plan["model"], side, directory, world.size, world.rank)
    except BaseException as exc:  # noqa: BLE001 - validate_args asserts
        raise staged(exc, stage, "harness_error")


def harness_kind(exc):
    """"harness_error" for the harness's own failures inside a Megatron call (a stand-in that no longer
    matches, a training-path setup error), else None (Megatron's)."""
    from megatron_adapter.real_models import shims, training_path
    return "harness_error" if isinstance(exc, (shims.ShimError, training_path.TrainingPathError)) else None


def save_scenario(world, scenario, sdir, entry, M, torch, dist, codec, dist_checkpointing, device):
    stage = set_stage(world, "save: build state")
    rank_plan = read_json(os.path.join(sdir, f"save_rank_{world.rank}.json"))
    oracle = Oracle(read_json(os.path.join(sdir, "catalogue.json")))
    if rank_plan.get("kind") in REAL_KINDS:
        chunks, optimizer, tree = real_state(world, M, rank_plan, rank_plan["fill"], "save", oracle)
        if training_path_of(scenario):
            ckpt = os.path.join(sdir, "checkpoint")
            training_args(world, rank_plan, "save", ckpt)
            from megatron_adapter.real_models import training_path
            return save_sd(world, sdir, entry, tree, torch, dist, dist_checkpointing, device,
                           call=("megatron.training.checkpointing.save_checkpoint",
                                 lambda: training_path.save(chunks, optimizer, rank_plan["objects"]),
                                 training_path.iteration_dir(ckpt)))
        return save_sd(world, sdir, entry, tree, torch, dist, dist_checkpointing, device)
    if rank_plan.get("kind") == "gdp_gtp":
        fill_segments = rank_plan["fill"]["decoder.layers.0.mixer.in_proj.weight"]
        sd, _, _ = gtp_state(world, M, torch, rank_plan, lambda shape: oracle.values(torch, shape, fill_segments))
        if scenario.get("load_order") == "to_state_dict":
            save_local(world, sdir, sd, torch)
        return save_sd(world, sdir, entry, sd, torch, dist, dist_checkpointing, device)
    sd = {}
    for i, item in enumerate(rank_plan["entries"]):
        e, path, where = item["entry"], item["path"], f"save_rank_{world.rank}.json entry {i}"
        kind = e["kind"]
        if kind == "tensor":
            st = codec.tensor(dict(e, dtype="int64"), where)
            st.data = oracle.values(torch, e["local_shape"], rank_plan["fill"][path], device)
            sd[path] = st
        elif kind == "factory":
            f = codec.factory(dict(e, tensor=dict(e["tensor"], dtype="int64")), where)
            f.data = oracle.values(torch, e["tensor"]["local_shape"], rank_plan["fill"][path], device)
            sd[path] = f
        else:
            sd[path] = untensored_leaf(M, codec, e, path, where, rank_plan)
    return save_sd(world, sdir, entry, sd, torch, dist, dist_checkpointing, device)


def local_path(sdir, rank):
    return os.path.join(sdir, f"local_rank_{rank}.pt")


def save_local(world, sdir, sd, torch):
    """This rank's local checkpoint, as Megatron's local checkpointing keeps it: the state dict
    turned into an MCoreTensorAwareStateDict (its factories built, tensors held) and written whole
    (torch.save, under a temporary name first)."""
    from megatron.core.dist_checkpointing.tensor_aware_state_dict import MCoreTensorAwareStateDict
    stage = set_stage(world, "save: local checkpoint (MCoreTensorAwareStateDict.from_state_dict)")
    try:
        tasd, _ = MCoreTensorAwareStateDict.from_state_dict(sd, algo="atomic")
    except BaseException as exc:
        raise staged(exc, stage)
    path = local_path(sdir, world.rank)
    torch.save(tasd, path + ".tmp")
    os.replace(path + ".tmp", path)


def load_local(world, sdir, sd, torch):
    """The request `sd` filled from this rank's local checkpoint by to_state_dict."""
    stage = set_stage(world, "load: local checkpoint (MCoreTensorAwareStateDict.to_state_dict)")
    path = local_path(sdir, world.rank)
    if not os.path.exists(path):
        raise staged(ValueError(f"local checkpoint {path} of rank {world.rank} is missing"), stage,
                     "checkpoint_truncated")
    try:
        tasd = torch.load(path, weights_only=False)
        return tasd.to_state_dict(sd, algo="atomic")
    except BaseException as exc:
        raise staged(exc, stage)


def start_measured_call(world, dist, torch, device, entry, what, name=None):
    """Lines every rank up, then zeroes the peak counters just before the call (`name`, by default
    dist_checkpointing.<what>): returns (on CUDA?, the stage name the call runs under)."""
    name = name or f"dist_checkpointing.{what}"
    set_stage(world, f"{what}: barrier before {name}")
    dist.barrier()
    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    entry["rss_before"] = vm_field("VmRSS")
    entry["peak_reset"] = reset_peak_rss()
    return cuda, set_stage(world, f"{what}: {name}")


def save_sd(world, sdir, entry, sd, torch, dist, dist_checkpointing, device, call=None):
    """dist_checkpointing.save of `sd` into sdir/checkpoint, or `call` = (its name, the save, the folder it
    writes the DCP checkpoint into): Megatron's save_checkpoint of the same model (the training path)."""
    nbytes = tensor_bytes(sd, torch)
    entry["bytes"] = nbytes
    entry["memcpy_seconds"] = memcpy_seconds(sd, torch, device)
    ckpt = os.path.join(sdir, "checkpoint")
    os.makedirs(ckpt, exist_ok=True)
    name, save, written = call or ("dist_checkpointing.save", lambda: dist_checkpointing.save(sd, ckpt), ckpt)
    killer = None
    if world.fault("kill_save"):
        killer = kill_when_writing(written, world.rank)
    cuda, stage = start_measured_call(world, dist, torch, device, entry, "save", name)
    t0 = time.perf_counter()
    try:
        save()
    except BaseException as exc:
        raise staged(exc, stage, harness_kind(exc))
    if killer:
        os.kill(os.getpid(), signal.SIGKILL)  # the save finished before the watcher saw a file
    entry["seconds"] = time.perf_counter() - t0
    entry["peak_rss"] = vm_field("VmHWM")
    if cuda:
        entry["cuda_max_allocated"] = torch.cuda.max_memory_allocated()
        entry["cuda_max_reserved"] = torch.cuda.max_memory_reserved()
        # Reserved growth across three consecutive saves (the GTP PR's symptom: ~48 GB per save).
        reserved = [torch.cuda.memory_reserved()]
        for i in range(3):
            stage = set_stage(world, f"save: repeated save {i + 1} of 3")
            os.makedirs(os.path.join(sdir, f"checkpoint_repeat_{i}"), exist_ok=True)
            dist_checkpointing.save(sd, os.path.join(sdir, f"checkpoint_repeat_{i}"))
            reserved.append(torch.cuda.memory_reserved())
        entry["cuda_reserved_after_saves"] = reserved
    stage = set_stage(world, "save: barrier after dist_checkpointing.save")
    dist.barrier()
    if world.rank == 0:
        stage = set_stage(world, "save: list writers from the DCP metadata")
        entry["writers"] = list_writers(written)
    return stage


def kill_when_writing(ckpt, rank):
    """Fault: SIGKILL this rank as soon as it has started writing its checkpoint files."""
    prefix = f"__{rank}_"

    def watch():
        while True:
            try:
                if any(n.startswith(prefix) for n in os.listdir(ckpt)):
                    os.kill(os.getpid(), signal.SIGKILL)
            except OSError:
                pass
            time.sleep(0.002)
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def read_dcp_metadata(ckpt):
    from torch.distributed.checkpoint import FileSystemReader
    return FileSystemReader(ckpt).read_metadata()


def list_writers(ckpt):
    """[key, chunk offsets, file] for every tensor chunk in the checkpoint's metadata."""
    md = read_dcp_metadata(ckpt)
    out = []
    for idx, info in md.storage_data.items():
        if idx.offset is None:
            continue  # a byte item (ShardedObject, common state)
        out.append([idx.fqn, list(idx.offset), info.relative_path])
    return out


def check_files(ckpt, needed_keys):
    """Every stored chunk of a key this rank reads lies inside its file; raises a typed error
    naming the file, the key and the byte range otherwise."""
    md = read_dcp_metadata(ckpt)
    sizes = {}
    for idx, info in md.storage_data.items():
        if idx.fqn not in needed_keys:
            continue
        path = os.path.join(ckpt, info.relative_path)
        if path not in sizes:
            sizes[path] = os.path.getsize(path) if os.path.exists(path) else -1
        end = info.offset + info.length
        if sizes[path] < end:
            have = "is missing" if sizes[path] < 0 else f"has {sizes[path]} bytes"
            raise ValueError(f"checkpoint file {info.relative_path} {have}; key {idx.fqn} chunk "
                             f"{list(idx.offset) if idx.offset is not None else '(bytes)'} needs bytes "
                             f"{info.offset}..{end}")


def load_scenario(world, scenario, sdir, entry, M, torch, dist, codec, dist_checkpointing, device):
    stage = set_stage(world, "load: build state")
    rank_plan = read_json(os.path.join(sdir, f"load_rank_{world.rank}.json"))
    catalogue = read_json(os.path.join(sdir, "catalogue.json"))
    oracle = Oracle(catalogue)
    sd = {}
    chunks = None
    training = training_path_of(scenario)
    if rank_plan.get("kind") in REAL_KINDS:
        chunks, optimizer, sd = real_state(world, M, rank_plan, rank_plan["prefill"], "load", oracle)
        preload_objects, rank_plan_model = rank_plan["objects"], rank_plan["model"]
        if training:
            from megatron_adapter.real_models import training_path
            view = training_path.load_view(os.path.join(sdir, "checkpoint"), os.path.join(sdir, "load_view"))
            training_args(world, rank_plan, "load", view)
        rank_plan = {"entries": [], "prefill": {}, "objects": {}}
    elif training:
        raise PlanError(f"scenario {scenario['name']}: the training load path needs a real model")
    if rank_plan.get("kind") == "gdp_gtp":
        # Sentinel -1 everywhere; Megatron's own wrap zeroes the pad rows of the shard.
        sd, _, _ = gtp_state(world, M, torch, rank_plan,
                             lambda shape: torch.full(shape, SENTINEL, dtype=torch.int64))
        rank_plan = {"entries": [], "prefill": {}, "objects": {}}
    for i, item in enumerate(rank_plan["entries"]):
        e, path, where = item["entry"], item["path"], f"load_rank_{world.rank}.json entry {i}"
        kind = e["kind"]
        if kind in ("tensor", "factory"):
            meta = e if kind == "tensor" else e["tensor"]
            pre = rank_plan["prefill"][path]
            if pre == "sentinel":
                data = torch.full(tuple(meta["local_shape"]), SENTINEL, dtype=torch.int64, device=device)
            else:
                data = oracle.values(torch, meta["local_shape"], pre, device)
            obj = (codec.tensor(dict(e, dtype="int64"), where) if kind == "tensor"
                   else codec.factory(dict(e, tensor=dict(e["tensor"], dtype="int64")), where))
            obj.data = data
            sd[path] = obj
        else:
            sd[path] = untensored_leaf(M, codec, e, path, where, rank_plan)
    if world.fault("hang_load"):
        set_stage(world, "load: before retarget (this rank stopped answering: injected hang)")
        while True:
            time.sleep(60)
    if scenario.get("kind") in ("gdp_gtp", "real_hybrid_hybrid"):
        stage = set_stage(world, f"load: no retarget ({scenario['kind']})")
    elif training:
        stage = set_stage(world, "load: no retarget by the worker (load_checkpoint's own GPT -> hybrid setup)")
    else:
        stage = set_stage(world, "load: retarget (Megatron's gpt_compatible_layer_maps)")
        try:
            if chunks is not None:  # each model chunk's state dict, as the training load path retargets them
                from megatron_adapter.real_models import roundtrip_models
                roundtrip_models.retarget(M, sd, scenario["pattern"])
            else:
                maps = M.interop.gpt_compatible_layer_maps(scenario["pattern"])
                M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)
        except BaseException as exc:
            raise staged(exc, stage)
    ckpt = os.path.join(sdir, "checkpoint")
    if training:
        from megatron_adapter.real_models import training_path
        ckpt = training_path.iteration_dir(ckpt)
    stage = set_stage(world, "load: check checkpoint files against the metadata")
    # The keys this rank reads (its oracle's segments): a damaged chunk of one of them is named.
    expected = read_json(os.path.join(sdir, f"oracle_rank_{world.rank}.json"))
    key_of = {k["id"]: k["key"] for k in catalogue["keys"]}
    needed = {key_of[seg[2]] for t in expected["tensors"] if not t["fresh"] for seg in t["segments"] if seg[2] in key_of}
    try:
        check_files(ckpt, needed)
    except ValueError as exc:
        raise staged(exc, stage, "checkpoint_truncated")
    except Exception as exc:  # noqa: BLE001 - an unreadable .metadata
        raise staged(ValueError(f"checkpoint metadata {os.path.join(ckpt, '.metadata')} unreadable: "
                                f"{type(exc).__name__}: {exc}"), stage, "checkpoint_corrupt")
    nbytes = tensor_bytes(sd, torch)
    entry["bytes"] = nbytes
    entry["memcpy_seconds"] = memcpy_seconds(sd, torch, device)
    cuda, stage = start_measured_call(world, dist, torch, device, entry, "load",
                                      "megatron.training.checkpointing.load_checkpoint" if training else None)
    t0 = time.perf_counter()
    try:
        if training:  # Megatron retargets, loads and hands each chunk its state dict (load_state_dict, strict)
            with training_path.object_values(chunks, preload_objects):
                loaded = training_path.load(chunks, optimizer)
        elif scenario.get("load_order") == "to_state_dict":
            loaded = load_local(world, sdir, sd, torch)
        else:
            loaded = dist_checkpointing.load(sd, ckpt)
    except BaseException as exc:
        # Name the file when DCP's error does (a corrupt chunk surfaces here).
        raise staged(exc, getattr(exc, "_ih_stage", stage), getattr(exc, "_ih_kind", None) or harness_kind(exc))
    if cuda:
        torch.cuda.synchronize()
    entry["seconds"] = time.perf_counter() - t0
    entry["peak_rss"] = vm_field("VmHWM")
    if cuda:
        entry["cuda_max_allocated"] = torch.cuda.max_memory_allocated()
        entry["cuda_max_reserved"] = torch.cuda.max_memory_reserved()
    if chunks is not None:
        stage = set_stage(world, "load: the model (load_state_dict, strict) and its optimizer take what was loaded")
        from megatron_adapter.real_models import roundtrip_models
        try:
            if not training:  # load_checkpoint already did
                roundtrip_models.apply_loaded(chunks, optimizer, loaded, rank_plan_model)
        except BaseException as exc:  # Megatron's model refusing Megatron's loaded state dict
            raise staged(exc, stage, "megatron_error")
        stage = set_stage(world, "load: dump the model's parameters (torch.save)")
        try:
            dump = roundtrip_models.dump_model(M, chunks, optimizer, rank_plan_model,
                                               [t["path"] for t in expected["tensors"]], loaded)
        except roundtrip_models.RealModelPlanError as exc:
            raise staged(exc, stage, "harness_error")
        # Objects (the linears' _extra_state) as the load returned them: the model keeps no copy.
        from megatron_adapter.codec import leaves
        loaded_objects = dict(leaves(loaded))
        for o in expected["objects"]:
            value = loaded_objects.get(o["path"])
            dump[o["path"]] = value if isinstance(value, str) else "json:" + json.dumps(value, default=repr)
        # Common values (the optimizer's param_groups) as the load returned them.
        for p in expected["plain"]:
            if p["path"] in loaded_objects:
                dump[p["path"]] = "json:" + json.dumps(loaded_objects[p["path"]], default=repr)
        write_dump(sdir, world.rank, dump, torch)
        stage = set_stage(world, "load: barrier after dump")
        dist.barrier()
        entry["dumped"] = True  # what Megatron loaded is verified even if what follows raises
        if optimizer is not None and roundtrip_models.is_distributed(rank_plan_model) and not training:
            stage = set_stage(world, "load: the DistributedOptimizer takes what was loaded (load_state_dict)")
            try:
                roundtrip_models.apply_distributed_optimizer(optimizer, loaded, rank_plan_model)
            except BaseException as exc:  # Megatron's optimizer refusing Megatron's loaded state dict
                raise staged(exc, stage, "megatron_error")
        roundtrip_models.done()
        return stage
    stage = set_stage(world, "load: dump what was loaded (torch.save)")
    dump = {}
    plain_paths = {item["path"] for item in rank_plan["entries"] if item["entry"]["kind"] == "plain"}
    for path, value in loaded.items():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            value = value.to(torch.int64)  # the GTP stand-in's float64 holds the oracle's integers exactly
        if path in plain_paths:
            dump[path] = "json:" + json.dumps(value, default=repr)
        elif isinstance(value, torch.Tensor):
            dump[path] = value.detach().to("cpu").contiguous()
        elif isinstance(value, str):
            dump[path] = value
        else:
            dump[path] = "json:" + json.dumps(value, default=repr)
    write_dump(sdir, world.rank, dump, torch)
    stage = set_stage(world, "load: barrier after dump")
    dist.barrier()
    return stage


def write_dump(sdir, rank, dump, torch):
    out = os.path.join(sdir, f"loaded_rank_{rank}.pt")
    torch.save(dump, out + ".tmp")
    os.replace(out + ".tmp", out)  # never a half-written file under the final name


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
            res["error"] = {"kind": "harness_error", "stage": "start", "message": f"{type(exc).__name__}: {exc}"[:2000]}
            os.makedirs(os.path.dirname(path), exist_ok=True)
            write_atomic(path, res)
        except OSError:
            pass
        code = 1
    sys.stderr.flush()
    os._exit(code)  # skip interpreter teardown (gloo/NCCL atexit work can hang on a dead peer)


if __name__ == "__main__":
    main()
