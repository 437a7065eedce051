"""Run-time mutants of Megatron: each patch makes the real code behave the way a plausible bad
change would (spec section 6), so the harness can show that its properties catch it.

One table, MUTANTS: each row names the mutant (the same name as the C++ registry,
mutants/mutant_catalogue.h, where it is the same bug), its spec bug class, what it does, and its
patches: (target, make) pairs applied in order. `target` is "module:attr[.attr...]" of an
imported Megatron module; `make(original, M)` gets the attribute's current value and the
adapter's namespace of Megatron modules (adapter.py, load_megatron) and returns what is installed
in its place. No Megatron code is copied.

How a target is rebound (_install): "module:name" sets the module's own attribute, so every
caller that looks it up through the module (the adapter's ops, Megatron's own calls of its module
globals) sees the patch; a path through a class ("module:Class.method") sets the class attribute
itself; a path through a module-level name that other code shares ("module:torch.nn.functional.pad"
as the GDP mixer sees it) is rebound only in that module, by a proxy, so the rest of Megatron and
torch stay untouched. Applying a row whose target no longer exists raises (the mutant would
silently be a no-op). A mutant stays applied for the rest of the process (one process per mutant).
"""

import collections
import functools
import importlib
import re
import types

Patch = collections.namedtuple("Patch", "target make")
# `requires`: targets that must exist for the mutant to mean anything. A mutant of the GTP path
# patches a function Megatron has without GTP too, but only GTP reaches the changed lines there.
# `tier`: "real" for a mutant of model or training code that only the real tier reaches (Megatron's own
# models, their round trips): the campaign runs the gate's real round trips for it (they cost minutes).
# `phase`: the round-trip world it is planted in (roundtrip_world.py --phase): "load" (the default: the
# loading run's Megatron), or "save" for a bug of what a save writes.
Mutant = collections.namedtuple("Mutant", "name bug_class description patches requires tier phase",
                                defaults=((), None, "load"))
GTP_API = "megatron.core.tensor_parallel.gtp_api:gtp_replica_rank"

INTEROP = "megatron.core.dist_checkpointing.gpt_checkpoint_interop"
ALLOC = "megatron.core.models.hybrid.hybrid_layer_allocation"
SSM_UTILS = "megatron.core.ssm.utils"
VALIDATION = "megatron.core.dist_checkpointing.validation"
SERIALIZATION = "megatron.core.dist_checkpointing.serialization"
STRATEGIES_TORCH = "megatron.core.dist_checkpointing.strategies.torch"
GDP = "megatron.core.ssm.gated_delta_product"
HYBRID_BLOCK = "megatron.core.models.hybrid.hybrid_block"
LANGUAGE_MODULE = "megatron.core.models.common.language_module.language_module"
EXPERTS = "megatron.core.transformer.moe.experts"


# ---- patch helpers: layer maps -------------------------------------------------------------

def _maps_with(maps, **changes):
    """A GPTCompatLayerMaps like `maps` with some fields replaced (the record is frozen)."""
    fields = dict(attention_to_gpt=maps.attention_to_gpt, mlp_to_gpt=maps.mlp_to_gpt,
                  fresh_init=maps.fresh_init, num_gpt_layers=maps.num_gpt_layers)
    fields.update(changes)
    return type(maps)(**fields)


def _maps_wrapper(transform):
    """make() for gpt_compatible_layer_maps: calls transform(original, pattern)."""
    def make(original, M):
        @functools.wraps(original)
        def wrapped(pattern):
            return transform(original, pattern)
        return wrapped
    return make


def _maps_mixed_as_dense(original, pattern):
    if isinstance(pattern, str) and "-" in pattern and "E" in pattern.split("/")[0]:
        head, sep, tail = pattern.partition("/")
        pattern = head.replace("E", "-") + sep + tail
    return original(pattern)


def _maps_one_based(original, pattern):
    maps = original(pattern)
    return _maps_with(maps, attention_to_gpt={h: g + 1 for h, g in maps.attention_to_gpt.items()},
                      mlp_to_gpt={h: g + 1 for h, g in maps.mlp_to_gpt.items()})


def _maps_pipes_as_layers(original, pattern):
    if isinstance(pattern, str) and "|" in pattern:
        head, sep, tail = pattern.partition("/")
        pattern = head.replace("|", "M") + sep + tail
    return original(pattern)


