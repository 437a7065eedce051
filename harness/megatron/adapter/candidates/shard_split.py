"""Candidate shard-split design, not Megatron's code: the harness's own implementation of the GTP
shard-split save of the GDP in_proj that the pending PR describes (seed 003, spec 4.7), written from
that description so the gate can run the design through Megatron's real dist_checkpointing save and
load before the PR lands.

Each GTP rank saves the parts of the [z|V*|K*|Q|b*|a] checkpoint chunks its (R, C) shard covers, as
row views of the shard, under the non-GTP keys and global shapes; pad rows are never saved and come
back as zeros; a rank whose shard is all padding builds one zero-element LocalNonpersistentObject so
that load preprocessing keeps a value at the factory's path. Nothing is gathered.

install(M) puts it under the GDP mixer's sharded_state_dict only when the checkout has no factory of
its own (candidates.REAL_GTP_SPLIT_FACTORY), and only while the shard-split design is selected
(selected()); otherwise Megatron's gather design runs unchanged. Mamba's mixer is never touched.

The small module-level helpers are the places a plausible mistake of the PR would sit; the
candidate_* mutants (mutants.py) replace them one at a time.
"""

import contextlib
import functools

from candidates import CANDIDATE_LABEL, REAL_GTP_SPLIT_FACTORY, find_real_gtp_split_factory

NAME = "shard-split"
LABEL = CANDIDATE_LABEL[NAME]

_state = {"installed": False, "selected": False}


# ---- the factory ------------------------------------------------------------------------------

def _piece_rows(section_start, section_size, shard_start, shard_end, rows_local, is_last_section):
    """TP-local rows [a, b) of one section that this shard holds, pad rows (>= rows_local) left out
    (a >= b: none)."""
    return max(section_start, shard_start), min(section_start + section_size, shard_end, rows_local)


def _piece_offset(tp_rank, section_size, rows_into_section):
    """The piece's row offset in its chunk's global tensor: this TP rank's block, then the rows of
    the section that earlier GTP shards hold."""
    return tp_rank * section_size + rows_into_section


def _chunk_global_rows(tp_size, section_size, pad_rows, is_last_section):
    """Rows of a chunk's global tensor: the non-GTP run's (padding is a GTP artefact)."""
    return tp_size * section_size


def _piece_data(shard, first, last):
    """Rows [first, last) of the shard, as a view (no copy: the saving memory is the point)."""
    return shard[first:last]


def _zero_rows(rows, like):
    """The rows the merge appends for the shard's padding."""
    return like.new_zeros((rows,) + tuple(like.shape[1:]))


def _placeholder(M, shard):
    """An all-padding rank's build output: nothing to save, but a value at the factory's path."""
    return M.LocalNonpersistentObject(shard[:0])


def gtp_split_tensor_factory(M, orig, sections, names, gtp_rank, tp_rank, tp_size):
    """The shard-split factory over orig, this rank's GTP ShardedTensor (local (R, C)); sections and
    names are the TP-local checkpoint layout. Same parameters as REAL_GTP_SPLIT_FACTORY, plus M (the
    adapter's namespace of Megatron classes)."""
    torch = M.torch
    sections, names = [int(s) for s in sections], list(names)
    if len(sections) != len(names):
        raise ValueError(f"{len(sections)} sections but {len(names)} names")
    rows_local = sum(sections)
    prepend = orig.prepend_axis_num
    shard_rows = int(orig.local_shape[0])
    cols = tuple(int(c) for c in orig.local_shape[1:])
    shard_start = gtp_rank * shard_rows
    shard_real_end = max(shard_start, min(shard_start + shard_rows, rows_local))
    real_rows = shard_real_end - shard_start
    pad_rows = shard_rows * max(1, _gtp_size_of(orig, shard_rows, tp_size)) - rows_local

    def build_fn(key, data, replica_id, flattened_range):
        if flattened_range is not None:
            raise ValueError("the shard-split factory does not take a flattened range")
        if real_rows == 0:
            return _placeholder(M, data)
        pieces = []
        start = 0
        for j, (size, name) in enumerate(zip(sections, names)):
            last = j == len(sections) - 1
            a, b = _piece_rows(start, size, shard_start, shard_start + shard_rows, rows_local, last)
            if a < b:
                pieces.append(M.ShardedTensor(
                    key=f"{key}.{name}", data=_piece_data(data, a - shard_start, b - shard_start),
                    dtype=data.dtype, local_shape=(b - a,) + cols,
                    global_shape=tuple(orig.global_shape[:prepend]) + (_chunk_global_rows(tp_size, size, pad_rows, last),) + cols,
                    global_offset=tuple(orig.global_offset[:prepend]) + (_piece_offset(tp_rank, size, a - start),)
                    + (0,) * len(cols),
                    axis_fragmentations=None, replica_id=replica_id, prepend_axis_num=prepend))
            start += size
        return pieces

    @torch.no_grad()
    def merge_fn(loaded):
        if isinstance(loaded, torch.Tensor):  # the all-padding rank's unwrapped placeholder
            return loaded.new_zeros((shard_rows,) + cols)
        if isinstance(loaded, list) and len(loaded) == 1 and isinstance(loaded[0], torch.Tensor) and real_rows == 0:
            return loaded[0].new_zeros((shard_rows,) + cols)
        real = torch.cat(list(loaded)) if len(loaded) > 1 else loaded[0]
        if real.shape[0] != real_rows:
            raise ValueError(f"shard-split merge: {real.shape[0]} loaded rows, the shard holds {real_rows} real rows")
        if real_rows == shard_rows:
            return real.contiguous()
        return torch.cat([real, _zero_rows(shard_rows - real_rows, real)])

    return M.ShardedTensorFactory(orig.key, orig.data, build_fn, merge_fn, orig.replica_id)


