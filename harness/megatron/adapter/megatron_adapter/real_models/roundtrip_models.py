"""Real models in a round-trip world (`interop-harness roundtrip --real`, docs/roundtrip.md "Real models").

Each rank builds its chunks of Megatron's own GPTModel or HybridModel (real_models/factory.py, under the
declared CPU shims) and turns their parameters to the scenario's oracle dtype (Module.to): float64, so the
oracle's provenance values (integers below 2^45) are exact, or float32 where the scenario keeps Megatron's
DistributedOptimizer (fp32 parameters only; the plan then keeps every value below 2^24). The plan
(harness/roundtrip/world_plan.cc) was computed from the same models as the Megatron target describes them
(`model dump`), so it names every tensor by the path `codec.leaves` gives it here:
  - `fill_model` writes the plan's values into the parameters themselves (through the sharded state
    dict's tensors, which are the parameters or views of them), on the save side the GPT's, on the load
    side the sentinel -1 for loaded entries and the fresh layers' own values. A GTP-wrapped Mamba
    in_proj is the exception: its entry is a factory over the all-gathered TP-local weight, a copy, so
    the plan names it in "gtp_params" with the parameter's (R, C) shard shape and its values (the
    shard's real rows; pad rows 0) go into the parameter; `state_tree` then rebuilds the tree,
    which gathers them again;
  - `dump_model` reads the parameters back after Megatron's load and `load_state_dict`.
With the model request's "optimizer", each rank also builds Megatron's optimizer over its chunks and the tree
holds its sharded state dict under "optimizer":
  - optimizer_kind "fp32", the FP32Optimizer (factory.fp32_optimizer): its ShardedTensors' data are Adam's
    moments themselves, so the fill writes them; after the load the optimizer takes its part through its own
    `load_state_dict` and the dump reads the moments from a fresh sharded state dict of the optimizer;
  - optimizer_kind "distributed", the DistributedOptimizer (factory.distributed_optimizer, its gradient buffer
    cut into several buckets) in the model-space format fully_reshardable: its tree's tensors are gathered
    copies, so on the save side `fill_distributed_states` writes each DP rank's slice of the plan's values
    into the moments the optimizer holds and the tree is built again from them (Megatron's own gather and
    slicing, what is under test); its `param` state is the fp32 parameter itself (the plan gives both one
    key). On the load side the tree is Megatron's request: the dump reads what `dist_checkpointing.load`
    returned into it, before the optimizer's own `load_state_dict` (`apply_distributed_optimizer`); after that
    load (past finding F, under its declared shim) `own_optimizer_states` reads what the optimizer itself holds
    through a fresh sharded state dict of it, as the FP32Optimizer's.
A factory's rows are taken as its built tensors' rows one after the other (how the plan lays them out);
`fill_model` checks that on Megatron's factory and refuses a different layout as a harness error, except
for the paths in "reference_rows": a GTP-wrapped SwiGLU fc1, whose rows the plan takes from the reference
(the GTP shard of the TP-local [W; V]) because Megatron's factory cuts W and V out of the shard (finding S).
"""

from megatron_adapter.codec import leaves
from megatron_adapter import patches
from megatron_adapter.real_models import factory


class RealModelPlanError(Exception):
    """The plan and this rank's real model disagree (a harness error: never blamed on Megatron)."""


# A round trip's DistributedOptimizer cuts its gradient buffer into buckets of about this many elements: the
# worlds' small models then have several buckets, with end padding between them, which the model-space format
# must step over (Megatron's fix 32a03b77c5; one bucket, training's default without --overlap-grad-reduce, never
# exercises it).
DISTRIBUTED_BUCKET_ELEMENTS = 5000


def build_chunks(M, req):
    """{chunk name: model} of this rank as Megatron builds it, parallel_state set for the request's layout over
    the world's default (gloo) group (UnsupportedConfig where the factory cannot build it here)."""
    factory.init_parallel_state(req)
    factory.require_buildable(req)
    with _shims(req):
        return factory.build(M, req)


def build(M, req, dtype, chunks=None):
    """(chunks {name: model}, optimizer or None) of this rank: `chunks` (build_chunks, already described in the
    handshake) or built now, parameters turned to `dtype` (the scenario's oracle dtype); `state_tree` then asks
    Megatron's checkpoint code for their sharded state dicts."""
    if chunks is None:
        chunks = build_chunks(M, req)
    with _shims(req):
        for model in chunks.values():
            model.to(dtype=dtype)  # before sharded_state_dict: its tensors are these parameters
        optimizer = _optimizer(M, chunks, req, dtype)
    return chunks, optimizer


