"""World tasks that save and load a GTP weight with Megatron's own optimizer (findings R1, R2): a
ColumnParallelLinear that Megatron's constructor wraps under GTP, either alone (a plain GTP linear)
or as a GDP mixer's in_proj, and Float16OptimizerWithFloat16Params over torch's Adam, whose
sharded_state_dict matches its params to the model's entries by identity (and rebuilds the GTP
in_proj's per-shard entry, _backfill_gtp_sharded_param_map). Nothing of the optimizer's state dict
is built by the harness. The module and the optimizer are saved with dist_checkpointing.save and
requested again at another layout with dist_checkpointing.load.

Rows carry their provenance as small values: the save's TP-local row x of TP rank t, of D real rows
per TP rank, holds t * D + x + 1 in the weight (bf16) and EXP_AVG_BASE + t * D + x + 1 in its exp_avg
(the fp32 main param's state), pad rows 0 (row_value); saved_row reads a loaded value back. bf16 holds
every integer up to 256 exactly, so the op limits the rows to that. Which row a loaded row should
hold is the harness's to say (the gate's resume checks), not this module's.

The CPU patches the optimizer needs are the registry's "float16_optimizer" family (patches/table.py), in force
for the task (task_table.py) and undone after it; Adam's state initializer is written out (Megatron's is local to
its optimizer factory).
"""

import contextlib
import math
import re

from megatron_adapter.worlds.gdp_tasks import layout_dims
from megatron_adapter.worlds.worker_context import first_column_checked, megatron_frame, raised_in_harness

EXP_AVG_BASE = 1000
IN_PROJ_PREFIX = "decoder.layers.0.mixer."
LINEAR_PREFIX = "decoder.layers.0.mlp.linear_fc1."


def row_value(base, t, x, rows):
    """What TP-local row x of save TP rank t carries, of `rows` real rows per TP rank: 0 past them."""
    return 0.0 if x >= rows else float(base + t * rows + x + 1)


def saved_row(value, base, tp_size, rows):
    """[save TP rank, TP-local row] whose row_value `value` is, None for zeros, or the value's text
    when no saved row carried it."""
    code = value - base - 1
    if value == 0:
        return None
    if math.isfinite(code) and code == int(code) and 0 <= code < tp_size * rows:
        return list(divmod(int(code), rows))
    return repr(value)


@contextlib.contextmanager
def _pad_for_alignment(ctx, pad):
    gtp = ctx.M.gtp
    saved = gtp.GTP_CONFIG.pad_for_alignment
    gtp.GTP_CONFIG.pad_for_alignment = pad
    try:
        yield
    finally:
        gtp.GTP_CONFIG.pad_for_alignment = saved