def _gtp_size_of(orig, shard_rows, tp_size):
    """G from the composite GTP entry (global rows T*G*R), for the pad-row count only."""
    prepend = orig.prepend_axis_num
    total = int(orig.global_shape[prepend])
    return total // (shard_rows * tp_size) if shard_rows and tp_size else 1


# ---- applying it to the GDP mixer ------------------------------------------------------------

class _UngatheredInProj:
    """Stands in for the mixer's in_proj while Megatron's own sharded_state_dict runs: it hands the
    mixer a plain TP-local (meta, never allocated) weight entry, so the mixer's GTP gather is not
    taken and its split path sees the rows it expects; the real GTP entry is kept for the candidate."""

    def __init__(self, M, real, rows, kept):
        self._M, self._real, self._kept = M, real, kept
        shard = real.weight
        self.weight = M.torch.empty((rows,) + tuple(shard.shape[1:]), dtype=shard.dtype, device="meta")

    def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
        out = self._real.sharded_state_dict(prefix=prefix, sharded_offsets=sharded_offsets, metadata=metadata)
        key = prefix + "weight"
        entry = out[key]
        self._kept[key] = entry
        tp_axis = len(sharded_offsets)
        t, T = self._kept["tp"]
        out[key] = self._M.ShardedTensor.from_rank_offsets(
            key, self.weight, *sharded_offsets, (tp_axis, t, T), replica_id=entry.replica_id,
            prepend_axis_num=len(sharded_offsets))
        return out

    def state_dict(self, *args, **kwargs):
        return self._real.state_dict(*args, **kwargs)


def _mixer_sharded_state_dict(M, original):
    @functools.wraps(original)
    def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
        real = self._modules.get("in_proj")
        weight = getattr(real, "weight", None)
        if not _state["selected"] or weight is None or getattr(weight, "gtp_remat_size", 1) <= 1:
            return original(self, prefix, sharded_offsets, metadata)
        torch = M.torch
        sections, names = M.gdp._get_in_proj_checkpoint_split_layout(
            self.d_inner_local_tp, self.ngroups_local_tp * self.d_state, self.nheads_local_tp, self.num_householder)
        tp_group = self.pg_collection.tp
        kept = {"tp": (torch.distributed.get_rank(tp_group), torch.distributed.get_world_size(tp_group))}
        proxy = _UngatheredInProj(M, real, sum(sections), kept)
        self._modules["in_proj"] = proxy
        try:
            out = original(self, prefix, sharded_offsets, metadata)
        finally:
            self._modules["in_proj"] = real
        key = prefix + "in_proj.weight"
        out[key] = gtp_split_tensor_factory(M, kept[key], sections, names, torch.distributed.get_rank(weight.group),
                                            *kept["tp"])
        return out
    sharded_state_dict.candidate = NAME
    return sharded_state_dict


def install(M):
    """Applies the candidate to the checkout's GDP mixer (once). Returns a report; never installs over a
    checkout's own factory (that checkout's design is what the gate must judge)."""
    own = find_real_gtp_split_factory(M)
    if own is not None:
        return {"candidate": NAME, "applied": False, "reason": "the checkout has its own shard-split factory "
                f"({REAL_GTP_SPLIT_FACTORY.name} in {own.__module__}): the checkout's design is gated"}
    mixer = getattr(M.gdp, "GatedDeltaProductMixer", None) if M.gdp is not None else None
    if mixer is None or not hasattr(M.gdp, "_get_in_proj_checkpoint_split_layout"):
        return {"candidate": NAME, "applied": False, "reason": "this Megatron has no GDP mixer with a checkpoint layout"}
    if not _state["installed"]:
        mixer.sharded_state_dict = _mixer_sharded_state_dict(M, mixer.sharded_state_dict)
        _state["installed"] = True
    return {"candidate": NAME, "applied": True, "label": LABEL,
            "patched": "megatron.core.ssm.gated_delta_product:GatedDeltaProductMixer.sharded_state_dict "
                       "(GTP in_proj only, while the shard-split design is selected)"}


def installed():
    return _state["installed"]


@contextlib.contextmanager
def selected(design):
    """Within this block the GDP mixer saves with `design` ("shard-split": the candidate; anything
    else: Megatron's own gather)."""
    before = _state["selected"]
    _state["selected"] = _state["installed"] and design in ("shard-split", "shard_split")
    try:
        yield
    finally:
        _state["selected"] = before
