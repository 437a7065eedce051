"""The state dicts a round-trip rank saves or loads, built by Megatron's own code: the synthetic entries of the
plan (codec), the GDP mixer's under GTP (gdp_gtp), or a real model's and its optimizer's (real_*), filled with the
oracle's values; and Megatron's args for the training entry points."""

from megatron_adapter import patches
from megatron_adapter.roundtrip.failures import harness_kind, never_left_the_harness, staged
from megatron_adapter.roundtrip.plan import SENTINEL, PlanError

IN_PROJ = "decoder.layers.0.mixer.in_proj.weight"


def in_proj_design(world, gtp_plan):
    """The in_proj save design this side of the scenario uses: "gather" (Megatron's GTP save) or
    "shard-split" (the harness's candidate of the pending PR's design, spec 4.7, installed on the GDP
    mixer here). A checkout with its own shard-split factory runs its own design: its shard-split side
    is Megatron's code, and a gather side cannot be built from it (NOT RUN, never a pass)."""
    import candidates
    from candidates import shard_split
    design = gtp_plan.get("design")
    if design not in ("gather", "shard-split"):
        raise PlanError(f'plan.json rank plan needs "gtp": {{"design": "gather" | "shard-split"}}, got {design!r}')
    own = candidates.find_real_gtp_split_factory(world.M)
    if own is not None:
        if design == "gather":
            raise staged(PlanError(f"this checkout saves with its own shard-split factory "
                                   f"({own.__module__}.{own.__name__}): no gather side"), "build state", "cannot_run")
        return design
    if design == "shard-split" and not shard_split.installed():
        applied = shard_split.install(world.M)
        world.result["candidate"] = applied
        if not applied["applied"]:
            raise staged(PlanError(f"the candidate shard-split design cannot be applied: {applied['reason']}"),
                         "build state", "cannot_run")
    return design


def gtp_patches(world):
    """The GTP flag patches in force for the rest of the scenario, recorded in the result."""
    world.result["gtp_patches"] = world.scenario_patches.enter_context(patches.applied("gtp")).rows


def _gtp_context(world, g):
    """A worker context of the scenario's (TP, GTP) layout on this rank: its groups built for this scenario (the
    run destroys them after it) and installed in parallel_state."""
    from megatron_adapter.worlds import worker_context
    ctx = worker_context.Ctx()
    ctx.rank, ctx.tp_size, ctx.gtp_size, ctx.dp_size = world.rank, g["tp"], g["gtp"], 1
    ctx.size = world.size
    ctx.d, rest = divmod(world.rank, g["tp"] * g["gtp"])
    ctx.t, ctx.g = divmod(rest, g["gtp"])
    ctx.M, ctx.torch, ctx.factories, ctx.megatron_path = world.M, world.torch, {}, None
    if ctx.size != g["tp"] * g["gtp"]:
        raise ValueError(f"GTP world TP={g['tp']} x G={g['gtp']} does not match {world.size} ranks")
    worker_context.build_groups(ctx)
    return ctx


def gtp_state(world, rank_plan, values):
    """The GDP mixer's sharded state dict on this rank, built by Megatron's own code on the GTP
    stand-in of the gloo worlds' workers (its groups, its stand-in mixer, its GPU-only patches): the in_proj
    weight is wrapped by wrap_module_params_gtp (pads and slices to this rank's (R, C) shard),
    then `values` (a function of the shard's shape) fills the shard before sharded_state_dict
    runs, so the gathered copy carries the same values."""
    from candidates import shard_split
    from megatron_adapter.worlds import gdp_tasks
    torch = world.torch
    g = rank_plan["gtp"]
    gtp_patches(world)
    ctx = _gtp_context(world, g)
    design = in_proj_design(world, g)
    prefix = "decoder.layers.0.mixer."
    mod, weight, mixer_cls = gdp_tasks.standin_mixer(ctx, rank_plan["layout"])
    with torch.no_grad():
        weight.data.copy_(values(tuple(weight.shape)).to(weight.dtype))
    try:
        with shard_split.selected(design):
            return mixer_cls.sharded_state_dict(mod, prefix=prefix, sharded_offsets=(),
                                                metadata={"dp_cp_group": ctx.dp_cp_group})
    except BaseException as exc:  # Megatron's own code failed on a valid layout: a finding
        raise staged(exc, f"{world.phase}: build state (Megatron's {mixer_cls.__name__}.sharded_state_dict)",
                     "megatron_error")