def _maps_reject_slash(original, pattern):
    if isinstance(pattern, str) and "/" in pattern:
        raise ValueError(f"Hybrid layer pattern {pattern!r} contains MTP layers ('/'), which have "
                         "no source weights in a GPT checkpoint. (mutant)")
    return original(pattern)


def _maps_no_fresh(original, pattern):
    return _maps_with(original(pattern), fresh_init=frozenset())


# ---- patch helpers: the candidate shard-split design (candidates/shard_split.py) -------------------
# Mistakes the pending PR could make, planted in the harness's own candidate (not Megatron's code).

def _candidate_offset_no_tp_term(original, M):
    return lambda tp_rank, section_size, rows_into_section: rows_into_section


def _candidate_pad_rows_saved(original, M):
    def rows(section_start, section_size, shard_start, shard_end, rows_local, is_last_section):
        a, b = original(section_start, section_size, shard_start, shard_end, rows_local, is_last_section)
        return (a, shard_end) if is_last_section and shard_end > rows_local else (a, b)
    return rows


def _candidate_no_zero_fill(original, M):
    # torch.empty-like: the pad rows keep whatever the buffer held (here: the last real row)
    return lambda rows, like: like[-1:].expand((rows,) + tuple(like.shape[1:])).clone()


def _candidate_no_placeholder(original, M):
    return lambda M, shard: []


def _candidate_piece_copies(original, M):
    return lambda shard, first, last: shard[first:last].clone()


def _candidate_global_from_padded(original, M):
    def rows(tp_size, section_size, pad_rows, is_last_section):
        return tp_size * (section_size + (pad_rows if is_last_section else 0))
    return rows


def _candidate(name):
    return "candidates.shard_split:" + name


# ---- patch helpers: retarget ---------------------------------------------------------------

def _replace_with(value):
    """make() that installs a fixed value (a constant table) whatever was there."""
    return lambda original, M: value


def _anchored(original, M):
    return re.compile(r"^" + original.pattern)


def _prepend_wrapper(step):
    """make() for _prepend_gpt_layer_axis: step(original, M, entry, gpt_layer_idx, num_gpt_layers)."""
    def make(original, M):
        @functools.wraps(original)
        def wrapped(entry, gpt_layer_idx, num_gpt_layers):
            return step(original, M, entry, gpt_layer_idx, num_gpt_layers)
        return wrapped
    return make


def _prepend_drop_prefix(original, M, entry, gpt_layer_idx, num_gpt_layers):
    pos = entry.key.find("decoder.layers.")
    if pos > 0:
        entry.key = entry.key[pos:]
    return original(entry, gpt_layer_idx, num_gpt_layers)


def _prepend_so_placeholder(original, M, entry, gpt_layer_idx, num_gpt_layers):
    if isinstance(entry, M.ShardedObject):
        # A list compares unequal to the (1,) tuple, so Megatron takes its prepend branch.
        entry.global_shape = list(entry.global_shape)
        entry = original(entry, gpt_layer_idx, num_gpt_layers)
        entry.global_shape = tuple(entry.global_shape)
        return entry
    return original(entry, gpt_layer_idx, num_gpt_layers)


def _prepend_axis_not_counted(original, M, entry, gpt_layer_idx, num_gpt_layers):
    out = original(entry, gpt_layer_idx, num_gpt_layers)
    if isinstance(out, M.ShardedTensor):
        out.prepend_axis_num -= 1
    return out


def _prepend_factory_twice(original, M, entry, gpt_layer_idx, num_gpt_layers):
    out = original(entry, gpt_layer_idx, num_gpt_layers)
    if isinstance(out, M.ShardedTensorFactory):
        out = original(out, gpt_layer_idx, num_gpt_layers)
    return out


def _omitted_exact(original, M):
    # read before the row's next patch empties the table
    omitted = tuple(M.interop._GPT_OMITTED_LOCAL_KEYS)

    @functools.wraps(original)
    def wrapped(sharded_state_dict, layer_maps):
        def exact(entry):
            if isinstance(entry, M.ShardedBase) and entry.key in omitted:
                return M.LocalNonpersistentObject(entry.data)
            return entry
        M.dict_utils.dict_list_map_inplace(exact, sharded_state_dict)
        return original(sharded_state_dict, layer_maps)
    return wrapped


def _omitted_broad(original, M):
    return tuple(original) + ("output_layer.weight",)