def _build(ctx, p):
    """The module (named as training names it), its weight, the optimizer and the model's sharded
    state dict function, at this world's layout."""
    torch = ctx.torch
    import types
    from megatron.core.model_parallel_config import ModelParallelConfig
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params
    from megatron.core.optimizer.optimizer_config import OptimizerConfig
    from megatron.core.process_groups_config import ProcessGroupCollection
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import tag_gtp_params_with_names
    from megatron.core.tensor_parallel.layers import ColumnParallelLinear

    sections = list(p["sections"])  # TP-local
    config = ModelParallelConfig(tensor_model_parallel_size=ctx.tp_size, gtp_weight_remat_size=ctx.gtp_size,
                                 use_cpu_initialization=True, perform_initialization=False,
                                 params_dtype=torch.bfloat16, bf16=True)
    pgs = ProcessGroupCollection(tp=ctx.tp_group, dp_cp=ctx.dp_excl_group, gtp_remat=ctx.gtp_group)
    linear = ColumnParallelLinear(int(p["cols"]), sum(sections) * ctx.tp_size, config=config,
                                  init_method=lambda w: None, bias=False, tp_group=ctx.tp_group, pg_collection=pgs)
    model = torch.nn.Module()
    model.decoder = torch.nn.Module()
    model.decoder.layers = torch.nn.ModuleList([torch.nn.Module()])
    if p["module"] == "gdp_in_proj":
        _, d_inner, group_state, nheads, m = layout_dims(sections, list(p["names"]))
        mixer = torch.nn.Module()
        mixer.d_inner_local_tp, mixer.ngroups_local_tp, mixer.d_state = d_inner, 1, group_state
        mixer.nheads_local_tp, mixer.num_householder = nheads, m
        mixer.pg_collection = types.SimpleNamespace(tp=ctx.tp_group)
        mixer.in_proj = linear
        mixer.conv1d = torch.nn.Module()  # Megatron's conv weight shape; not in the optimizer
        mixer.conv1d.weight = torch.nn.Parameter(
            torch.zeros(d_inner * m + (1 + m) * group_state, 1, 4, dtype=torch.bfloat16), requires_grad=False)
        model.decoder.layers[0].mixer = mixer
        key = IN_PROJ_PREFIX + "in_proj.weight"

        def sharded():
            # metadata None: the mixer takes Megatron's default dp_cp group, as in training
            return ctx.M.gdp.GatedDeltaProductMixer.sharded_state_dict(mixer, prefix=IN_PROJ_PREFIX, metadata=None)
    else:
        model.decoder.layers[0].mlp = torch.nn.Module()
        model.decoder.layers[0].mlp.linear_fc1 = linear
        key = LINEAR_PREFIX + "weight"

        def sharded():
            return linear.sharded_state_dict(prefix=LINEAR_PREFIX, metadata={"dp_cp_group": ctx.dp_excl_group})
    tag_gtp_params_with_names(model)

    def init_state_fn(opt, config=None):
        for group in opt.param_groups:
            for param in group["params"]:
                if len(opt.state[param]) == 0:
                    opt.state[param]["exp_avg"] = torch.zeros_like(param.data)
                    opt.state[param]["exp_avg_sq"] = torch.zeros_like(param.data)

    opt_config = OptimizerConfig(optimizer="adam", lr=1e-3, bf16=True, params_dtype=torch.bfloat16)
    optimizer = Float16OptimizerWithFloat16Params(torch.optim.Adam([linear.weight], lr=1e-3), opt_config, None,
                                                  init_state_fn)
    return key, linear.weight, optimizer, sharded


def _provenance(ctx, p, weight, base):
    """This rank's rows, each carrying row_value of the TP-local row it holds (pad rows 0)."""
    torch = ctx.torch
    rows, real = weight.shape[0], sum(p["sections"])
    first = ctx.g * rows if getattr(weight, "is_gtp_weight_remat", False) else 0
    values = [row_value(base, ctx.t, first + j, real) for j in range(rows)]
    return torch.tensor(values, dtype=torch.float32).unsqueeze(1).expand(rows, int(p["cols"]))


def _trees(ctx, sharded, optimizer, loading):
    torch = ctx.torch
    with torch.no_grad():  # gloo's CPU all_gather writes through views, which autograd refuses
        model = sharded()
        return {"model": model, "optimizer": optimizer.sharded_state_dict(model, is_loading=loading)}


def _exp_avg_keys(tree):
    from megatron.core.dist_checkpointing.dict_utils import nested_values
    from megatron.core.dist_checkpointing.mapping import ShardedTensorFactory
    keys = set()
    for v in nested_values(tree["optimizer"]):
        if isinstance(v, ShardedTensorFactory):
            keys |= {getattr(x, "key", "") for x in nested_values(v.build())}
        else:
            keys.add(getattr(v, "key", ""))
    return sorted(k for k in keys if k.startswith("optimizer.state.exp_avg."))


def _cause(exc):
    """What the failing rank raised: for torch's CheckpointException (every rank's traceback in its
    text) the last 'SomeError: ...' line; the list of stored keys a KeyError carries is elided."""
    text = str(exc)
    raised = [ln.strip() for ln in text.splitlines() if re.match(r"^\s*[A-Za-z_.]+(Error|Exception): ", ln)]
    message = " ".join((raised[-1] if raised else text).split())
    return f"{type(exc).__name__}: " + re.sub(r"(not in state dict): \[.*\]", r"\1: [...]", message)[:400]


