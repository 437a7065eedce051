"""Finding R1 as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python R1-gtp-optimizer-resume-no-gtp.py --megatron-path DIR [--control]

Two gloo ranks on CPU, Megatron's parallel_state initialized for each layout. A GDP mixer's in_proj
(D = 120 rows at TP 1: z 20, V 3 x 20, K 3 x 6, Q 6, b 3 x 4, a 4; 2 columns) is Megatron's
ColumnParallelLinear, wrapped under GTP by its own constructor (pad_for_alignment 16), and named by
tag_gtp_params_with_names as training does. The mixer's checkpoint entries are built by
GatedDeltaProductMixer.sharded_state_dict (gather, strip, split by [z|V*|K*|Q|b*|a]); the optimizer is
Megatron's Float16OptimizerWithFloat16Params over torch's Adam, whose sharded_state_dict matches its
params to the model's entries (and backfills the GTP in_proj with _backfill_gtp_sharded_param_map).
Real row k of the weight holds k + 1, of exp_avg 1000 + k + 1. Model and optimizer are saved with
dist_checkpointing.save and loaded with dist_checkpointing.load:

- GTP 2 -> 1: saved at TP1 x GTP2, loaded at TP1 x GTP1 x DP2 (a run that drops GTP);
- GTP 1 -> 2: saved at TP1 x GTP1 x DP2, loaded at TP1 x GTP2 (a run that adopts GTP).

The script prints the optimizer keys Megatron saved, the keys the load requests and what the load
raises (or which rows came back wrong). --control loads at the layout it saved (GTP 2 -> 2 and
1 -> 1), where Megatron round-trips. Exit 1 while a direction fails (the finding reproduces), 0
when both load every row right, 3 when the script itself could not run.

Declared shims and stand-ins (none touches the code under test):
- gtp_api.HAVE_GTP and gated_delta_product.HAVE_GTP -> True, gated_delta_product.is_gtp_param ->
  gtp_api's: GTP is gated on Transformer Engine (needs a GPU); the checkpoint code reads the flags at
  call time, and the mixer bound is_gtp_param to None at import. No GTP kernel runs here.
- torch.cuda.Event -> a stand-in that raises if used; torch.cuda.synchronize -> no-op,
  torch.cuda.current_device -> "cpu"; torch.tensor(..., device="cuda") -> on "cpu";
  torch.Tensor.type() reports CPU tensors as torch.cuda.* (the Float16 optimizer's dtype check).
- filesystem_async._process_memory -> 0 when psutil is absent; _results_queue -> queue.Queue().
- The mixer itself: GatedDeltaProductMixer's constructor needs the mamba_ssm and FLA kernels, so the
  script builds a module carrying what its sharded_state_dict reads (dims, num_householder,
  pg_collection.tp, in_proj, conv1d) and calls GatedDeltaProductMixer.sharded_state_dict on it.
  in_proj is Megatron's ColumnParallelLinear (the local spec's linear), not TE's; conv1d a plain
  module with Megatron's conv weight shape (not in the optimizer).
- The trees are built under torch.no_grad(): gloo's CPU all_gather_into_tensor (the mixer's gather
  of the in_proj shards) writes its output through views, which autograd refuses while the
  parameter requires grad; NCCL writes the buffer in place.
- Adam's state initializer is written out (Megatron's is local to its optimizer factory): exp_avg and
  exp_avg_sq as zeros_like(main param).
"""

import argparse
import datetime
import os
import queue
import re
import sys
import tempfile
import traceback

WORLD, COLS, PAD = 2, 2, 16
D_INNER, GROUP_STATE, NHEADS, HOUSEHOLDER = 20, 6, 4, 3
ROWS = D_INNER * (1 + HOUSEHOLDER) + GROUP_STATE * (1 + HOUSEHOLDER) + NHEADS * (1 + HOUSEHOLDER)  # 120
PREFIX = "decoder.layers.0.mixer."
EXP_AVG_BASE = 1000


