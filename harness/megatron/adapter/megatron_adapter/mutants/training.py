"""Mutants of the training load path (docs/roundtrip.md "Real models", scenario real_gpt_hybrid_training)."""

import functools


def no_gpt_to_hybrid_setup(original, M):
    @functools.wraps(original)
    def setup(args, ckpt_args, model):
        return None, False  # "checkpoint and runtime already agree": no layer maps, no retarget
    return setup


def gpt_to_hybrid_setup_without_optimizer(original, M):
    @functools.wraps(original)
    def setup(args, ckpt_args, model):
        layer_maps, _ = original(args, ckpt_args, model)
        return layer_maps, False  # the layer maps, but the optimizer's state is not retargeted with the model's
    return setup
