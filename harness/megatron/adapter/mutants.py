"""Run-time mutants of Megatron: each patch makes the real code behave the way a plausible bad
change would (spec section 6), so the harness can show that its properties catch it.

Patches wrap or replace module attributes (functions, regexes, constant tables) of the imported
Megatron modules; no Megatron code is copied. A mutant stays applied for the rest of the process
(one process per mutant). The adapter's ops look every function up through its module at call
time, so they see the patched attribute; Megatron's own internal calls resolve module globals at
call time too, so a patched helper is also used by its Megatron callers.
"""

import functools
import re

_REGISTRY = {}


def mutant(name, description, bug_class):
    def register(fn):
        _REGISTRY[name] = (description, bug_class, fn)
        return fn
    return register


def describe():
    return [{"name": n, "description": d, "spec_bug_class": b} for n, (d, b, _) in _REGISTRY.items()]


def apply(name, M):
    _REGISTRY[name][2](M)


class _Names:
    def __contains__(self, name):
        return name in _REGISTRY


MUTANTS = _Names()


def _maps_with(M, maps, **changes):
    """A GPTCompatLayerMaps like `maps` with some fields replaced (the record is frozen)."""
    fields = dict(attention_to_gpt=maps.attention_to_gpt, mlp_to_gpt=maps.mlp_to_gpt,
                  fresh_init=maps.fresh_init, num_gpt_layers=maps.num_gpt_layers)
    fields.update(changes)
    return type(maps)(**fields)


def _wrap_maps(M, transform):
    original = M.interop.gpt_compatible_layer_maps

    @functools.wraps(original)
    def wrapped(pattern):
        return transform(original, pattern)

    M.interop.gpt_compatible_layer_maps = wrapped


# ---- layer maps ----------------------------------------------------------------------------

@mutant("maps_accept_mixed", "gpt_compatible_layer_maps accepts patterns mixing '-' and 'E' "
        "(treats every 'E' as '-')", 12)
def _accept_mixed_mlp(M):
    def transform(original, pattern):
        if isinstance(pattern, str) and "-" in pattern and "E" in pattern.split("/")[0]:
            head, sep, tail = pattern.partition("/")
            pattern = head.replace("E", "-") + sep + tail
        return original(pattern)
    _wrap_maps(M, transform)


@mutant("maps_gpt_index_one_based", "layer maps number GPT layers from 1 (layer_number instead of "
        "index): every hybrid->GPT index is off by one", None)
def _maps_off_by_one(M):
    def transform(original, pattern):
        maps = original(pattern)
        return _maps_with(M, maps,
                          attention_to_gpt={h: g + 1 for h, g in maps.attention_to_gpt.items()},
                          mlp_to_gpt={h: g + 1 for h, g in maps.mlp_to_gpt.items()})
    _wrap_maps(M, transform)


@mutant("maps_pipes_not_stripped", "pipe separators are not stripped before numbering: each '|' "
        "takes a layer index (as if it were a fresh layer), shifting later indices", 13)
def _pipes_counted(M):
    def transform(original, pattern):
        if isinstance(pattern, str) and "|" in pattern:
            head, sep, tail = pattern.partition("/")
            pattern = head.replace("|", "M") + sep + tail
        return original(pattern)
    _wrap_maps(M, transform)


@mutant("maps_reject_trailing_slash", "a trailing '/' (MTP depth 0) is rejected as an MTP suffix", 14)
def _reject_trailing_slash(M):
    def transform(original, pattern):
        if isinstance(pattern, str) and "/" in pattern:
            raise ValueError(f"Hybrid layer pattern {pattern!r} contains MTP layers ('/'), which have "
                             "no source weights in a GPT checkpoint. (mutant)")
        return original(pattern)
    _wrap_maps(M, transform)


@mutant("fresh_init_empty", "fresh_init is left empty, so 'M' layers are not kept local (their "
        "entries now hit the unknown-layer error instead of becoming LocalNonpersistentObject)", 20)
def _fresh_empty(M):
    def transform(original, pattern):
        return _maps_with(M, original(pattern), fresh_init=frozenset())
    _wrap_maps(M, transform)


# ---- retarget --------------------------------------------------------------------------------

@mutant("retarget_final_layer_norm", "final norm is mapped to 'decoder.final_layer_norm.' instead of "
        "'decoder.final_layernorm.'", 15)
def _final_norm_wrong(M):
    M.interop._GPT_FINAL_NORM_KEY_MAP = {"decoder.final_norm.": "decoder.final_layer_norm."}


@mutant("retarget_anchored_layer_regex", "the decoder-layer regex is anchored at the start of the key, so "
        "optimizer.state.<s>.decoder.layers.<n>. entries are not retargeted", 16)
