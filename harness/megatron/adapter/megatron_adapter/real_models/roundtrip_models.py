"""Real models in a round-trip world (`interop-harness roundtrip --real`, docs/roundtrip.md "Real models").

Each rank builds its chunks of Megatron's own GPTModel or HybridModel (real_models/factory.py, under the
declared CPU shims) and turns their parameters to float64 (Module.to), so the oracle's provenance values
(integers below 2^45) are exact. The plan (harness/roundtrip/world_plan.cc) was computed from the same models as the Megatron target
describes them (`model dump`), so it names every tensor by the path `codec.leaves` gives it here:
  - `fill_model` writes the plan's values into the parameters themselves (through the sharded state
    dict's tensors, which are the parameters or views of them), on the save side the GPT's, on the load
    side the sentinel -1 for loaded entries and the fresh layers' own values. A GTP-wrapped Mamba
    in_proj is the exception: its entry is a factory over the all-gathered TP-local weight, a copy, so
    the plan names it in "gtp_params" with the parameter's (R, C) shard shape and its values (the
    shard's real rows; pad rows 0) go into the parameter; `state_tree` then rebuilds the tree,
    which gathers them again;
  - `dump_model` reads the parameters back after Megatron's load and `load_state_dict`.
With the model request's "optimizer" (optimizer_kind "fp32"), each rank also builds Megatron's FP32Optimizer
over its chunks (factory.fp32_optimizer) and the tree holds its sharded state dict under "optimizer": its
ShardedTensors' data are Adam's moments themselves, so the fill writes them; after the load the optimizer
takes its part through its own `load_state_dict` and the dump reads the moments from a fresh sharded state
dict of the optimizer (what it holds then, by the same paths).
A factory's rows are taken as its built tensors' rows one after the other (how the plan lays them out);
`fill_model` checks that on Megatron's factory and refuses a different layout as a harness error, except
for the paths in "reference_rows": a GTP-wrapped SwiGLU fc1, whose rows the plan takes from the reference
(the GTP shard of the TP-local [W; V]) because Megatron's factory cuts W and V out of the shard (finding S).
"""

from megatron_adapter.codec import leaves
from megatron_adapter.real_models import factory, shims


class RealModelPlanError(Exception):
    """The plan and this rank's real model disagree (a harness error: never blamed on Megatron)."""


def build(M, req):
    """(chunks {name: model}, optimizer or None) of this rank, parallel_state set for the request's layout
    over the world's default (gloo) group; `state_tree` then asks Megatron's checkpoint code for their
    sharded state dicts."""
    factory.init_parallel_state(req)
    with _shims(req):
        chunks = factory.build(M, req)
        for model in chunks.values():
            model.to(dtype=M.torch.float64)  # before sharded_state_dict: its tensors are these parameters
        optimizer = _optimizer(M, chunks, req)
    return chunks, optimizer


def _optimizer(M, chunks, req):
    if not req.get("optimizer"):
        return None
    if req.get("optimizer_kind") != "fp32":
        raise RealModelPlanError("a real round trip saves Megatron's FP32Optimizer (optimizer_kind fp32, which keeps "
                                 f"the float64 parameters the oracle needs); the plan asks {req.get('optimizer_kind')!r}")
    optimizer = factory.fp32_optimizer(M, chunks)
    _first_step(M, optimizer)
    return optimizer


def _first_step(M, optimizer):
    """One step of torch's Adam on zero gradients: it creates Adam's states as training's first step does,
    `step` with them (Megatron saves it as the common step; torch's Adam refuses moments without one, so
    the states of Megatron's init_state_fn alone cannot be loaded). The fill then overwrites the moments
    and the parameters the step moved."""
    torch = M.torch
    for part in getattr(optimizer, "chained_optimizers", [optimizer]):
        params = [p for group in part.optimizer.param_groups for p in group["params"]]
        for p in params:
            p.grad = torch.zeros_like(p)
        part.optimizer.step()
        for p in params:
            p.grad = None