class _Hidden:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def _skip_unknown_entries(original, M):
    @functools.wraps(original)
    def wrapped(sharded_state_dict, layer_maps):
        hidden = []

        def hide(entry):
            if isinstance(entry, M.ShardedBase):
                match = M.interop._DECODER_LAYER_KEY_RE.search(entry.key)
                if match is not None:
                    idx = int(match.group(1))
                    if idx not in layer_maps.fresh_init and idx not in layer_maps.attention_to_gpt \
                            and idx not in layer_maps.mlp_to_gpt:
                        hidden.append(entry)
                        return _Hidden(len(hidden) - 1)
            return entry

        def restore(entry):
            return hidden[entry.index] if isinstance(entry, _Hidden) else entry

        M.dict_utils.dict_list_map_inplace(hide, sharded_state_dict)
        original(sharded_state_dict, layer_maps)
        M.dict_utils.dict_list_map_inplace(restore, sharded_state_dict)
    return wrapped


def _skip_unknown_key(original, M):
    @functools.wraps(original)
    def wrapped_key(key, layer_maps, checkpoint_keys=None):
        try:
            return original(key, layer_maps, checkpoint_keys)
        except ValueError as exc:
            if "refers to hybrid layer" in str(exc):
                return key
            raise
    return wrapped_key


# ---- patch helpers: FSDP, segments, split factory, validation --------------------------------

def _fsdp_first(original, M):
    @functools.wraps(original)
    def wrapped(key, layer_maps, checkpoint_keys=None):
        result = original(key, layer_maps, checkpoint_keys)
        if checkpoint_keys is None or not isinstance(key, str) or result is None:
            return result
        plain = original(key, layer_maps, None)
        if result != plain:
            return result
        for ck in sorted(checkpoint_keys):  # ask Megatron about one checkpoint key at a time
            single = original(key, layer_maps, [ck])
            if single != plain:
                return single
        return result
    return wrapped


def _fsdp_twice(original, M):
    @functools.wraps(original)
    def wrapped(state_dict, layer_maps, checkpoint_keys=None, checkpoint_prefix=""):
        once = original(state_dict, layer_maps, checkpoint_keys, checkpoint_prefix)
        return original(once, layer_maps, checkpoint_keys, checkpoint_prefix)
    return wrapped


def _segment_rank_major(original, M):
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


def _split_no_tp_offset(original, M):
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


def _access_saturated(original, M):
    @functools.wraps(original)
    def wrapped(rank_sharding):
        return original(rank_sharding).clamp(max=1)
    return wrapped


# ---- patch helpers: GTP checkpoint path ------------------------------------------------------

def _gtp_param(t):
    return getattr(t, "is_gtp_weight_remat", False)


def _no_gather(original, M):
    # the mixer does not recognise its in_proj as a GTP shard: splits the (R, C) shard as if TP-local
    return lambda param: False


def _wrong_group(original, M):
    def elect(param, explicit_group=None):
        from megatron.core.utils import get_pg_rank
        return get_pg_rank(param.group)  # the GTP remat group: its peers hold different shards
    return elect


def _pad_rows_saved(original, M):
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


def _no_zero_fill(original, M):
    def pad(t, spec, *args, **kwargs):
        import torch
        rows = spec[3] if len(spec) >= 4 else 0
        if rows > 0 and t.dim() >= 1 and t.shape[0] > 0:
            # torch.empty-like: the pad rows keep whatever the buffer held (here: the last real row)
            return torch.cat([t, t[-1:].expand((rows,) + tuple(t.shape[1:]))])
        return original(t, spec, *args, **kwargs)
    return pad


def _offset_no_tp_term(original, M):
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


# ---- patch helpers: load order (four coordinated names) --------------------------------------
#
# merge_factories_first moves serialization.load's factory merges before its merge of the loaded
# shards with the common and nonpersistent parts. Its four patches share this state (one mutant per
# process): the factories load_preprocess split off, the id of what the strategy loaded, Megatron's
# own apply_factory_merges, and whether the merges already ran.
_held = {}


def _hold_factories(original, M):
    def load_preprocess(sharded_state_dict):
        out = original(sharded_state_dict)
        _held["factories"], _held["done"] = out[2], False
        return out
    return load_preprocess