def untensored_leaf(world, e, path, where, rank_plan):
    """A plan entry that carries no tensor data, built alike for save and load: a ShardedObject with
    the plan's object value, a plain common value, or a LocalNonpersistentObject."""
    kind = e["kind"]
    if kind == "object":
        so = world.codec.leaf(e, where)
        so.data = rank_plan["objects"][path]
        return so
    if kind == "plain":
        return e.get("value")
    if kind == "local":
        return world.M.LocalNonpersistentObject(e.get("value"))
    raise ValueError(f"{where}: unknown entry kind {kind!r}")


def entries_state(world, rank_plan, side, data_of):
    """The plan's synthetic entries (codec: real ShardedTensor / ShardedObject / ShardedTensorFactory objects),
    each tensor's data data_of(its local shape, its path)."""
    codec, sd = world.codec, {}
    for i, item in enumerate(rank_plan["entries"]):
        e, path, where = item["entry"], item["path"], f"{side}_rank_{world.rank}.json entry {i}"
        kind = e["kind"]
        if kind == "tensor":
            obj = codec.tensor(dict(e, dtype="int64"), where)
            obj.data = data_of(e["local_shape"], path)
        elif kind == "factory":
            obj = codec.factory(dict(e, tensor=dict(e["tensor"], dtype="int64")), where)
            obj.data = data_of(e["tensor"]["local_shape"], path)
        else:
            obj = untensored_leaf(world, e, path, where, rank_plan)
        sd[path] = obj
    return sd


def real_objects(M, tree, strings):
    """Every ShardedObject of a real model takes the plan's string for its path (what the verifier expects), but
    one the plan leaves as None: it carries Megatron's own value (a DistributedOptimizer's common state in a
    per-DP-group object), which its load consumes."""
    from megatron_adapter.codec import leaves
    for path, leaf in leaves(tree):
        if isinstance(leaf, M.ShardedObject):
            if path not in strings:
                raise PlanError(f"the plan has no object value for {path}")
            if strings[path] is not None:
                leaf.data = strings[path]


def megatron_state_tree(M, chunks, optimizer, req, stage, is_loading=False):
    """The real chunks' (and optimizer's) sharded state dicts: Megatron's checkpoint code, where the mutants
    live, so its failure is Megatron's, unless the failure never reached it (or a patch fell short)."""
    from megatron_adapter.real_models import roundtrip_models as rm
    try:
        return rm.state_tree(M, chunks, optimizer, req, is_loading)
    except BaseException as exc:  # noqa: BLE001
        own = never_left_the_harness(exc.__traceback__)
        raise staged(exc, stage, harness_kind(exc) or ("harness_error" if own else "megatron_error"))


def _build_real(world, req, oracle, side):
    """This rank's model and optimizer: the chunks the handshake built and described (world.built), or built now."""
    from megatron_adapter.real_models import roundtrip_models as rm
    built = world.built
    if built is not None and built.request != req:
        raise staged(PlanError(f"the {side} rank plan's model {req} is not the one this rank built and described "
                               f"({built.request})"), f"{side}: build Megatron's real model", "harness_error")
    try:
        if req["gtp"] > 1 and built is None:  # Megatron's GTP checkpoint code runs only with these (as model dump's)
            gtp_patches(world)
        return rm.build(world.M, req, getattr(world.torch, oracle.dtype), built and built.chunks)
    except BaseException as exc:  # Megatron's model on a valid layout: the factory or patches fall short
        raise staged(exc, f"{side}: build Megatron's real model", "harness_error")


