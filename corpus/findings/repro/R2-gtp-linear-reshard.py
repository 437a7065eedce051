"""Finding R2 as a standalone script: Megatron's code only, no harness imports.

Run with the Megatron venv's python:

    python R2-gtp-linear-reshard.py --megatron-path DIR [--control]

Eight gloo ranks on CPU. A plain ColumnParallelLinear (no bias, 2 input columns) is built by
Megatron on each rank with a ProcessGroupCollection carrying tp, dp_cp (the GTP-excluded data
parallel group) and gtp_remat, so Megatron's own constructor calls wrap_module_params_gtp, which pads
each TP rank's rows to a multiple of pad_for_alignment x GTP (GTP_CONFIG) and keeps this rank's
slice. Every real row is filled with a value that names its global row (row k holds k + 1, pad rows
hold 0); the optimizer is Megatron's Float16OptimizerWithFloat16Params over torch's Adam (bf16
params, fp32 main copies) whose exp_avg rows hold 1000 + k. The model's sharded_state_dict and the
optimizer's sharded_state_dict(model_sharded_state_dict) are saved with dist_checkpointing.save and
requested again at another layout with dist_checkpointing.load; every loaded row is checked.

Three facets, all on the same 8 ranks (rank = t + T*(g + G*d)):
- weight, GTP change at TP 2: 60 rows per TP rank (120 global), p = 32, saved at TP2 x GTP2 x DP2,
  loaded at TP2 x GTP4 x DP1.
- optimizer, TP change at GTP 2: 120 rows, p = 16, saved at TP2 x GTP2 x DP2 with exp_avg, loaded at
  TP1 x GTP2 x DP4 (weight and exp_avg).
- weight, GTP change at TP 1: 64 rows, p = 32, saved at TP1 x GTP4 x DP2 (padded to 128 rows), loaded at
  TP1 x GTP2 x DP4 (64 rows need no padding there, so the entry has no allow_shape_mismatch): a load
  Megatron refuses is this facet's finding, not the script's error.
--control runs the same layouts with rows that need no padding (64 per TP rank at TP 2, 128 at TP 1,
p = 16 at TP 2), where Megatron reshards correctly. Exit 1 while a loaded row is wrong or a load is
refused (the finding reproduces), 0 when every row is right, 3 when a facet could not complete (any
other exception, printed with where it was raised).

Declared shims (each lifts a CPU-only or Transformer-Engine guard; none touches the code under test):
- gtp_api.HAVE_GTP -> True: GTP is gated on Transformer Engine (HAVE_GTP mirrors HAVE_TE), which
  needs a GPU; the checkpoint helpers read the flag at call time to enter their GTP branch. No GTP
  kernel runs here (no forward, no gather, no reduce-scatter).
- torch.cuda.Event -> a stand-in object: GTPShardedParam's constructor creates events for its
  gather/reduce-scatter streams, never used by the checkpoint path; the stand-in raises if used.
- torch.cuda.synchronize -> no-op, torch.cuda.current_device -> "cpu": no GPU on the machine.
- torch.tensor(..., device="cuda") -> on "cpu": the mixed-precision optimizer keeps its scale in a
  one-element CUDA tensor.
- torch.Tensor.type() with no argument reports a CPU tensor as torch.cuda.*: the Float16 optimizer
  accepts only torch.cuda.{Half,BFloat16,Float}Tensor params.
- filesystem_async._process_memory -> 0 when psutil is absent; _results_queue -> queue.Queue().
- Adam's state initializer is written out (Megatron's is local to its optimizer factory): exp_avg and
  exp_avg_sq as zeros_like(main param), as that initializer does without a precision-aware optimizer.
"""

import argparse
import datetime
import os
import queue
import sys
import tempfile
import traceback

WORLD, COLS = 8, 2
KEY = "lin.weight"
EXP_AVG_BASE = 1000