def _note_loaded(original, M):
    def load(self, *args, **kwargs):
        out = original(self, *args, **kwargs)
        _held["loaded"] = id(out)
        return out
    return load


def _merge_factories_before(original, M):
    def merge_first(x1, x2, *args, **kwargs):
        if _held.get("loaded") == id(x2) and _held.get("factories") is not None:
            x2 = _held["apply_factory_merges"](x2, _held["factories"])
            _held["done"] = True
        return original(x1, x2, *args, **kwargs)
    return merge_first


def _skip_merged_factories(original, M):
    _held["apply_factory_merges"] = original

    def merges(x1, x2, *args, **kwargs):
        if _held.get("done"):
            _held["done"] = False
            return x1
        return original(x1, x2, *args, **kwargs)
    return merges


# ---- patch helpers: real model code (killed by the gate's model_dump group) -------------------

def _layer_numbers_from_zero(original, M):
    @functools.wraps(original)
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        for layer in self.layers:  # layer_number = i + pp_layer_offset (0-based) instead of i + 1 + ...
            layer.layer_number -= 1
    return init


def _output_layer_shape_strict(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, prefix="", *args, **kwargs):
        out = original(self, prefix, *args, **kwargs)
        entry = out.get(f"{prefix}output_layer.weight")
        if entry is not None and not self.share_embeddings_and_output_weights:
            entry.allow_shape_mismatch = False
        return out
    return sharded_state_dict


def _experts_prefix_once(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, prefix="", *args, **kwargs):
        out = original(self, prefix, *args, **kwargs)
        for entry in out.values():  # expert_sharded_prefix = prefix instead of f"{prefix}experts."
            if entry.key.startswith(f"{prefix}experts."):
                entry.key = prefix + entry.key[len(f"{prefix}experts."):]
        return out
    return sharded_state_dict


def _experts_dense_dp_replica(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, *args, **kwargs):
        from megatron.core import parallel_state
        out = original(self, *args, **kwargs)
        dense_dp = parallel_state.get_data_parallel_rank()
        for entry in out.values():
            entry.replica_id = (*entry.replica_id[:2], dense_dp)
        return out
    return sharded_state_dict


def _gather_keeps_bucket_padding(original, M):
    @functools.wraps(original)
    def get_parameter_state_dp_zero(self, *args, **kwargs):
        state = original(self, *args, **kwargs)
        if state is None:
            return state
        torch = M.torch
        for gbuf_idx, buffer in enumerate(self.buffers):
            for world_tensors in state[gbuf_idx].values():
                for key, tensor in list(world_tensors.items()):
                    if not isinstance(tensor, torch.Tensor):
                        continue
                    parts, start = [], 0
                    for bucket in buffer.buckets:  # each bucket's elements, then its end padding as zeros
                        parts.append(tensor[start:start + bucket.numel_unpadded])
                        parts.append(tensor.new_zeros(bucket.grad_data.numel() - bucket.numel_unpadded))
                        start += bucket.numel_unpadded
                    world_tensors[key] = torch.cat(parts)
        return state
    return get_parameter_state_dp_zero


# ---- the table -----------------------------------------------------------------------------

