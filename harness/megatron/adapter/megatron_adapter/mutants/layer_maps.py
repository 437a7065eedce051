"""Mutants of gpt_compatible_layer_maps (the GPT layer each hybrid layer maps to): each a transform(original,
pattern) wrapped by maps_wrapper."""

import functools


def _maps_with(maps, **changes):
    """A GPTCompatLayerMaps like `maps` with some fields replaced (the record is frozen)."""
    fields = dict(attention_to_gpt=maps.attention_to_gpt, mlp_to_gpt=maps.mlp_to_gpt,
                  fresh_init=maps.fresh_init, num_gpt_layers=maps.num_gpt_layers)
    fields.update(changes)
    return type(maps)(**fields)


def maps_wrapper(transform):
    """make() for gpt_compatible_layer_maps: calls transform(original, pattern)."""
    def make(original, M):
        @functools.wraps(original)
        def wrapped(pattern):
            return transform(original, pattern)
        return wrapped
    return make


def mixed_as_dense(original, pattern):
    if isinstance(pattern, str) and "-" in pattern and "E" in pattern.split("/")[0]:
        head, sep, tail = pattern.partition("/")
        pattern = head.replace("E", "-") + sep + tail
    return original(pattern)


def one_based(original, pattern):
    maps = original(pattern)
    return _maps_with(maps, attention_to_gpt={h: g + 1 for h, g in maps.attention_to_gpt.items()},
                      mlp_to_gpt={h: g + 1 for h, g in maps.mlp_to_gpt.items()})


def pipes_as_layers(original, pattern):
    if isinstance(pattern, str) and "|" in pattern:
        head, sep, tail = pattern.partition("/")
        pattern = head.replace("|", "M") + sep + tail
    return original(pattern)


def reject_slash(original, pattern):
    if isinstance(pattern, str) and "/" in pattern:
        raise ValueError(f"Hybrid layer pattern {pattern!r} contains MTP layers ('/'), which have "
                         "no source weights in a GPT checkpoint. (mutant)")
    return original(pattern)


def no_fresh(original, pattern):
    return _maps_with(original(pattern), fresh_init=frozenset())


def reversed_gpt_layers(original, pattern):
    maps = original(pattern)
    last = maps.num_gpt_layers - 1
    return _maps_with(maps, attention_to_gpt={h: last - g for h, g in maps.attention_to_gpt.items()},
                      mlp_to_gpt={h: last - g for h, g in maps.mlp_to_gpt.items()})