def cpu_shims(torch):
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    from megatron.core.tensor_parallel import gtp_api

    class NoEvent:
        def __init__(self, *a, **k):
            pass

        def __getattr__(self, name):
            raise RuntimeError(f"shim: torch.cuda.Event.{name} called on CPU (a GTP kernel path ran)")

    gtp_api.HAVE_GTP = True
    torch.cuda.Event = NoEvent
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.current_device = lambda: "cpu"
    plain_type = torch.Tensor.type

    def cuda_type(self, *args, **kwargs):
        name = plain_type(self, *args, **kwargs)
        if args or kwargs or not name.startswith("torch.") or name.startswith("torch.cuda."):
            return name
        return "torch.cuda." + name[len("torch."):]

    torch.Tensor.type = cuda_type
    plain_tensor = torch.tensor

    def cpu_tensor(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return plain_tensor(*args, **kwargs)

    torch.tensor = cpu_tensor
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        filesystem_async._process_memory = lambda: 0
    if getattr(filesystem_async, "_results_queue", "absent") is None:
        filesystem_async._results_queue = queue.Queue()


class Grid:
    """The gloo groups of one layout T x G x D over all WORLD ranks (t fastest, then g, then d)."""

    def __init__(self, dist, rank, tp, gtp):
        self.tp_size, self.gtp_size, self.dp_size = tp, gtp, WORLD // (tp * gtp)
        self.t, self.g, self.d = rank % tp, (rank // tp) % gtp, rank // (tp * gtp)
        at = lambda t, g, d: t + tp * (g + gtp * d)  # noqa: E731
        dps, tps, gtps = range(self.dp_size), range(tp), range(gtp)
        self.tp = self._mine(dist, [[at(t, g, d) for t in tps] for d in dps for g in gtps], rank)
        self.gtp = self._mine(dist, [[at(t, g, d) for g in gtps] for d in dps for t in tps], rank)
        self.dp = self._mine(dist, [[at(t, g, d) for d in dps] for g in gtps for t in tps], rank)

    @staticmethod
    def _mine(dist, all_ranks, rank):
        mine = None
        for ranks in all_ranks:  # every rank creates every group, in the same order
            group = dist.new_group(ranks, backend="gloo")
            if rank in ranks:
                mine = group
        return mine


def build(torch, grid, rows_total, pad):
    """Megatron's ColumnParallelLinear under GTP and its Float16 optimizer, at one layout."""
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params
    from megatron.core.optimizer.optimizer_config import OptimizerConfig
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import update_gtp_config
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    update_gtp_config(pad_for_alignment=pad)
    config = ModelParallelConfig(tensor_model_parallel_size=grid.tp_size, gtp_weight_remat_size=grid.gtp_size,
                                 use_cpu_initialization=True, perform_initialization=False,
                                 params_dtype=torch.bfloat16, bf16=True)
    pgs = ProcessGroupCollection(tp=grid.tp, dp_cp=grid.dp, gtp_remat=grid.gtp)
    linear = ColumnParallelLinear(COLS, rows_total, config=config, init_method=lambda w: None, bias=False,
                                  tp_group=grid.tp, pg_collection=pgs)

    def init_state_fn(opt, config=None):
        for group in opt.param_groups:
            for p in group["params"]:
                if len(opt.state[p]) == 0:
                    opt.state[p]["exp_avg"] = torch.zeros_like(p.data)
                    opt.state[p]["exp_avg_sq"] = torch.zeros_like(p.data)

    opt_config = OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, params_dtype=torch.bfloat16)
    optimizer = Float16OptimizerWithFloat16Params(torch.optim.Adam([linear.weight], lr=1e-3), opt_config, None,
                                                  init_state_fn)
    return linear, optimizer


def provenance(torch, grid, weight, rows_total, base):
    """Rows of this rank's shard: per-TP row r = g * R + i holds base + global row + 1 (0 on padding)."""
    per_tp, shard_rows = rows_total // grid.tp_size, weight.shape[0]
    r = grid.g * shard_rows + torch.arange(shard_rows)
    values = torch.where(r < per_tp, base + grid.t * per_tp + r + 1, torch.zeros_like(r))
    return values.to(torch.float32).unsqueeze(1).expand(shard_rows, COLS)


def trees(linear, optimizer, grid, loading):
    model = linear.sharded_state_dict(prefix="lin.", metadata={"dp_cp_group": grid.dp})
    return {"model": model, "optimizer": optimizer.sharded_state_dict(model, is_loading=loading)}


def rows_report(torch, grid, loaded, rows_total, base):
    """(t, per-TP row, expected global row or None for padding, what came back) for each wrong row."""
    expected = provenance(torch, grid, loaded, rows_total, base)
    shard_rows = loaded.shape[0]
    wrong = []
    for i in range(shard_rows):
        got = loaded[i].float()
        if torch.equal(got, expected[i]):
            continue
        want = int(expected[i, 0]) - base - 1 if expected[i, 0] else None
        value = float(got[0])
        came = "zero" if value == 0 else (f"global row {int(value) - base - 1}"
                                          if value == int(value) and bool((got == value).all()) else f"{value}")
        wrong.append((grid.t, grid.g * shard_rows + i, want, came))
    return wrong


def rank_main(rank, megatron_path, directory, control, results):
    sys.path.insert(0, megatron_path)
    import torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing

    dist.init_process_group("gloo", init_method="file://" + os.path.join(directory, "store"), rank=rank,
                            world_size=WORLD, timeout=datetime.timedelta(seconds=60))
    cpu_shims(torch)
    per_tp_rows = 64 if control else 60
    facets = [  # name, save (tp, gtp, p), load (tp, gtp, p), global rows, with optimizer state
        ("weight, GTP 2 -> 4 at TP 2", (2, 2, 16 if control else 32), (2, 4, 16 if control else 32), 2 * per_tp_rows,
         False),
        ("optimizer, TP 2 -> 1 at GTP 2", (2, 2, 16), (1, 2, 16), 2 * per_tp_rows, True),
        ("weight, GTP 4 -> 2 at TP 1", (1, 4, 32), (1, 2, 32), 128 if control else 64, False),
    ]
    outcome = {}
    for index, (name, save, load, rows_total, with_optimizer) in enumerate(facets):
        loading = False
        try:
            grid = Grid(dist, rank, save[0], save[1])
            linear, optimizer = build(torch, grid, rows_total, save[2])
            with torch.no_grad():
                linear.weight.copy_(provenance(torch, grid, linear.weight, rows_total, 0))
                optimizer.init_state_fn(optimizer.optimizer)
                main = linear.weight.main_param
                optimizer.optimizer.state[main]["exp_avg"].copy_(
                    provenance(torch, grid, main, rows_total, EXP_AVG_BASE))
            ckpt = os.path.join(directory, f"facet{index}")
            if rank == 0:
                os.makedirs(ckpt)
            dist.barrier()
            saved = trees(linear, optimizer, grid, loading=False)
            keys = sorted(k for k in _keys(saved))
            dist_checkpointing.save(saved, ckpt)
            dist.barrier()
            grid = Grid(dist, rank, load[0], load[1])
            linear, optimizer = build(torch, grid, rows_total, load[2])
            loading = True
            loaded = dist_checkpointing.load(trees(linear, optimizer, grid, loading=True), ckpt)
            wrong = {"weight": rows_report(torch, grid, loaded["model"][KEY], rows_total, 0)}
            if with_optimizer:
                exp_avg = loaded["optimizer"]["optimizer"]["state"][0]["exp_avg"]
                wrong["exp_avg"] = rows_report(torch, grid, exp_avg, rows_total, EXP_AVG_BASE)
            outcome[name] = {"keys": keys, "wrong": wrong if grid.d == 0 else {k: [] for k in wrong},
                             "shard": tuple(linear.weight.shape)}
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - torch's CheckpointException is a BaseException
            where = traceback.extract_tb(exc.__traceback__)[-1]
            # A CheckpointException carries each failed rank's traceback: its last line is the error.
            text = next((line.strip() for line in reversed(str(exc).splitlines()) if line.strip()), "")
            # Megatron refusing a load of a checkpoint its own save wrote is the finding's loud face.
            outcome[name] = {"refused" if loading else "error": f"{type(exc).__name__}: {text[:300]} "
                             f"({os.path.basename(where.filename)}:{where.lineno} {where.name})"}
        dist.barrier()
    results.put((rank, outcome))
    dist.destroy_process_group()


def _keys(tree):
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    return {getattr(v, "key", None) for v in nested_values(tree) if getattr(v, "key", None)}


def ranges(rows):
    """[(r, want, came)] sorted -> compact lines, consecutive rows of one kind merged."""
    out, start = [], None
    for r, want, came in rows:
        kind = "zero" if came == "zero" else ("shifted" if came.startswith("global row") else came)
        if start and start[2] == kind and r == start[1] + 1 and (want is None) == (start[4] is None):
            start = (start[0], r, kind, start[3], start[4], came)
            continue
        if start:
            out.append(start)
        start = (r, r, kind, came, want, came)
    if start:
        out.append(start)
    lines = []
    for first, last, kind, came_first, want, came_last in out:
        holds = "padding" if want is None else "real rows"
        got = "zeros" if kind == "zero" else \
            (came_first if first == last else f"{came_first} .. {came_last.split()[-1]}")
        lines.append(f"rows {first}..{last} ({holds}) came back as {got}")
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megatron-path", required=True)
    parser.add_argument("--control", action="store_true", help="rows that need no padding: Megatron is right")
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
                rank, outcome = results.get(timeout=400)
                outcomes[rank] = outcome
        except queue.Empty:
            print("a rank did not report within 400 s", file=sys.stderr)
        for p in ranks:
            p.join(timeout=30)
            if p.is_alive():
                p.kill()
    if len(outcomes) != WORLD:
        print("harness error: not every rank reported", file=sys.stderr)
        return 3
    reproduces, errors = False, False
    for name in outcomes[0]:
        per_rank = [outcomes[r][name] for r in range(WORLD)]
        failed = [(r, o["error"]) for r, o in enumerate(per_rank) if "error" in o]
        print(f"== {name}" + (" (control: no padding)" if args.control else ""))
        if failed:
            for r, error in failed:
                print(f"  rank {r}: {error}")
            errors = True
            continue
        refused = [(r, o["refused"]) for r, o in enumerate(per_rank) if "refused" in o]
        if refused:
            reproduces = True
            print(f"  the load is refused on {len(refused)} of {WORLD} ranks, e.g. rank {refused[0][0]}: "
                  f"{refused[0][1]}")
            continue
        print(f"  saved keys: {', '.join(per_rank[0]['keys'])}")
        for what in per_rank[0]["wrong"]:
            rows = sorted({(t, r, want, came) for o in per_rank for (t, r, want, came) in o["wrong"][what]},
                          key=lambda x: (x[0], x[1]))
            if not rows:
                print(f"  {what}: every loaded row right")
                continue
            reproduces = True
            real = sum(1 for row in rows if row[2] is not None)
            print(f"  {what}: {len(rows)} loaded rows wrong ({real} real, {len(rows) - real} padding), no error raised")
            for t in sorted({row[0] for row in rows}):
                for line in ranges([(r, want, came) for (tt, r, want, came) in rows if tt == t]):
                    print(f"    TP rank {t}: {line}")
    if errors:
        print("the script could not complete a facet (see the errors above)")
        return 3
    print("finding R2 reproduces: rows misplaced or zeroed, or the load refused" if reproduces
          else "finding R2 does not reproduce")
    return 1 if reproduces else 0


if __name__ == "__main__":
    sys.exit(main())