def cpu_shims(torch):
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.ssm import gated_delta_product
    from megatron.core.tensor_parallel import gtp_api
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import is_gtp_param

    class NoEvent:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            raise RuntimeError(f"shim: torch.cuda.Event.{name} called on CPU (a GTP kernel path ran)")

    gtp_api.HAVE_GTP = True
    gated_delta_product.HAVE_GTP = True
    gated_delta_product.is_gtp_param = is_gtp_param
    torch.cuda.Event = NoEvent
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    plain_type, plain_tensor = torch.Tensor.type, torch.tensor

    def cuda_type(self, *args, **kwargs):
        name = plain_type(self, *args, **kwargs)
        if args or kwargs or not name.startswith("torch.") or name.startswith("torch.cuda."):
            return name
        return "torch.cuda." + name[len("torch."):]

    def cpu_tensor(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return plain_tensor(*args, **kwargs)

    torch.Tensor.type, torch.tensor = cuda_type, cpu_tensor
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
    if getattr(filesystem_async, "_results_queue", "absent") is None:
        filesystem_async._results_queue = queue.Queue()


def build(torch, gtp):
    """parallel_state at TP1 x GTP gtp, the mixer stand-in around Megatron's in_proj, the optimizer."""
    import types
    from megatron.core import parallel_state
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params
    from megatron.core.optimizer.optimizer_config import OptimizerConfig
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import (tag_gtp_params_with_names,
                                                                               update_gtp_config)
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    parallel_state.destroy_model_parallel()
    parallel_state.initialize_model_parallel(tensor_model_parallel_size=1, gtp_remat_size=gtp)
    update_gtp_config(pad_for_alignment=PAD)
    pgs = ProcessGroupCollection(tp=parallel_state.get_tensor_model_parallel_group(),
                                 dp_cp=parallel_state.get_data_parallel_group(with_context_parallel=True,
                                                                              with_gtp_remat=False),
                                 gtp_remat=parallel_state.get_gtp_weight_remat_group())
    config = ModelParallelConfig(tensor_model_parallel_size=1, gtp_weight_remat_size=gtp, use_cpu_initialization=True,
                                 perform_initialization=False, params_dtype=torch.bfloat16, bf16=True)
    mixer = torch.nn.Module()
    mixer.d_inner_local_tp, mixer.ngroups_local_tp, mixer.d_state = D_INNER, 1, GROUP_STATE
    mixer.nheads_local_tp, mixer.num_householder = NHEADS, HOUSEHOLDER
    mixer.pg_collection = types.SimpleNamespace(tp=pgs.tp)
    mixer.in_proj = ColumnParallelLinear(COLS, ROWS, config=config, init_method=lambda w: None, bias=False,
                                         tp_group=pgs.tp, pg_collection=pgs)
    mixer.conv1d = torch.nn.Module()
    conv_rows = D_INNER * HOUSEHOLDER + (1 + HOUSEHOLDER) * GROUP_STATE
    mixer.conv1d.weight = torch.nn.Parameter(torch.zeros(conv_rows, 1, 4, dtype=torch.bfloat16), requires_grad=False)
    model = torch.nn.Module()
    model.decoder = torch.nn.Module()
    model.decoder.layers = torch.nn.ModuleList([torch.nn.Module()])
    model.decoder.layers[0].mixer = mixer
    tag_gtp_params_with_names(model)

    def init_state_fn(opt, config=None):
        for group in opt.param_groups:
            for p in group["params"]:
                if len(opt.state[p]) == 0:
                    opt.state[p]["exp_avg"] = torch.zeros_like(p.data)
                    opt.state[p]["exp_avg_sq"] = torch.zeros_like(p.data)

    opt_config = OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, params_dtype=torch.bfloat16)
    optimizer = Float16OptimizerWithFloat16Params(torch.optim.Adam([mixer.in_proj.weight], lr=1e-3), opt_config,
                                                  None, init_state_fn)
    return mixer, optimizer, pgs


def provenance(torch, weight, gtp_rank, base):
    shard_rows = weight.shape[0]
    r = gtp_rank * shard_rows + torch.arange(shard_rows)
    values = torch.where(r < ROWS, base + r + 1, torch.zeros_like(r))
    return values.to(torch.float32).unsqueeze(1).expand(shard_rows, COLS)


def trees(torch, mixer, optimizer, pgs, loading):
    from megatron.core.ssm.gated_delta_product import GatedDeltaProductMixer
    with torch.no_grad():  # gloo's CPU all_gather writes through views; see the docstring
        return _trees(torch, mixer, optimizer, pgs, loading, GatedDeltaProductMixer)


def _trees(torch, mixer, optimizer, pgs, loading, GatedDeltaProductMixer):
    # metadata None: the mixer fills in Megatron's default dp_cp group, as in training
    model = GatedDeltaProductMixer.sharded_state_dict(mixer, prefix=PREFIX, metadata=None)
    return {"model": model, "optimizer": optimizer.sharded_state_dict(model, is_loading=loading)}


def optimizer_keys(tree):
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    from megatron.core.dist_checkpointing.mapping import ShardedTensorFactory
    keys = set()
    for v in nested_values(tree["optimizer"]):
        if isinstance(v, ShardedTensorFactory):
            v = v.build()
            keys |= {getattr(x, "key", "") for x in nested_values(v)}
        else:
            keys.add(getattr(v, "key", ""))
    return sorted(k for k in keys if ".exp_avg." in k)


def cause(exc):
    """The exception's message; for torch's CheckpointException (per-rank tracebacks in its text) the
    last 'SomeError: ...' line, i.e. what the failing rank raised; the list of stored keys is elided."""
    text = str(exc)
    raised = [line.strip() for line in text.splitlines() if re.match(r"^\s*[A-Za-z_.]+(Error|Exception): ", line)]
    message = " ".join((raised[-1] if raised else text).split())
    return re.sub(r"(not in state dict): \[.*\]", r"\1: [...]", message)[:300]


