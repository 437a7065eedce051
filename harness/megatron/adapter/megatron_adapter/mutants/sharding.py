"""Mutants of how a layout is cut: the pipeline segment a rank selects, the split factory's TP offsets, and the
sharding-integrity access counter."""

import functools


def segment_rank_major(original, M):
    @functools.wraps(original)
    def wrapped(main_pattern, pp_group, vp_stage, *args, **kwargs):
        segments = main_pattern.split("|") if main_pattern else [""]
        torch = M.torch
        pp_rank = torch.distributed.get_rank(pp_group) if pp_group is not None else 0
        pp_size = torch.distributed.get_world_size(pp_group) if pp_group is not None else 1
        if len(segments) > 1 and len(segments) % pp_size == 0 and vp_stage is not None:
            vpp = len(segments) // pp_size
            wrong = pp_rank * vpp + vp_stage
            # Ask Megatron for segment `wrong` through the (rank, stage) that really selects it: the group's
            # rank is answered for this call only, so a real ProcessGroup (a real model's build) works as a
            # fake one does (a new group object cannot be made with another rank).
            dist = torch.distributed
            plain_get_rank = dist.get_rank

            def get_rank(group=None):
                return wrong % pp_size if group is pp_group else plain_get_rank(group)

            dist.get_rank = get_rank
            try:
                return original(main_pattern, pp_group, wrong // pp_size, *args, **kwargs)
            finally:
                dist.get_rank = plain_get_rank
        return original(main_pattern, pp_group, vp_stage, *args, **kwargs)
    return wrapped


def split_no_tp_offset(original, M):
    @functools.wraps(original)
    def wrapped(orig_sh_ten, split_sections, split_names, split_dim):
        factory = original(orig_sh_ten, split_sections, split_names, split_dim)
        inner = factory.build_fn

        def build(key, t, replica_id, flattened_range):
            chunks = inner(key, t, replica_id, flattened_range)
            for ch in chunks:
                axis = split_dim + ch.prepend_axis_num
                offset = list(ch.global_offset)
                offset[axis] = 0
                ch.global_offset = tuple(offset)
            return chunks

        factory.build_fn = build
        return factory
    return wrapped


def split_names_traded(original, M):
    @functools.wraps(original)
    def wrapped(orig_sh_ten, split_sections, split_names, split_dim):
        names, sections = list(split_names), list(split_sections)
        if "B" in names and "C" in names and sections[names.index("B")] == sections[names.index("C")]:
            b, c = names.index("B"), names.index("C")
            names[b], names[c] = names[c], names[b]
        return original(orig_sh_ten, split_sections, names, split_dim)
    return wrapped


def access_saturated(original, M):
    @functools.wraps(original)
    def wrapped(rank_sharding):
        return original(rank_sharding).clamp(max=1)
    return wrapped


def dp_cp_group_without_cp(original, M):
    @functools.wraps(original)
    def group(with_context_parallel=False, with_gtp_remat=True, partial_data_parallel=False):
        # the DP x CP group asked for, the DP group given: replica ids (and anything else over dp_cp) ignore the
        # context-parallel ranks, which hold the same parameters (invisible while CP is 1); the partial DP group
        # (which parallel_state requires to include CP) is left as it is
        if partial_data_parallel:
            return original(with_context_parallel, with_gtp_remat, partial_data_parallel)
        return original(False, with_gtp_remat, False)
    return group