def _frame(exc):
    """The deepest Megatron frame named in a CheckpointException's text, else the traceback's."""
    inner = re.findall(r'File "[^"]*/(megatron/core/[^"]*)", line (\d+), in (\w+)', str(exc))
    if inner:
        path, line, function = inner[-1]
        return f"{path.split('megatron/', 1)[1]}:{line} in {function}"
    return megatron_frame(exc.__traceback__)


def task_opt_save(ctx, p):
    torch = ctx.torch
    import torch.distributed as dist
    from megatron.core import dist_checkpointing
    with _pad_for_alignment(ctx, int(p["pad_for_alignment"])):
        key, weight, optimizer, sharded = _build(ctx, p)
        with torch.no_grad():
            weight.copy_(_provenance(ctx, p, weight, 0))
            optimizer.init_state_fn(optimizer.optimizer)
            state = optimizer.optimizer.state[weight.main_param]
            state["exp_avg"].copy_(_provenance(ctx, p, weight, EXP_AVG_BASE))
            # As after a training step: torch's Adam keeps a step beside the moments, which its load_state_dict
            # requires of every parameter with a state (Megatron saves it as the common step).
            state["step"] = torch.tensor(1.0)
        tree = _trees(ctx, sharded, optimizer, loading=False)
        dist.barrier()
        dist_checkpointing.save(tree, p["dir"])
        dist.barrier()
    return {"saved_keys": _exp_avg_keys(tree)}


def task_opt_load(ctx, p):
    """What this rank's load asked for and got: the exp_avg keys requested, its coordinates (the
    TP-local row of its row 0: g * R on a GTP shard of R rows), and Megatron's refusal or the first
    column of the loaded weight and exp_avg rows, with what is unexplained where they are not the parameter's
    shape or a row's columns differ, or where the optimizer's param_groups lost the main parameter."""
    from megatron.core import dist_checkpointing
    with _pad_for_alignment(ctx, int(p["pad_for_alignment"])):
        key, weight, optimizer, sharded = _build(ctx, p)
        tree = _trees(ctx, sharded, optimizer, loading=True)
        gtp_shard = bool(getattr(weight, "is_gtp_weight_remat", False))
        out = {"requested_keys": _exp_avg_keys(tree), "tp": ctx.t, "gtp": ctx.g,
               "first_row": ctx.g * int(weight.shape[0]) if gtp_shard else 0}
        try:
            loaded = dist_checkpointing.load(tree, p["dir"])
            # As training resumes: the optimizer takes its loaded state through its own load_state_dict, so
            # the exp_avg judged is the one it holds after (Float16OptimizerWithFloat16Params.load_state_dict).
            optimizer.load_state_dict(loaded["optimizer"])
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - torch's CheckpointException is a BaseException
            if raised_in_harness(exc):
                raise
            return dict(out, load_error=_cause(exc), megatron_frame=_frame(exc))
    found = {"weight": loaded["model"][key], "exp_avg": optimizer.optimizer.state[weight.main_param]["exp_avg"]}
    problems = []
    for what, tensor in found.items():
        out[what], problem = first_column_checked(tensor.float(), weight.shape)
        if problem:
            problems.append(f"rank (t={ctx.t}, g={ctx.g}): the loaded {what} has {problem}")
    # What training steps and schedules the learning rate through after the resume: the optimizer's own
    # param_groups, which must hold the main parameter the loaded state belongs to.
    groups = optimizer.param_groups
    if not any(param is weight.main_param for group in groups for param in group["params"]):
        problems.append(f"rank (t={ctx.t}, g={ctx.g}): after load_state_dict the optimizer's param_groups "
                        f"({len(groups)} group(s)) do not hold the weight's main parameter")
    return dict(out, unexplained="; ".join(problems)) if problems else out