MUTANTS_TABLE = (
    # layer maps
    Mutant("maps_accept_mixed", 12, "gpt_compatible_layer_maps accepts patterns mixing '-' and 'E' "
           "(treats every 'E' as '-')",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", _maps_wrapper(_maps_mixed_as_dense)),)),
    Mutant("maps_gpt_index_one_based", None, "layer maps number GPT layers from 1 (layer_number instead of "
           "index): every hybrid->GPT index is off by one",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", _maps_wrapper(_maps_one_based)),)),
    Mutant("maps_pipes_not_stripped", 13, "pipe separators are not stripped before numbering: each '|' "
           "takes a layer index (as if it were a fresh layer), shifting later indices",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", _maps_wrapper(_maps_pipes_as_layers)),)),
    Mutant("maps_reject_trailing_slash", 14, "a trailing '/' (MTP depth 0) is rejected as an MTP suffix",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", _maps_wrapper(_maps_reject_slash)),)),
    Mutant("fresh_init_empty", 20, "fresh_init is left empty, so 'M' layers are not kept local (their "
           "entries now hit the unknown-layer error instead of becoming LocalNonpersistentObject)",
           (Patch(INTEROP + ":gpt_compatible_layer_maps", _maps_wrapper(_maps_no_fresh)),)),
    # retarget
    Mutant("retarget_final_layer_norm", 15, "final norm is mapped to 'decoder.final_layer_norm.' instead of "
           "'decoder.final_layernorm.'",
           (Patch(INTEROP + ":_GPT_FINAL_NORM_KEY_MAP",
                  _replace_with({"decoder.final_norm.": "decoder.final_layer_norm."})),)),
    Mutant("retarget_anchored_layer_regex", 16, "the decoder-layer regex is anchored at the start of the key, "
           "so optimizer.state.<s>.decoder.layers.<n>. entries are not retargeted",
           (Patch(INTEROP + ":_DECODER_LAYER_KEY_RE", _anchored),)),
    Mutant("retarget_drop_optimizer_prefix", 16, "retargeted layer keys lose everything before "
           "'decoder.layers.' (optimizer entries renamed to bare model keys)",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", _prepend_wrapper(_prepend_drop_prefix)),)),
    Mutant("retarget_so_placeholder_prepended", 17, "the ShardedObject (1,)/(0,) placeholder gets the layer "
           "axis prepended, giving (L, 1)/(gi, 0) instead of (L,)/(gi,)",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", _prepend_wrapper(_prepend_so_placeholder)),)),
    Mutant("retarget_prepend_axis_not_incremented", 18, "ShardedTensor gains the layer axis in its shapes but "
           "prepend_axis_num is not incremented",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", _prepend_wrapper(_prepend_axis_not_counted)),)),
    Mutant("retarget_factory_wrapped_twice", 19, "a ShardedTensorFactory's build is wrapped twice, so built "
           "entries get two layer axes",
           (Patch(INTEROP + ":_prepend_gpt_layer_axis", _prepend_wrapper(_prepend_factory_twice)),)),
    Mutant("retarget_omitted_by_equality", 22, "output_layer._extra_state is recognised only when the key is "
           "exactly that string (prefixed keys are no longer kept local)",
           (Patch(INTEROP + ":retarget_sharded_state_dict_to_gpt_checkpoint", _omitted_exact),
            Patch(INTEROP + ":_GPT_OMITTED_LOCAL_KEYS", _replace_with(())))),
    Mutant("omitted_suffix_too_broad", 22, "the omitted-key suffix also matches output_layer.weight, so the "
           "output layer is never loaded",
           (Patch(INTEROP + ":_GPT_OMITTED_LOCAL_KEYS", _omitted_broad),)),
    Mutant("retarget_unknown_layer_skipped", 21, "entries of hybrid layers missing from the maps are left "
           "unchanged instead of raising ValueError (also in the FSDP key path)",
           (Patch(INTEROP + ":retarget_sharded_state_dict_to_gpt_checkpoint", _skip_unknown_entries),
            Patch(INTEROP + ":_retarget_explicit_key_to_gpt_checkpoint", _skip_unknown_key))),
    # FSDP
    Mutant("fsdp_first_capture", 23, "FSDP prefix recovery takes the first matching checkpoint key when "
           "several distinct module.-prefixed names match, instead of leaving the key unchanged",
           (Patch(INTEROP + ":_retarget_explicit_key_to_gpt_checkpoint", _fsdp_first),)),
    Mutant("fsdp_second_pass", None, "the FSDP tree is retargeted twice (the explicit-key path is not "
           "idempotent: GPT indices are re-read as hybrid indices; spec 2.9)",
           (Patch(INTEROP + ":retarget_fsdp_state_dict_to_gpt_checkpoint", _fsdp_twice),)),
    # pipeline segments
    Mutant("segment_index_r_vpp", 24, "pipe-path segment index computed as pp_rank*VPP + vp_stage "
           "instead of vp_stage*PP + pp_rank",
           (Patch(ALLOC + ":select_pipeline_segment", _segment_rank_major),)),
    # split factory
    Mutant("split_drop_tp_offset", 1, "the split factory's chunks lose the TP rank offset (t*s_j): every "
           "TP rank writes its chunk at offset 0",
           (Patch(SSM_UTILS + ":_split_tensor_factory", _split_no_tp_offset),)),
    Mutant("gdp_split_drop_tp_offset", 1, "the GatedDeltaProduct mixer's own split factory (a copy of ssm.utils') "
           "loses the TP rank offset: every TP rank writes its [z|V|K|Q|b|a] chunks at offset 0",
           (Patch(GDP + ":_split_tensor_factory", _split_no_tp_offset),)),
    # validation
    Mutant("integrity_ignores_duplicates", 25, "the sharding-integrity access counter saturates at 1, so "
           "two main replicas writing the same chunk go unnoticed (holes are still reported)",
           (Patch(VALIDATION + ":_compute_shards_access", _access_saturated),)),
    # GTP checkpoint path
    Mutant("gtp_no_gather", 23, "GDP's sharded_state_dict does not see its in_proj as a GTP shard and splits "
           "the (R, C) shard without gathering it",
           (Patch(GDP + ":is_gtp_param", _no_gather),)),
    Mutant("gtp_writer_wrong_group", 23, "the GTP shard's writer is elected over the GTP remat group (whose "
           "peers hold different shards) instead of the GTP-excluded DP group",
           (Patch(GTP_API, _wrong_group),)),
    Mutant("gtp_saves_pad_rows", 23, "the gathered in_proj keeps the alignment pad rows when it is "
           "re-described for saving",
           (Patch(GDP + ":make_tp_sharded_tensor_for_checkpoint", _pad_rows_saved),)),
    Mutant("gtp_no_zero_fill", 23, "the GDP in_proj merge pads the loaded rows with uninitialised memory "
           "instead of zeros",
           (Patch(GDP + ":torch.nn.functional.pad", _no_zero_fill),)),
    Mutant("gtp_offset_no_tp_term", 23, "the GTP parameter's composite axis-0 offset drops its TP term "
           "(t*G + g -> g)",
           (Patch("megatron.core.utils:make_tp_sharded_tensor_for_checkpoint", _offset_no_tp_term),),
           requires=(GTP_API,)),
    # load order
    Mutant("merge_factories_first", 11, "serialization.load applies the factory merges to the loaded shards "
           "before merging them with the common and nonpersistent parts (to_state_dict's order): a factory "
           "whose build held a LocalNonpersistentObject (an all-padding GTP rank) no longer finds it",
           (Patch(SERIALIZATION + ":load_preprocess", _hold_factories),
            Patch(STRATEGIES_TORCH + ":TorchDistLoadShardedStrategy.load", _note_loaded),
            Patch(SERIALIZATION + ":merge", _merge_factories_before),
            Patch(SERIALIZATION + ":apply_factory_merges", _skip_merged_factories)),
           requires=(GTP_API,)),  # only an all-padding GTP rank's factory holds such an object
    # real model code (real_models/; only the gate's model_dump group builds these modules)
    Mutant("hybrid_layer_number_from_zero", None, "HybridStack numbers its layers from 0 (layer_number = i + "
           "pp_layer_offset): every hybrid layer's checkpoint key names the layer before it",
           (Patch(HYBRID_BLOCK + ":HybridStack.__init__", _layer_numbers_from_zero),)),
    Mutant("output_layer_shape_strict", None, "an untied output layer's weight loses allow_shape_mismatch "
           "(a padded vocabulary no longer loads across a vocabulary-padding change)",
           (Patch(LANGUAGE_MODULE + ":LanguageModule.sharded_state_dict", _output_layer_shape_strict),)),
    Mutant("experts_key_prefix_once", None, "SequentialMLP keys its experts under 'mlp.experts.' instead of "
           "'mlp.experts.experts.' (the prefix TEGroupedMLP copies), so checkpoints of the two differ",
           (Patch(EXPERTS + ":SequentialMLP.sharded_state_dict", _experts_prefix_once),)),
    Mutant("experts_replica_dense_dp", None, "expert entries replicate over the dense DP rank instead of the "
           "expert-DP rank (DP modulo EP): the experts of an EP rank whose dense DP rank is not 0 have no main "
           "replica, so no rank saves them",
           (Patch(EXPERTS + ":SequentialMLP.sharded_state_dict", _experts_dense_dp_replica),)),
    Mutant("distributed_optimizer_gather_keeps_bucket_padding", None, "the DistributedOptimizer's gathered "
           "state buffers keep each bucket's end padding while the model-space format (fully_reshardable) cuts "
           "them as if it were stripped, the disagreement Megatron's fix 32a03b77c5 removed: the state of every "
           "parameter behind a padded bucket is saved from another parameter's place",
           (Patch("megatron.core.optimizer.distrib_optimizer:DistributedOptimizer.get_parameter_state_dp_zero",
                  _gather_keeps_bucket_padding),),
           tier="real", phase="save"),
    # the candidate shard-split design (not Megatron's code; mutants of the harness's candidate, run
    # with --candidate shard-split: each a mistake the pending PR could make)
    Mutant("candidate_piece_offset_no_tp_term", 23, "candidate shard-split design: a piece's offset in its "
           "chunk lacks the TP term (t*s_j): at TP > 1 both TP ranks write the same rows (the review's gap)",
           (Patch(_candidate("_piece_offset"), _candidate_offset_no_tp_term),)),
    Mutant("candidate_saves_pad_rows", 23, "candidate shard-split design: the last section's piece runs on "
           "to the end of the shard, saving the alignment pad rows",
           (Patch(_candidate("_piece_rows"), _candidate_pad_rows_saved),)),
    Mutant("candidate_no_zero_fill", 23, "candidate shard-split design: the merge appends uninitialised "
           "rows for the shard's padding instead of zeros",
           (Patch(_candidate("_zero_rows"), _candidate_no_zero_fill),)),
    Mutant("candidate_no_placeholder", 23, "candidate shard-split design: an all-padding rank builds an "
           "empty list instead of a zero-element LocalNonpersistentObject",
           (Patch(_candidate("_placeholder"), _candidate_no_placeholder),)),
    Mutant("candidate_piece_copies", 23, "candidate shard-split design: a piece copies its rows of the "
           "shard instead of viewing them (the memory the design saves is spent again)",
           (Patch(_candidate("_piece_data"), _candidate_piece_copies),)),
    Mutant("candidate_global_shape_from_padded", 23, "candidate shard-split design: the last chunk's global "
           "shape counts the alignment pad rows (T*(s_j + pad) instead of T*s_j)",
           (Patch(_candidate("_chunk_global_rows"), _candidate_global_from_padded),)),
)

# ---- the training load path (docs/roundtrip.md "Real models", scenario real_gpt_hybrid_training) ---

def _no_gpt_to_hybrid_setup(original, M):
    @functools.wraps(original)
    def setup(args, ckpt_args, model):
        return None, False  # "checkpoint and runtime already agree": no layer maps, no retarget
    return setup


def _gpt_to_hybrid_setup_without_optimizer(original, M):
    @functools.wraps(original)
    def setup(args, ckpt_args, model):
        layer_maps, _ = original(args, ckpt_args, model)
        return layer_maps, False  # the layer maps, but the optimizer's state is not retargeted with the model's
    return setup


MUTANTS_TABLE += (
    Mutant("training_skips_gpt_to_hybrid_setup", None, "load_checkpoint skips its GPT -> hybrid setup "
           "(_maybe_setup_gpt_to_hybrid_load answers (None, False)): a GPT checkpoint is read with the hybrid "
           "run's own keys and args, as if that run had saved it",
           (Patch("megatron.training.checkpointing:_maybe_setup_gpt_to_hybrid_load", _no_gpt_to_hybrid_setup),),
           tier="real"),
    Mutant("training_gpt_to_hybrid_skips_optimizer", None, "load_checkpoint's GPT -> hybrid setup answers "
           "load_optim False although the GPT run saved optimizer state: the model is retargeted, the optimizer's "
           "sharded state dict is not, so its state is asked for under the hybrid run's own keys",
           (Patch("megatron.training.checkpointing:_maybe_setup_gpt_to_hybrid_load",
                  _gpt_to_hybrid_setup_without_optimizer),),
           tier="real"),
)

# ---- GTP replica ids (real model code; killed by the gate's model_dump group at GTP > 1) ---------

GTP_IMPL = "megatron.core.tensor_parallel.generalized_tensor_parallelism"


def _gtp_inclusive_dp_replica(original, M):
    @functools.wraps(original)
    def replica_rank(param, explicit_group=None):
        from megatron.core import parallel_state
        # the DP rank over replicate-DP x gtp_remat (parallel_state's default) instead of the
        # gtp_remat-excluded one: GTP peers hold different shards, so only GTP rank 0's shards have a writer
        if not getattr(param, "allreduce", True):
            return parallel_state.get_expert_data_parallel_rank(with_gtp_remat=True)
        return parallel_state.get_data_parallel_rank(with_context_parallel=True, with_gtp_remat=True)
    return replica_rank


MUTANTS_TABLE += (
    Mutant("gtp_replica_id_gtp_inclusive_dp", None, "GTP-sharded weights take their replica id from the "
           "GTP-inclusive DP rank (g + G*d) instead of the gtp_remat-excluded DP rank (d): every GTP rank but "
           "0 marks its distinct shard a secondary replica, so no rank saves it",
           (Patch(GTP_API, _gtp_inclusive_dp_replica),
            Patch(GTP_IMPL + ":gtp_replica_rank", _gtp_inclusive_dp_replica))),
)

_BY_NAME = {m.name: m for m in MUTANTS_TABLE}
assert len(_BY_NAME) == len(MUTANTS_TABLE), "duplicate mutant names in MUTANTS_TABLE"


def describe(M=None):
    """Every mutant with what it patches, and whether this Megatron has all of it: a mutant of
    code the checkout lacks (GDP/GTP in a megatron-core without them) cannot be planted, and the
    campaign reports it as not applicable rather than as killed or survived. A candidate_* mutant
    applies only where the candidate it plants a mistake in is applied (--candidate shard-split)."""
    out = []
    candidate_applied = bool(M is not None and getattr(M, "candidate", {}).get("applied"))
    for m in MUTANTS_TABLE:
        missing = [why for why in (_missing(t) for t in [p.target for p in m.patches] + list(m.requires)) if why]
        if is_candidate_mutant(m.name) and not candidate_applied:
            missing.append("the candidate shard-split design is not applied here (--candidate shard-split; "
                           "never over a checkout's own factory)")
        row = {"name": m.name, "spec_bug_class": m.bug_class, "patches": [p.target for p in m.patches],
               "description": m.description + " [patches " + ", ".join(p.target for p in m.patches) + "]",
               "applicable": not missing}
        if m.tier:
            row["tier"] = m.tier
        if missing:
            row["not_applicable"] = "; ".join(missing)
        out.append(row)
    return out


def phase_of(name):
    """The round-trip world a mutant is planted in: "save" or "load" (the round trip's own mutants, LOCAL_MUTANTS
    of roundtrip_support, are the loading run's)."""
    return _BY_NAME[name].phase if name in _BY_NAME else "load"


def is_candidate_mutant(name):
    return name.startswith("candidate_")


def _missing(target):
    """Why `target` (module:attr.path) cannot be patched in this Megatron, or None."""
    try:
        _resolve(target)
    except (ImportError, AttributeError) as exc:
        return str(exc)
    return None


def apply(name, M):
    for patch in _BY_NAME[name].patches:
        _install(patch.target, lambda original, make=patch.make: make(original, M))


class _Names:
    def __contains__(self, name):
        return name in _BY_NAME


MUTANTS = _Names()


# ---- installing a patch ----------------------------------------------------------------------

class _Proxy(types.ModuleType):
    """A module stand-in: one attribute replaced, everything else from the wrapped object."""

    def __init__(self, wrapped, name, value):
        super().__init__(getattr(wrapped, "__name__", "proxy"))
        object.__setattr__(self, "_wrapped", wrapped)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_value", value)

    def __getattr__(self, attr):
        if attr == object.__getattribute__(self, "_name"):
            return object.__getattribute__(self, "_value")
        return getattr(object.__getattribute__(self, "_wrapped"), attr)


def _resolve(target):
    """(module, attribute path, the objects along it) of module:attr.path; ImportError or
    AttributeError naming what is missing."""
    module_name, _, path = target.partition(":")
    module = importlib.import_module(module_name)
    parts = path.split(".")
    chain = [module]
    for part in parts:
        if not hasattr(chain[-1], part):
            raise AttributeError(f"mutant target {target}: {part} not found")
        chain.append(getattr(chain[-1], part))
    return module, parts, chain[:-1]


def _install(target, make):
    module, parts, chain = _resolve(target)
    value = make(getattr(chain[-1], parts[-1]))
    if len(chain) > 1 and isinstance(chain[-1], type):
        setattr(chain[-1], parts[-1], value)  # a class attribute: set on the class itself
        return
    # rebind from the innermost attribute outwards; only the module's own name is changed
    for holder, part in zip(reversed(chain[1:]), reversed(parts[:-1])):
        value = _Proxy(holder, parts[parts.index(part) + 1], value)
    setattr(module, parts[0] if len(parts) > 1 else parts[-1], value)