def _optimizer(M, chunks, req, dtype):
    if not req.get("optimizer"):
        return None
    kind = req.get("optimizer_kind")
    if kind == "distributed":
        if dtype != M.torch.float32:
            raise RealModelPlanError(f"the DistributedOptimizer takes fp32 parameters; the plan's oracle is {dtype}")
        optimizer = factory.distributed_optimizer(M, chunks, bucket_size=DISTRIBUTED_BUCKET_ELEMENTS)
        _require_padded_buckets(optimizer)
        return optimizer
    if kind != "fp32":
        raise RealModelPlanError("a real round trip saves Megatron's FP32Optimizer (optimizer_kind fp32, parameters "
                                 "of any dtype) or its DistributedOptimizer (distributed, fp32 parameters); the plan "
                                 f"asks {kind!r}")
    optimizer = factory.fp32_optimizer(M, chunks)
    _first_step(M, optimizer)
    return optimizer


def _bucket_layout(optimizer):
    """[[(bucket elements, of them unpadded), ...] per gradient buffer] of a DistributedOptimizer."""
    return [[(b.grad_data.numel(), b.numel_unpadded) for b in buffer.buckets]
            for part in factory.optimizer_parts(optimizer) for buffer in part.buffers]


def _require_padded_buckets(optimizer):
    """The scenario claims a gradient buffer of several buckets with end padding before the last: a layout
    without them would exercise nothing of it (a harness error, never a pass)."""
    layout = _bucket_layout(optimizer)
    if not any(len(buckets) > 1 and any(n > unpadded for n, unpadded in buckets[:-1]) for buckets in layout):
        raise RealModelPlanError(f"the DistributedOptimizer's buckets {layout} have no end padding before the last "
                                 f"bucket at {DISTRIBUTED_BUCKET_ELEMENTS} elements a bucket")


def _first_step(M, optimizer):
    """One step of torch's Adam on zero gradients: it creates Adam's states as training's first step does,
    `step` with them (Megatron saves it as the common step; torch's Adam refuses moments without one, so
    the states of Megatron's init_state_fn alone cannot be loaded). The fill then overwrites the moments
    and the parameters the step moved."""
    torch = M.torch
    for part in factory.optimizer_parts(optimizer):
        params = [p for group in part.optimizer.param_groups for p in group["params"]]
        for p in params:
            p.grad = torch.zeros_like(p)
        part.optimizer.step()
        for p in params:
            p.grad = None


def is_distributed(req):
    return bool(req.get("optimizer")) and req.get("optimizer_kind") == "distributed"


def _shims(req):
    """The declared CPU patches of the model, the GDP mixer's and the optimizer's with them where the model has
    them (as `model dump --mixer gdp --optimizer`)."""
    return patches.applied(*factory.patch_families(req))


def state_tree(M, chunks, optimizer, req, is_loading=False):
    """{name: model.sharded_state_dict()}, and the optimizer's over them under "optimizer" (a load's
    re-creates Adam's states first). Collective under GTP (the in_proj's all-gather), so every rank of
    the world calls it; under no_grad, as model dump's (gloo's CPU all_gather_into_tensor writes through
    views autograd refuses while the parameter requires grad)."""
    with _shims(req), M.torch.no_grad():
        tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
        if optimizer is not None:
            model_tree = dict(tree)
            tree["optimizer"] = (factory.distributed_sharded_state_dict(optimizer, model_tree, is_loading)
                                 if is_distributed(req) else
                                 factory.fp32_sharded_state_dict(optimizer, model_tree, is_loading))
    return tree


def fill_model(M, chunks, tree, plan_values, gtp_params, reference_rows, values, sentinel):
    """Writes every tensor of `tree` from plan_values[path]: a list of segments (`values(shape, segments)` is
    the oracle's int64 tensor of them), or "sentinel"; a path of `gtp_params` ({path: shard shape}) writes the
    chunk's parameter of that name instead; a factory's path in `reference_rows` is not held to its built
    tensors' layout. Objects take the plan's strings elsewhere; returns the paths filled."""
    torch = M.torch
    done = []
    with torch.no_grad():
        for path, leaf in leaves(tree):
            if not isinstance(leaf, (M.ShardedTensor, M.ShardedTensorFactory)):
                continue
            data, segments = leaf.data, plan_values.get(path)
            if path in gtp_params:
                data = _gtp_parameter(chunks, path, gtp_params[path])
            if segments is None:
                raise RealModelPlanError(f"the plan has no values for {path}, which this rank's real model holds")
            if data.dtype not in (torch.float64, torch.float32):
                raise RealModelPlanError(f"{path} is {data.dtype}; the oracle needs float64 or float32 parameters")
            if segments == "sentinel":
                data.fill_(sentinel)
            else:
                data.copy_(values(data.shape, segments).to(data.dtype))
                if isinstance(leaf, M.ShardedTensorFactory) and path not in gtp_params and path not in reference_rows:
                    _check_rows_follow_pieces(M, path, leaf, segments, values)
            done.append(path)
    missing = set(plan_values) - set(done)
    if missing:
        raise RealModelPlanError(f"the plan names {len(missing)} tensor(s) this rank's real model does not hold, "
                                 f"e.g. {sorted(missing)[0]}")
    return done