def _shims(req):
    """The declared CPU shims, the GDP mixer's and the optimizer's with them where the model has them (as
    `model dump --mixer gdp --optimizer`)."""
    return shims.applied(optimizer=bool(req.get("optimizer")), gdp=factory.field(req, "mixer") == "gdp")


def state_tree(M, chunks, optimizer, req, is_loading=False):
    """{name: model.sharded_state_dict()}, and the optimizer's over them under "optimizer" (a load's
    re-creates Adam's states first). Collective under GTP (the in_proj's all-gather), so every rank of
    the world calls it; under no_grad, as model dump's (gloo's CPU all_gather_into_tensor writes through
    views autograd refuses while the parameter requires grad)."""
    with _shims(req), M.torch.no_grad():
        tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
        if optimizer is not None:
            tree["optimizer"] = factory.fp32_sharded_state_dict(optimizer, dict(tree), is_loading)
    return tree


def _values(torch, shape, segments, fill, key_shift):
    return fill(torch, list(shape), segments, "cpu", key_shift)


def fill_model(M, chunks, tree, plan_values, gtp_params, reference_rows, fill, key_shift, sentinel):
    """Writes every tensor of `tree` from plan_values[path]: a list of segments, or "sentinel"; a path of
    `gtp_params` ({path: shard shape}) writes the chunk's parameter of that name instead; a factory's
    path in `reference_rows` is not held to its built tensors' layout. Objects take the plan's strings
    elsewhere; returns the paths filled."""
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
            if data.dtype != torch.float64:
                raise RealModelPlanError(f"{path} is {data.dtype}; the oracle needs float64 parameters")
            if segments == "sentinel":
                data.fill_(sentinel)
            else:
                data.copy_(_values(torch, data.shape, segments, fill, key_shift).to(data.dtype))
                if isinstance(leaf, M.ShardedTensorFactory) and path not in gtp_params and path not in reference_rows:
                    _check_rows_follow_pieces(M, path, leaf, segments, fill, key_shift)
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


def _check_rows_follow_pieces(M, path, f, segments, fill, key_shift):
    """The plan puts built tensor i of a factory at the data rows after tensors 0..i-1: each built
    tensor must now hold exactly its segment's values."""
    torch = M.torch
    pieces = [leaf for _, leaf in leaves(f.build()) if isinstance(leaf, M.ShardedTensor)]
    if len(pieces) != len(segments):
        raise RealModelPlanError(f"factory {path}: {len(pieces)} built tensors, the plan has {len(segments)}")
    for piece, seg in zip(pieces, segments):
        want = _values(torch, piece.data.shape, [[0] + list(seg[1:])], fill, key_shift)
        if tuple(piece.data.shape) != tuple(want.shape) or not torch.equal(piece.data.to(torch.int64), want):
            raise RealModelPlanError(f"factory {path}: built tensor {piece.key} is not data rows {seg[0]}.."
                                     f"{seg[0] + seg[1]} of the factory (the plan's row layout does not hold)")


def retarget(M, tree, pattern):
    """Megatron's GPT -> hybrid retargeting of every model chunk, as its training load path does."""
    maps = M.interop.gpt_compatible_layer_maps(pattern)
    for sd in tree.values():
        M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)


def apply_loaded(chunks, optimizer, loaded):
    """Each chunk takes what was loaded through its own load_state_dict (strict), as training does, and
    the optimizer its part through its own."""
    for name, model in chunks.items():
        model.load_state_dict(loaded[name], strict=True)
    if optimizer is not None:
        optimizer.load_state_dict(loaded["optimizer"])


def dump_model(M, chunks, optimizer, req, paths):
    """{path: int64 tensor} of the chunks' parameters and buffers, and of the optimizer's states (read
    through a fresh sharded state dict of it), after the load, for the verifier."""
    torch = M.torch
    states = {name: model.state_dict() for name, model in chunks.items()}
    optimizer_leaves = {}
    if optimizer is not None:
        optimizer_leaves = {path: leaf.data for path, leaf in leaves(state_tree(M, chunks, optimizer, req))
                            if path.startswith("optimizer.") and isinstance(leaf, (M.ShardedTensor,
                                                                                  M.ShardedTensorFactory))}
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
