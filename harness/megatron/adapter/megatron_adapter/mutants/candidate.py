"""Mistakes the pending GTP shard-split PR could make, planted in the harness's own candidate of its design
(candidates/shard_split.py, not Megatron's code; applied only with --candidate shard-split)."""


def target(name):
    return "candidates.shard_split:" + name


def offset_no_tp_term(original, M):
    return lambda tp_rank, section_size, rows_into_section: rows_into_section


def pad_rows_saved(original, M):
    def rows(section_start, section_size, shard_start, shard_end, rows_local, is_last_section):
        a, b = original(section_start, section_size, shard_start, shard_end, rows_local, is_last_section)
        return (a, shard_end) if is_last_section and shard_end > rows_local else (a, b)
    return rows


def no_zero_fill(original, M):
    # torch.empty-like: the pad rows keep whatever the buffer held (here: the last real row)
    return lambda rows, like: like[-1:].expand((rows,) + tuple(like.shape[1:])).clone()


def no_placeholder(original, M):
    return lambda M, shard: []


def piece_copies(original, M):
    return lambda shard, first, last: shard[first:last].clone()


def global_from_padded(original, M):
    def rows(tp_size, section_size, pad_rows, is_last_section):
        return tp_size * (section_size + (pad_rows if is_last_section else 0))
    return rows
