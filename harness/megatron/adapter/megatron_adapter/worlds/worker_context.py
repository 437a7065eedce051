"""What every world worker shares: its context, its process groups, the row codes that carry each
tensor row's provenance, and the Megatron frame of a failure."""

import os
import traceback

CODE_BASE = float(1 << 26)  # row codes: (source + 1) * CODE_BASE + row + 1; 0 = zero (pad) row


def row_code(source, row):
    return (source + 1) * CODE_BASE + row + 1


def decode_rows(values):
    """[(source, row) or None for a zero row] from a 1-D sequence of row codes."""
    out = []
    for v in values:
        v = float(v)
        if v == 0.0:
            out.append(None)
            continue
        q = int(v // CODE_BASE)
        out.append((q - 1, int(v - q * CODE_BASE) - 1))
    return out


def first_column_checked(t, shape):
    """Column 0 of a 2-D tensor each of whose rows the harness filled with one code (a loaded or merged copy of
    such rows), and what is wrong with it, or None: another shape than `shape`, or a row whose columns differ.
    Column 0 alone would hide a column Megatron added, dropped or shifted."""
    if t.dim() != 2 or list(t.shape) != list(shape):
        return [], f"shape {list(t.shape)}, not the {list(shape)} it was filled as"
    mixed = (t != t[:, :1]).any(dim=1).nonzero().flatten().tolist()
    problem = f"{len(mixed)} of its rows differ across columns (first: row {mixed[0]})" if mixed else None
    return t[:, 0].tolist(), problem


class Ctx:
    """What a worker knows: Megatron, its coordinates and its groups; the GTP flag patches it holds for its life
    (gtp_patches, a patches.Applied) and those of the task it runs (task_patches)."""


# The adapter's own files (harness/megatron/adapter/...): their path contains "/megatron/" too,
# but what they raise is the harness's failure, never Megatron's.
_ADAPTER_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _in_adapter(filename):
    return os.path.abspath(filename).startswith(_ADAPTER_ROOT + os.sep)


def megatron_frame(tb):
    """The innermost frame of Megatron's code in the traceback ("path:line in function"), or None."""
    frame = None
    for fs in traceback.extract_tb(tb):
        if "/megatron/" in fs.filename.replace(os.sep, "/") and not _in_adapter(fs.filename):
            frame = f"{fs.filename.split('megatron/', 1)[-1]}:{fs.lineno} in {fs.name}"
    return frame


# What gloo's TCP transport says when a peer process is gone or unreachable: the world's own
# infrastructure failed, whoever called into it (a group Megatron or the harness creates).
_TRANSPORT_FAILURES = ("Gloo connectFullMesh failed", "Connection closed by peer", "Connection reset by peer",
                       "Connection refused")


def transport_failed(message):
    """Whether an error message is gloo's transport failing (a peer gone or unreachable)."""
    return any(text in message for text in _TRANSPORT_FAILURES)


def raised_in_harness(exc):
    """True when the failure is the harness's, whatever Megatron did before: raised in the adapter's own
    code (its innermost Python frame is an adapter file), or the world's gloo transport failing (a
    peer gone), which no Megatron code decides."""
    stack = traceback.extract_tb(exc.__traceback__)
    if bool(stack) and _in_adapter(stack[-1].filename):
        return True
    return transport_failed(str(exc))


def build_groups(ctx):
    import torch.distributed as dist
    T, G, D = ctx.tp_size, ctx.gtp_size, ctx.dp_size
    rank_of = lambda d, t, g: (d * T + t) * G + g  # noqa: E731
    ctx.tp_group = ctx.gtp_group = ctx.dp_cp_group = ctx.dp_excl_group = None
    for d in range(D):
        for g in range(G):
            grp = dist.new_group([rank_of(d, t, g) for t in range(T)], backend="gloo")
            if d == ctx.d and g == ctx.g:
                ctx.tp_group = grp
    for d in range(D):
        for t in range(T):
            grp = dist.new_group([rank_of(d, t, g) for g in range(G)], backend="gloo")
            if d == ctx.d and t == ctx.t:
                ctx.gtp_group = grp
    for t in range(T):
        grp = dist.new_group([rank_of(d, t, g) for d in range(D) for g in range(G)], backend="gloo")
        if t == ctx.t:
            ctx.dp_cp_group = grp
    for t in range(T):
        for g in range(G):
            grp = dist.new_group([rank_of(d, t, g) for d in range(D)], backend="gloo")
            if t == ctx.t and g == ctx.g:
                ctx.dp_excl_group = grp
    install_groups(ctx)


def install_groups(ctx):
    """Points parallel_state's globals at ctx's groups (built by build_groups): a world that keeps
    contexts of several layouts switches between them with this, no collective needed."""
    from megatron.core import parallel_state as ps
    # What initialize_model_parallel sets; the GTP-inclusive dp_cp is Megatron's default dp_cp.
    ps._TENSOR_MODEL_PARALLEL_GROUP = ctx.tp_group
    if hasattr(ps, "_DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT"):
        # A Megatron with GTP: the default dp_cp includes the GTP remat axis; the plain globals
        # exclude it (the true replicas of a GTP shard).
        ps._DATA_PARALLEL_GROUP_WITH_GTP_REMAT = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP_WITH_CP_WITH_GTP_REMAT = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP = ctx.dp_excl_group
        ps._DATA_PARALLEL_GROUP_WITH_CP = ctx.dp_excl_group
        ps._GTP_WEIGHT_REMAT_GROUP = ctx.gtp_group
    else:
        ps._DATA_PARALLEL_GROUP = ctx.dp_cp_group
        ps._DATA_PARALLEL_GROUP_WITH_CP = ctx.dp_cp_group


def registered_groups():
    """Every process group torch.distributed holds in this process now (the default one included)."""
    import torch.distributed as dist
    return set(dist.distributed_c10d._world.pg_map)


def destroy_groups_made_since(before):
    """Destroys every process group made since `before` (registered_groups() then). Each gloo group keeps a
    transport thread that wakes every 10 ms until it is destroyed, and Megatron's destroy_model_parallel
    only forgets its groups (about 20 per initialize_model_parallel): so a world destroys what each task or
    scenario made, wherever Megatron kept it. Destroying a gloo group is local, no collective."""
    import gc
    import torch.distributed as dist
    made = registered_groups() - before
    for group in made:
        dist.destroy_process_group(group)
    if made:
        gc.collect()  # a group's threads end with its last reference, which a task's modules may keep in cycles


def release_task_groups(ctx):
    """After a task that ran Megatron's own initialize_model_parallel: parallel_state reset and pointed back
    at the world's own groups (the worker destroys the groups the task made once it has answered)."""
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
    install_groups(ctx)