def raised_at(exc, frames):
    """file:line function of the deepest Megatron frame (read from the text of a CheckpointException,
    which carries the failing rank's traceback), else of the deepest frame."""
    inner = re.findall(r'File "([^"]*/megatron/core/[^"]*)", line (\d+), in (\w+)', str(exc))
    if inner:
        path, line, function = inner[-1]
        return f"{path.split('/megatron/core/')[1]}:{line} {function}"
    return f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno} {frames[-1].name}"


def rank_main(rank, megatron_path, directory, control, results):
    sys.path.insert(0, megatron_path)
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    from megatron.core import parallel_state

    dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    cpu_shims(torch)
    directions = [(2, 2), (1, 1)] if control else [(2, 1), (1, 2)]
    outcome = {}
    for save_gtp, load_gtp in directions:
        name = f"GTP {save_gtp} -> {load_gtp}"
        step = "save"
        try:
            mixer, optimizer, pgs = build(torch, save_gtp)
            weight, g = mixer.in_proj.weight, parallel_state.get_gtp_weight_remat_rank()
            with torch.no_grad():
                weight.copy_(provenance(torch, weight, g, 0))
                optimizer.init_state_fn(optimizer.optimizer)
                optimizer.optimizer.state[weight.main_param]["exp_avg"].copy_(
                    provenance(torch, weight, g, EXP_AVG_BASE))
            ckpt = os.path.join(directory, f"{save_gtp}-{load_gtp}")
            if rank == 0:
                os.makedirs(ckpt)
            dist.barrier()
            saved = trees(torch, mixer, optimizer, pgs, loading=False)
            record = {"saved": optimizer_keys(saved)}
            dist_checkpointing.save(saved, ckpt)
            dist.barrier()
            step = "load"
            mixer, optimizer, pgs = build(torch, load_gtp)
            request = trees(torch, mixer, optimizer, pgs, loading=True)
            record["requested"] = optimizer_keys(request)
            loaded = dist_checkpointing.load(request, ckpt)
            g = parallel_state.get_gtp_weight_remat_rank()
            wrong = []
            for what, got, base in (("weight", loaded["model"][PREFIX + "in_proj.weight"], 0),
                                    ("exp_avg", loaded["optimizer"]["optimizer"]["state"][0]["exp_avg"],
                                     EXP_AVG_BASE)):
                bad = (got.float() != provenance(torch, got, g, base)).any(dim=1).nonzero().flatten().tolist()
                if bad:
                    wrong.append(f"{what}: {len(bad)} rows wrong (local rows {bad[0]}..{bad[-1]})")
            record["result"] = "; ".join(wrong) if wrong else "every row right"
            record["ok"] = not wrong
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - torch's CheckpointException is a BaseException
            frames = traceback.extract_tb(exc.__traceback__)
            record = locals().get("record", {})
            record["result"] = f"{step} raises {type(exc).__name__}: {cause(exc)} ({raised_at(exc, frames)})"
            record["ok"] = False
            record["megatron"] = any("/megatron/core/" in f.filename for f in frames)
            if not record["megatron"]:
                traceback.print_exc()
        outcome[name] = record
        dist.barrier()
    results.put((rank, outcome))
    dist.destroy_process_group()


def compact(keys):
    """'p.z', 'p.V0', ... -> 'p.{z,V0,...}' (the mixer's split keys on one line)."""
    if len(keys) < 2:
        return ", ".join(keys)
    stems = {k.rsplit(".", 1)[0] for k in keys}
    if len(stems) != 1:
        return ", ".join(keys)
    return f"{stems.pop()}.{{{','.join(k.rsplit('.', 1)[1] for k in keys)}}}"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron-path", required=True)
    parser.add_argument("--control", action="store_true", help="load at the layout saved: Megatron round-trips")
    args = parser.parse_args()
    if not os.path.isfile(os.path.join(args.megatron_path, "megatron", "core", "__init__.py")):
        print(f"not a Megatron-LM checkout: {args.megatron_path}", file=sys.stderr)
        return 3
    import torch.multiprocessing as mp
    context = mp.get_context("spawn")
    results = context.Queue()
    outcomes = {}
    with tempfile.TemporaryDirectory() as directory:
        ranks = [context.Process(target=rank_main, args=(r, args.megatron_path, directory, args.control, results))
                 for r in range(WORLD)]
        for p in ranks:
            p.start()
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
    fails, harness_error = False, False
    for name in outcomes[0]:
        print(f"== {name}, with optimizer state")
        per_rank = [outcomes[r][name] for r in range(WORLD)]
        for what in ("saved", "requested"):
            if what in per_rank[0]:
                print(f"  optimizer exp_avg keys {what}: {compact(per_rank[0][what])}")
        for r, o in enumerate(per_rank):
            print(f"  rank {r}: {o['result']}")
            fails |= not o["ok"]
            harness_error |= o.get("megatron") is False
    if harness_error:
        print("the script itself failed (an exception outside Megatron's code)")
        return 3
    print("finding R1 reproduces" if fails else "finding R1 does not reproduce")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