def _anchored_regex(M):
    M.interop._DECODER_LAYER_KEY_RE = re.compile(r"^" + M.interop._DECODER_LAYER_KEY_RE.pattern)


@mutant("retarget_drop_optimizer_prefix", "retargeted layer keys lose everything before 'decoder.layers.' "
        "(optimizer entries renamed to bare model keys)", 16)
def _drop_prefix(M):
    original = M.interop._prepend_gpt_layer_axis

    @functools.wraps(original)
    def wrapped(entry, gpt_layer_idx, num_gpt_layers):
        pos = entry.key.find("decoder.layers.")
        if pos > 0:
            entry.key = entry.key[pos:]
        return original(entry, gpt_layer_idx, num_gpt_layers)

    M.interop._prepend_gpt_layer_axis = wrapped


@mutant("retarget_so_placeholder_prepended", "the ShardedObject (1,)/(0,) placeholder gets the layer axis "
        "prepended, giving (L, 1)/(gi, 0) instead of (L,)/(gi,)", 17)
def _so_prepended(M):
    original = M.interop._prepend_gpt_layer_axis

    @functools.wraps(original)
    def wrapped(entry, gpt_layer_idx, num_gpt_layers):
        if isinstance(entry, M.ShardedObject):
            # A list compares unequal to the (1,) tuple, so Megatron takes its prepend branch.
            entry.global_shape = list(entry.global_shape)
            entry = original(entry, gpt_layer_idx, num_gpt_layers)
            entry.global_shape = tuple(entry.global_shape)
            return entry
        return original(entry, gpt_layer_idx, num_gpt_layers)

    M.interop._prepend_gpt_layer_axis = wrapped


@mutant("retarget_prepend_axis_not_incremented", "ShardedTensor gains the layer axis in its shapes but "
        "prepend_axis_num is not incremented", 18)
def _prepend_not_counted(M):
    original = M.interop._prepend_gpt_layer_axis

    @functools.wraps(original)
    def wrapped(entry, gpt_layer_idx, num_gpt_layers):
        out = original(entry, gpt_layer_idx, num_gpt_layers)
        if isinstance(out, M.ShardedTensor):
            out.prepend_axis_num -= 1
        return out

    M.interop._prepend_gpt_layer_axis = wrapped


@mutant("retarget_factory_wrapped_twice", "a ShardedTensorFactory's build is wrapped twice, so built "
        "entries get two layer axes", 19)
def _factory_twice(M):
    original = M.interop._prepend_gpt_layer_axis

    @functools.wraps(original)
    def wrapped(entry, gpt_layer_idx, num_gpt_layers):
        out = original(entry, gpt_layer_idx, num_gpt_layers)
        if isinstance(out, M.ShardedTensorFactory):
            out = original(out, gpt_layer_idx, num_gpt_layers)
        return out

    M.interop._prepend_gpt_layer_axis = wrapped


@mutant("retarget_omitted_by_equality", "output_layer._extra_state is recognised only when the key is "
        "exactly that string (prefixed keys are no longer kept local)", 22)
def _omitted_equality(M):
    original = M.interop.retarget_sharded_state_dict_to_gpt_checkpoint
    omitted = tuple(M.interop._GPT_OMITTED_LOCAL_KEYS)
    M.interop._GPT_OMITTED_LOCAL_KEYS = ()

    @functools.wraps(original)
    def wrapped(sharded_state_dict, layer_maps):
        def exact(entry):
            if isinstance(entry, M.ShardedBase) and entry.key in omitted:
                return M.LocalNonpersistentObject(entry.data)
            return entry
        M.dict_utils.dict_list_map_inplace(exact, sharded_state_dict)
        return original(sharded_state_dict, layer_maps)

    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint = wrapped


@mutant("omitted_suffix_too_broad", "the omitted-key suffix also matches output_layer.weight, so the "
        "output layer is never loaded", 22)
def _omitted_broad(M):
    M.interop._GPT_OMITTED_LOCAL_KEYS = tuple(M.interop._GPT_OMITTED_LOCAL_KEYS) + ("output_layer.weight",)


@mutant("retarget_unknown_layer_skipped", "entries of hybrid layers missing from the maps are left unchanged "
        "instead of raising ValueError (also in the FSDP key path)", 21)