def _fill_real(world, chunks, optimizer, tree, rank_plan, values, side, oracle):
    """The plan's values into the model's parameters (and, on a DistributedOptimizer's save, its states)."""
    from megatron_adapter.real_models import roundtrip_models as rm
    M, req = world.M, rank_plan["model"]
    gtp_params = rank_plan.get("gtp_params")
    if not isinstance(gtp_params, dict):
        raise PlanError(f'the {side} rank plan needs "gtp_params" (an object), got {gtp_params!r}')
    reference_rows = rank_plan.get("reference_rows")
    if not isinstance(reference_rows, list):
        raise PlanError(f'the {side} rank plan needs "reference_rows" (a list), got {reference_rows!r}')
    oracle_values = lambda shape, segments: oracle.values(world.torch, shape, segments)  # noqa: E731
    rm.fill_model(M, chunks, tree, values, gtp_params, set(reference_rows), oracle_values, SENTINEL)
    if side == "save" and rm.is_distributed(req):  # the tree's optimizer tensors are gathered copies
        rm.fill_distributed_states(M, optimizer, tree, values, oracle_values)
    return bool(gtp_params) or (side == "save" and rm.is_distributed(req))


def real_state(world, rank_plan, values, side, oracle):
    """This rank's real model (Megatron's GPTModel or HybridModel) with the plan's values in its
    parameters, and its optimizer (or None) with them in its states: (chunks, optimizer, sharded state dict
    tree). A plan that does not fit the model is a harness error."""
    from megatron_adapter.real_models import roundtrip_models as rm
    M, req = world.M, rank_plan["model"]
    chunks, optimizer = _build_real(world, req, oracle, side)
    tree = megatron_state_tree(M, chunks, optimizer, req, f"{side}: Megatron's sharded_state_dict "
                               "of the real model", is_loading=side == "load")
    try:
        refilled = _fill_real(world, chunks, optimizer, tree, rank_plan, values, side, oracle)
    except (rm.RealModelPlanError, PlanError) as exc:
        raise staged(exc, f"{side}: fill the real model from the plan", "harness_error")
    if refilled:  # the tree copied the filled tensors before the fill: build it again
        tree = megatron_state_tree(M, chunks, optimizer, req,
                                   f"{side}: the filled model's sharded state dict (GTP all-gather, or the "
                                   "DistributedOptimizer's gather of its states)")
    try:
        real_objects(M, tree, rank_plan["objects"])
    except (rm.RealModelPlanError, PlanError) as exc:
        raise staged(exc, f"{side}: fill the real model from the plan", "harness_error")
    return chunks, optimizer, tree


def training_args(world, rank_plan, side, directory):
    """Megatron's global args for this rank's run of the training path, in force for the rest of the scenario;
    Megatron refusing the argv the harness wrote is a harness error."""
    from megatron_adapter.real_models import training_path
    stage = world.stage(f"{side}: Megatron's args (parse_args, validate_args, set_global_variables)")
    try:
        import megatron.training  # noqa: F401 - the pip package megatron-core ships megatron.core only
    except ModuleNotFoundError as exc:
        if exc.name not in ("megatron.training", "megatron"):
            raise staged(exc, stage, "harness_error")
        raise staged(RuntimeError("this Megatron has no megatron.training (the training entry points): "
                                  f"{exc}"), stage, "cannot_run")
    try:
        world.result["training_standins"] = patches.report("training")  # still needed, still matching
        world.scenario_patches.enter_context(
            training_path.global_args(rank_plan["model"], side, directory, world.size, world.rank))
    except BaseException as exc:  # noqa: BLE001 - validate_args asserts
        raise staged(exc, stage, "harness_error")