def _gtp_parameter(chunks, path, shape):
    """The GTP-wrapped parameter behind `path` ("<chunk>.<name>"), checked against the plan's shard shape."""
    name, _, key = path.partition(".")
    try:
        param = chunks[name].get_parameter(key)
    except (KeyError, AttributeError) as exc:
        raise RealModelPlanError(f"{path}: the plan fills it as a GTP parameter; the model has none ({exc})")
    from megatron.core.tensor_parallel.generalized_tensor_parallelism import is_gtp_param
    if not is_gtp_param(param):
        raise RealModelPlanError(f"{path}: the plan fills it as a GTP shard; Megatron did not GTP-wrap it")
    if list(param.shape) != list(shape):
        raise RealModelPlanError(f"{path}: GTP shard {list(param.shape)}, the plan's (reference) shard {list(shape)}")
    return param.data


def _check_rows_follow_pieces(M, path, f, segments, values):
    """The plan puts built tensor i of a factory at the data rows after tensors 0..i-1: each built
    tensor must now hold exactly its segment's values."""
    torch = M.torch
    pieces = [leaf for _, leaf in leaves(f.build()) if isinstance(leaf, M.ShardedTensor)]
    if len(pieces) != len(segments):
        raise RealModelPlanError(f"factory {path}: {len(pieces)} built tensors, the plan has {len(segments)}")
    for piece, seg in zip(pieces, segments):
        want = values(piece.data.shape, [[0] + list(seg[1:])])
        if tuple(piece.data.shape) != tuple(want.shape) or not torch.equal(piece.data.to(torch.int64), want):
            raise RealModelPlanError(f"factory {path}: built tensor {piece.key} is not data rows {seg[0]}.."
                                     f"{seg[0] + seg[1]} of the factory (the plan's row layout does not hold)")


STATE_PREFIX = "optimizer.state."


def fill_distributed_states(M, optimizer, tree, plan_values, values):
    """Writes the plan's values of the DistributedOptimizer's entries in `tree` (model space: a whole TP-local
    parameter each) into the states it holds: for each parameter this DP rank owns a slice of, that slice (its
    range in Megatron's own range map), into the state the entry names. The parameter behind an entry is its
    model entry's tensor (key and offsets, or the same factory), as Megatron's optimizer finds it. The `param`
    state is the fp32 parameter itself, filled with the model."""
    torch = M.torch
    kinds = (M.ShardedTensor, M.ShardedTensorFactory)
    model_leaves = [leaf for path, leaf in leaves(tree) if not path.startswith("optimizer.") and isinstance(leaf, kinds)]
    owned = {}  # id(parameter) -> (optimizer part, parameter, this rank's range of its elements)
    for part in factory.optimizer_parts(optimizer):
        for gbuf_range_maps in part.gbuf_ranges:
            for bucket_maps in gbuf_range_maps.values():
                for bucket_map in bucket_maps:
                    for param, range_map in bucket_map["param_map"].items():
                        owned[id(param)] = (part, param, range_map["param"])
    with torch.no_grad():
        for path, leaf in leaves(tree):
            if not path.startswith("optimizer.") or not isinstance(leaf, kinds):
                continue
            if not leaf.key.startswith(STATE_PREFIX):
                raise RealModelPlanError(f"{path}: optimizer entry {leaf.key} is not {STATE_PREFIX}<state>.<key>")
            state, _, model_key = leaf.key[len(STATE_PREFIX):].partition(".")
            if state == "param":
                continue
            param = _parameter_of(M, path, leaf, model_key, model_leaves)
            if path not in plan_values or plan_values[path] == "sentinel":
                raise RealModelPlanError(f"the plan has no values for {path}")
            full = values(param.shape, plan_values[path])
            if id(param) not in owned:
                continue  # another DP rank owns all of this parameter's state
            part, main, span = owned[id(param)]
            held = part._get_main_param_and_optimizer_states(main)
            if state not in held:
                raise RealModelPlanError(f"{path}: the DistributedOptimizer holds {sorted(held)} for {model_key}, "
                                         f"no {state!r}")
            held[state].copy_(full.reshape(-1)[span.start:span.end].to(held[state].dtype))


