"""World tasks of real models (docs/adapter-protocol.md, model_dump): every rank builds its chunk of a
real GPTModel or HybridModel on CPU under the declared shims and returns its sharded state dict as
entry JSON; parallel_state is pointed back at the world's own groups afterwards."""

from megatron_adapter.real_models import factory, shims
from megatron_adapter.worlds import worker_context


def task_real_model_dump(ctx, req):
    from megatron.core import parallel_state as ps

    from megatron_adapter.codec import Codec
    factory.init_parallel_state(req)
    try:
        with shims.applied():
            chunks = factory.build(ctx.M, req)
            tree = {name: model.sharded_state_dict() for name, model in chunks.items()}
        entries = Codec(ctx.M).encode(tree, "dotted")
    except factory.UnsupportedConfig as exc:
        return {"unsupported": str(exc)}
    finally:
        ps.destroy_model_parallel()
        worker_context.build_groups(ctx)
    return {"entries": entries}
