"""Mutants of GPT -> hybrid retargeting (gpt_checkpoint_interop): the layer axis prepended, the omitted keys,
unknown layers, and the FSDP key path."""

import functools
import re


def replace_with(value):
    """make() that installs a fixed value (a constant table) whatever was there."""
    return lambda original, M: value


def anchored(original, M):
    return re.compile(r"^" + original.pattern)


def prepend_wrapper(step):
    """make() for _prepend_gpt_layer_axis: step(original, M, entry, gpt_layer_idx, num_gpt_layers)."""
    def make(original, M):
        @functools.wraps(original)
        def wrapped(entry, gpt_layer_idx, num_gpt_layers):
            return step(original, M, entry, gpt_layer_idx, num_gpt_layers)
        return wrapped
    return make


def drop_prefix(original, M, entry, gpt_layer_idx, num_gpt_layers):
    pos = entry.key.find("decoder.layers.")
    if pos > 0:
        entry.key = entry.key[pos:]
    return original(entry, gpt_layer_idx, num_gpt_layers)


def so_placeholder_prepended(original, M, entry, gpt_layer_idx, num_gpt_layers):
    if isinstance(entry, M.ShardedObject):
        # A list compares unequal to the (1,) tuple, so Megatron takes its prepend branch.
        entry.global_shape = list(entry.global_shape)
        entry = original(entry, gpt_layer_idx, num_gpt_layers)
        entry.global_shape = tuple(entry.global_shape)
        return entry
    return original(entry, gpt_layer_idx, num_gpt_layers)


def axis_not_counted(original, M, entry, gpt_layer_idx, num_gpt_layers):
    out = original(entry, gpt_layer_idx, num_gpt_layers)
    if isinstance(out, M.ShardedTensor):
        out.prepend_axis_num -= 1
    return out


def factory_twice(original, M, entry, gpt_layer_idx, num_gpt_layers):
    out = original(entry, gpt_layer_idx, num_gpt_layers)
    if isinstance(out, M.ShardedTensorFactory):
        out = original(out, gpt_layer_idx, num_gpt_layers)
    return out


def omitted_exact(original, M):
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


def omitted_broad(original, M):
    return tuple(original) + ("output_layer.weight",)


class _Hidden:
    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


def skip_unknown_entries(original, M):
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


def skip_unknown_key(original, M):
    @functools.wraps(original)
    def wrapped_key(key, layer_maps, checkpoint_keys=None):
        try:
            return original(key, layer_maps, checkpoint_keys)
        except ValueError as exc:
            if "refers to hybrid layer" in str(exc):
                return key
            raise
    return wrapped_key


def fsdp_first(original, M):
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


def fsdp_twice(original, M):
    @functools.wraps(original)
    def wrapped(state_dict, layer_maps, checkpoint_keys=None, checkpoint_prefix=""):
        once = original(state_dict, layer_maps, checkpoint_keys, checkpoint_prefix)
        return original(once, layer_maps, checkpoint_keys, checkpoint_prefix)
    return wrapped