def _parameter_of(M, path, leaf, model_key, model_leaves):
    """The parameter behind optimizer entry `leaf`: the data of the one model entry of its model key at the same
    offsets (a tensor) or with the same build function (a factory, which Megatron's optimizer copies)."""
    if isinstance(leaf, M.ShardedTensor):
        same = [m for m in model_leaves if isinstance(m, M.ShardedTensor) and m.key == model_key
                and tuple(m.global_offset) == tuple(leaf.global_offset) and tuple(m.local_shape) == tuple(leaf.local_shape)]
    else:
        same = [m for m in model_leaves if isinstance(m, M.ShardedTensorFactory) and m.key == model_key
                and m.build_fn is leaf.build_fn]
    if len(same) != 1:
        raise RealModelPlanError(f"{path}: {len(same)} model entries of key {model_key} match the optimizer's entry")
    return same[0].data


def retarget(M, tree, pattern):
    """Megatron's GPT -> hybrid retargeting of every model chunk, as its training load path does."""
    maps = M.interop.gpt_compatible_layer_maps(pattern)
    for sd in tree.values():
        M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)


def apply_loaded(chunks, optimizer, loaded, req):
    """Each chunk takes what was loaded through its own load_state_dict (strict), as training does, and
    the FP32Optimizer its part through its own (a DistributedOptimizer's comes after the dump:
    apply_distributed_optimizer)."""
    for name, model in chunks.items():
        model.load_state_dict(loaded[name], strict=True)
    if optimizer is not None and not is_distributed(req):
        optimizer.load_state_dict(loaded["optimizer"])


def apply_distributed_optimizer(optimizer, loaded, req, past_f=False):
    """The DistributedOptimizer takes its part of what was loaded through its own load_state_dict, as
    training's load_checkpoint does (each DP rank its slice of the model-space states); `past_f`: under the
    declared shim of what finding F lacks (patches' distributed_optimizer_load), undone after."""
    families = factory.patch_families(req) + (("distributed_optimizer_load",) if past_f else ())
    with patches.applied(*families):
        optimizer.load_state_dict(loaded["optimizer"])


def _own_optimizer_leaves(M, chunks, optimizer, req):
    """{path: tensor} of the optimizer's entries in a fresh sharded state dict of it: what the optimizer holds
    (a DistributedOptimizer's in model space, gathered over DP: collective)."""
    return {path: leaf.data for path, leaf in leaves(state_tree(M, chunks, optimizer, req))
            if path.startswith("optimizer.") and isinstance(leaf, (M.ShardedTensor, M.ShardedTensorFactory))}


def own_optimizer_states(M, chunks, optimizer, req, paths):
    """{path: int64 tensor} of the optimizer's own states after its load_state_dict, for the optimizer paths among
    `paths` (read as `dump_model` reads the FP32Optimizer's); a path it does not hold is left out (the verifier
    names it missing)."""
    own = _own_optimizer_leaves(M, chunks, optimizer, req)
    return {path: own[path].detach().to(M.torch.int64).contiguous() for path in paths
            if path.startswith("optimizer.") and isinstance(own.get(path), M.torch.Tensor)}


def dump_model(M, chunks, optimizer, req, paths, loaded):
    """{path: int64 tensor} of the chunks' parameters and buffers, and of the optimizer's states, after the
    load, for the verifier: the FP32Optimizer's read through a fresh sharded state dict of it (what it holds
    after its load_state_dict), a DistributedOptimizer's as Megatron's load returned them into its request
    (model space; its load_state_dict runs after the dump)."""
    torch = M.torch
    states = {name: model.state_dict() for name, model in chunks.items()}
    optimizer_leaves = {}
    if optimizer is not None and is_distributed(req):
        optimizer_leaves = {path: value for path, value in leaves(loaded) if path.startswith("optimizer.")}
    elif optimizer is not None:
        optimizer_leaves = _own_optimizer_leaves(M, chunks, optimizer, req)
    out = {}
    for path in paths:
        name, _, key = path.partition(".")
        value = optimizer_leaves.get(path) if name == "optimizer" else states.get(name, {}).get(key)
        if not isinstance(value, torch.Tensor):
            raise RealModelPlanError(f"{path}: the loaded model has no tensor under {key!r} in {name!r}")
        out[path] = value.detach().to(torch.int64).contiguous()
    return out


def done():
    """parallel_state back to nothing between scenarios (each builds its own layout)."""
    from megatron.core import parallel_state as ps
    ps.destroy_model_parallel()