def _skip_unknown(M):
    original = M.interop.retarget_sharded_state_dict_to_gpt_checkpoint
    original_key = M.interop._retarget_explicit_key_to_gpt_checkpoint

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

    @functools.wraps(original_key)
    def wrapped_key(key, layer_maps, checkpoint_keys=None):
        try:
            return original_key(key, layer_maps, checkpoint_keys)
        except ValueError as exc:
            if "refers to hybrid layer" in str(exc):
                return key
            raise

    M.interop.retarget_sharded_state_dict_to_gpt_checkpoint = wrapped
    M.interop._retarget_explicit_key_to_gpt_checkpoint = wrapped_key


class _Hidden:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


# ---- FSDP ------------------------------------------------------------------------------------

@mutant("fsdp_first_capture", "FSDP prefix recovery takes the first matching checkpoint key when "
        "several distinct module.-prefixed names match, instead of leaving the key unchanged", 23)
def _fsdp_first(M):
    original = M.interop._retarget_explicit_key_to_gpt_checkpoint

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

    M.interop._retarget_explicit_key_to_gpt_checkpoint = wrapped


@mutant("fsdp_second_pass", "the FSDP tree is retargeted twice (the explicit-key path is not "
        "idempotent: GPT indices are re-read as hybrid indices; spec 2.9)", None)
def _fsdp_twice(M):
    original = M.interop.retarget_fsdp_state_dict_to_gpt_checkpoint

    @functools.wraps(original)
    def wrapped(state_dict, layer_maps, checkpoint_keys=None, checkpoint_prefix=""):
        once = original(state_dict, layer_maps, checkpoint_keys, checkpoint_prefix)
        return original(once, layer_maps, checkpoint_keys, checkpoint_prefix)

    M.interop.retarget_fsdp_state_dict_to_gpt_checkpoint = wrapped


# ---- pipeline segments -------------------------------------------------------------------------

@mutant("segment_index_r_vpp", "pipe-path segment index computed as pp_rank*VPP + vp_stage "
        "instead of vp_stage*PP + pp_rank", 24)
