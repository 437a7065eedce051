"""World tasks of real models (docs/adapter-protocol.md, model_dump): every rank builds its chunk of a
real GPTModel or HybridModel on CPU under the declared shims and returns its sharded state dict as
entry JSON; the groups Megatron made for it are destroyed and parallel_state points back at the world's own
groups afterwards."""

from megatron_adapter import patches
from megatron_adapter.real_models import factory
from megatron_adapter.worlds import worker_context


def _megatrons_refusal(exc):
    """What a model's or its optimizer's sharded_state_dict raised as Megatron's error (MegatronRefused) when
    Megatron's own code raised it on the objects it built for a configuration it accepts (e.g. an assertion in
    GatedDeltaProductMixer.sharded_state_dict under GTP before Megatron's fix of it, or its metadata check
    refusing an entry its own code described); None when it is the harness's failure (a shim that fell short,
    a stub called, the adapter's own code)."""
    tb = exc.__traceback__
    frame = worker_context.megatron_frame(tb)
    if isinstance(exc, patches.PatchError) or worker_context.raised_in_harness(exc) or frame is None:
        return None
    return factory.MegatronRefused(f"Megatron's sharded_state_dict raises on this configuration: "
                                   f"{type(exc).__name__}: {str(exc)[:1500]} (at {frame})")


def described_tree(M, chunks, req):
    """The tree a description encodes: the built chunks' sharded state dicts and, with the request's optimizer, that
    optimizer's (over a fresh one, with Adam's states as its load creates them); under the request's patches. Also
    what a round-trip rank describes of the model it built, before it casts or steps it (roundtrip/handshake.py).
    MegatronRefused where Megatron's own sharded_state_dict raises."""
    # no_grad: under GTP the checkpoint code gathers shards with gloo's CPU all_gather_into_tensor,
    # which writes through views that autograd refuses while the parameter requires grad (NCCL
    # writes in place); the R1/R2 scripts build their trees the same way (docs/megatron-patches.md).
    try:
        with M.torch.no_grad():
            tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
        if req["optimizer"]:
            tree["optimizer"] = factory.optimizer_sharded_state_dict(M, chunks, dict(tree),
                                                                     req.get("optimizer_kind", "distributed"))
    except Exception as exc:  # noqa: BLE001 - judged by where it was raised
        refused = _megatrons_refusal(exc)
        if refused is None:
            raise
        raise refused from exc
    return tree


def task_real_model_dump(ctx, req):
    from megatron_adapter.codec import Codec
    factory.init_parallel_state(req)
    try:
        factory.require_buildable(req)
        with patches.applied(*factory.patch_families(req)):
            chunks = factory.build(ctx.M, req)
            tree = described_tree(ctx.M, chunks, req)
        entries = Codec(ctx.M).encode(tree, "dotted")
    except factory.UnsupportedConfig as exc:
        return {"unsupported": str(exc)}
    except factory.MegatronRefused as exc:
        return {"megatron_error": str(exc)}
    finally:
        worker_context.release_task_groups(ctx)
    return {"entries": entries}
