"""Mutants of the GTP checkpoint path: the GDP mixer's gather, the writer election and replica ids, pad rows,
the composite offset."""

import functools


def _gtp_param(t):
    return getattr(t, "is_gtp_weight_remat", False)


def no_gather(original, M):
    # the mixer does not recognise its in_proj as a GTP shard: splits the (R, C) shard as if TP-local
    return lambda param: False


def wrong_group(original, M):
    def elect(param, explicit_group=None):
        from megatron.core.utils import get_pg_rank
        return get_pg_rank(param.group)  # the GTP remat group: its peers hold different shards
    return elect


def pad_rows_saved(original, M):
    def make(tensor, key, *args, **kwargs):
        import torch
        if key.endswith("in_proj.weight") and not _gtp_param(tensor) and torch.distributed.is_initialized():
            from megatron.core.tensor_parallel import gtp_api
            # the gathered buffer keeps the G*R - D pad rows of the last shards
            import megatron.core.parallel_state as ps
            grp = getattr(ps, "_GTP_WEIGHT_REMAT_GROUP", None)
            g = grp.size() if grp is not None else 1
            align = gtp_api.GTP_CONFIG.pad_for_alignment * g
            if align and tensor.shape[0] % align:
                pad = align - tensor.shape[0] % align
                tensor = torch.cat([tensor, tensor.new_zeros((pad,) + tuple(tensor.shape[1:]))])
        return original(tensor, key, *args, **kwargs)
    return make


def no_zero_fill(original, M):
    def pad(t, spec, *args, **kwargs):
        import torch
        rows = spec[3] if len(spec) >= 4 else 0
        if rows > 0 and t.dim() >= 1 and t.shape[0] > 0:
            # torch.empty-like: the pad rows keep whatever the buffer held (here: the last real row)
            return torch.cat([t, t[-1:].expand((rows,) + tuple(t.shape[1:]))])
        return original(t, spec, *args, **kwargs)
    return pad


def offset_no_tp_term(original, M):
    def make(tensor, key, tp_axis=0, replica_id=None, prepend_offsets=(), **kwargs):
        out = original(tensor, key, tp_axis, replica_id, prepend_offsets, **kwargs)
        if _gtp_param(tensor) and tp_axis == 0:
            from megatron.core.utils import get_pg_rank, get_pg_size
            tp_rank = get_pg_rank(kwargs.get("tp_group")) if kwargs.get("tp_group") is not None else 0
            g_size = get_pg_size(tensor.group)
            axis = len(prepend_offsets)
            offset = list(out.global_offset)
            offset[axis] -= tp_rank * g_size * out.local_shape[axis]  # composite t*G + g loses t*G
            out.global_offset = tuple(offset)
        return out
    return make


def gtp_inclusive_dp_replica(original, M):
    @functools.wraps(original)
    def replica_rank(param, explicit_group=None):
        from megatron.core import parallel_state
        # the DP rank over replicate-DP x gtp_remat (parallel_state's default) instead of the
        # gtp_remat-excluded one: GTP peers hold different shards, so only GTP rank 0's shards have a writer
        if not getattr(param, "allreduce", True):
            return parallel_state.get_expert_data_parallel_rank(with_gtp_remat=True)
        return parallel_state.get_data_parallel_rank(with_context_parallel=True, with_gtp_remat=True)
    return replica_rank


def context_parallel_replica(original, M):
    @functools.wraps(original)
    def replica_rank(param, explicit_group=None):
        from megatron.core import parallel_state
        # the rank over the context-parallel group instead of the DP x CP group: 0 at CP 1, so every DP
        # replica of a GTP shard claims to be its main replica (invisible while DP is 1)
        return parallel_state.get_context_parallel_rank()
    return replica_rank