def _segment_rank_major(M):
    original = M.alloc.select_pipeline_segment

    @functools.wraps(original)
    def wrapped(main_pattern, pp_group, vp_stage, *args, **kwargs):
        segments = main_pattern.split("|") if main_pattern else [""]
        torch = M.torch
        pp_rank = torch.distributed.get_rank(pp_group) if pp_group is not None else 0
        pp_size = torch.distributed.get_world_size(pp_group) if pp_group is not None else 1
        if len(segments) > 1 and len(segments) % pp_size == 0 and vp_stage is not None:
            vpp = len(segments) // pp_size
            wrong = pp_rank * vpp + vp_stage
            # Ask Megatron for segment `wrong` through the (rank, stage) that really selects it.
            fake = type(pp_group)(wrong % pp_size, pp_size)
            return original(main_pattern, fake, wrong // pp_size, *args, **kwargs)
        return original(main_pattern, pp_group, vp_stage, *args, **kwargs)

    M.alloc.select_pipeline_segment = wrapped


# ---- split factory -------------------------------------------------------------------------------

@mutant("split_drop_tp_offset", "the split factory's chunks lose the TP rank offset (t*s_j): every "
        "TP rank writes its chunk at offset 0", 1)
def _split_no_tp_offset(M):
    original = M.ssm_utils._split_tensor_factory

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

    M.ssm_utils._split_tensor_factory = wrapped


# ---- validation ----------------------------------------------------------------------------------

@mutant("integrity_ignores_duplicates", "the sharding-integrity access counter saturates at 1, so "
        "two main replicas writing the same chunk go unnoticed (holes are still reported)", 25)
def _integrity_dups(M):
    original = M.validation._compute_shards_access

    @functools.wraps(original)
    def wrapped(rank_sharding):
        return original(rank_sharding).clamp(max=1)

    M.validation._compute_shards_access = wrapped


# ---- GTP checkpoint path (declarative) ----------------------------------------------------------
#
# Each row is (name, spec bug class, description, target, replacement): `target` is a dotted
# attribute path "module:attr[.attr...]" of an imported Megatron module; `replacement(original,
# M)` returns what is installed there. A path through a module-level name that other code shares
# (e.g. "torch.nn.functional.pad" as the GDP mixer sees it) is rebound only in that module, by a
# proxy, so the rest of Megatron and torch stay untouched. Applying a row whose target no longer
# exists raises (the mutant would silently be a no-op).

import importlib as _importlib
import types as _types


class _Proxy(_types.ModuleType):
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


def _install(target, make):
    module_name, _, path = target.partition(":")
    module = _importlib.import_module(module_name)
    parts = path.split(".")
    chain = [module]
    for part in parts[:-1]:
        if not hasattr(chain[-1], part):
            raise AttributeError(f"mutant target {target}: {part} not found")
        chain.append(getattr(chain[-1], part))
    if not hasattr(chain[-1], parts[-1]):
        raise AttributeError(f"mutant target {target}: {parts[-1]} not found")
    value = make(getattr(chain[-1], parts[-1]))
    # rebind from the innermost attribute outwards; only the module's own name is changed
    for holder, part in zip(reversed(chain[1:]), reversed(parts[:-1])):
        value = _Proxy(holder, parts[parts.index(part) + 1], value)
    setattr(module, parts[0] if len(parts) > 1 else parts[-1], value)


def _gtp_param(t):
    return getattr(t, "is_gtp_weight_remat", False)


def _no_gather(original):
    # the mixer does not recognise its in_proj as a GTP shard: splits the (R, C) shard as if TP-local
    return lambda param: False


def _wrong_group(original):
    def elect(param, explicit_group=None):
        from megatron.core.utils import get_pg_rank
        return get_pg_rank(param.group)  # the GTP remat group: its peers hold different shards
    return elect


def _pad_rows_saved(original):
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


def _no_zero_fill(original):
    def pad(t, spec, *args, **kwargs):
        import torch
        rows = spec[3] if len(spec) >= 4 else 0
        if rows > 0 and t.dim() >= 1 and t.shape[0] > 0:
            # torch.empty-like: the pad rows keep whatever the buffer held (here: the last real row)
            return torch.cat([t, t[-1:].expand((rows,) + tuple(t.shape[1:]))])
        return original(t, spec, *args, **kwargs)
    return pad


def _offset_no_tp_term(original):
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


GTP_MUTANTS = (
    ("gtp_no_gather", 23, "GDP's sharded_state_dict does not see its in_proj as a GTP shard and splits the (R, C) "
     "shard without gathering it", "megatron.core.ssm.gated_delta_product:is_gtp_param", _no_gather),
    ("gtp_writer_wrong_group", 23, "the GTP shard's writer is elected over the GTP remat group (whose peers hold "
     "different shards) instead of the GTP-excluded DP group",
     "megatron.core.tensor_parallel.gtp_api:gtp_replica_rank", _wrong_group),
    ("gtp_saves_pad_rows", 23, "the gathered in_proj keeps the alignment pad rows when it is re-described for "
     "saving", "megatron.core.ssm.gated_delta_product:make_tp_sharded_tensor_for_checkpoint", _pad_rows_saved),
    ("gtp_no_zero_fill", 23, "the GDP in_proj merge pads the loaded rows with uninitialised memory instead of "
     "zeros", "megatron.core.ssm.gated_delta_product:torch.nn.functional.pad", _no_zero_fill),
    ("gtp_offset_no_tp_term", 23, "the GTP parameter's composite axis-0 offset drops its TP term (t*G + g -> g)",
     "megatron.core.utils:make_tp_sharded_tensor_for_checkpoint", _offset_no_tp_term),
)


def _register_declared(name, bug_class, description, target, make):
    def apply_row(M):
        _install(target, make)
    _REGISTRY[name] = (description + f" [patches {target}]", bug_class, apply_row)


for _row in GTP_MUTANTS:
    _register_declared(*_row)


@mutant("merge_factories_first", "serialization.load applies the factory merges to the loaded shards before "
        "merging them with the common and nonpersistent parts (to_state_dict's order): a factory whose "
        "build held a LocalNonpersistentObject (an all-padding GTP rank) no longer finds it", 11)
def _merge_factories_first(M):
    import megatron.core.dist_checkpointing.serialization as ser
    from megatron.core.dist_checkpointing.strategies import torch as strategies_torch
    held = {}
    preprocess, merge, factory_merges = ser.load_preprocess, ser.merge, ser.apply_factory_merges
    strategy_load = strategies_torch.TorchDistLoadShardedStrategy.load

    def load_preprocess(sharded_state_dict):
        out = preprocess(sharded_state_dict)
        held["factories"], held["done"] = out[2], False
        return out

    def load(self, *args, **kwargs):
        out = strategy_load(self, *args, **kwargs)
        held["loaded"] = id(out)
        return out

    def merge_first(x1, x2, *args, **kwargs):
        if held.get("loaded") == id(x2) and held.get("factories") is not None:
            x2 = factory_merges(x2, held["factories"])
            held["done"] = True
        return merge(x1, x2, *args, **kwargs)

    def merges(x1, x2, *args, **kwargs):
        if held.get("done"):
            held["done"] = False
            return x1
        return factory_merges(x1, x2, *args, **kwargs)

    ser.load_preprocess, ser.merge, ser.apply_factory_merges = load_preprocess, merge_first, merges
    strategies_torch.TorchDistLoadShardedStrategy.load = load
