"""Mutants of Megatron's model and optimizer code (only real models reach it: the gate's model_dump group and
real round trips)."""

import functools


def layer_numbers_from_zero(original, M):
    @functools.wraps(original)
    def init(self, *args, **kwargs):
        original(self, *args, **kwargs)
        for layer in self.layers:  # layer_number = i + pp_layer_offset (0-based) instead of i + 1 + ...
            layer.layer_number -= 1
    return init


def output_layer_shape_strict(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, prefix="", *args, **kwargs):
        out = original(self, prefix, *args, **kwargs)
        entry = out.get(f"{prefix}output_layer.weight")
        if entry is not None and not self.share_embeddings_and_output_weights:
            entry.allow_shape_mismatch = False
        return out
    return sharded_state_dict


def experts_prefix_once(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, prefix="", *args, **kwargs):
        out = original(self, prefix, *args, **kwargs)
        for entry in out.values():  # expert_sharded_prefix = prefix instead of f"{prefix}experts."
            if entry.key.startswith(f"{prefix}experts."):
                entry.key = prefix + entry.key[len(f"{prefix}experts."):]
        return out
    return sharded_state_dict


def experts_dense_dp_replica(original, M):
    @functools.wraps(original)
    def sharded_state_dict(self, *args, **kwargs):
        from megatron.core import parallel_state
        out = original(self, *args, **kwargs)
        dense_dp = parallel_state.get_data_parallel_rank()
        for entry in out.values():
            entry.replica_id = (*entry.replica_id[:2], dense_dp)
        return out
    return sharded_state_dict


def gather_keeps_bucket_padding(original, M):
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


def load_moments_swapped(original, M):
    """The model-space loader hands each parameter's exp_avg on as its exp_avg_sq and back (new dicts: the loaded
    state dict itself is left as Megatron's load returned it)."""
    def swapped(states):
        if "exp_avg" not in states or "exp_avg_sq" not in states:
            return states
        return dict(states, exp_avg=states["exp_avg_sq"], exp_avg_sq=states["exp_avg"])

    @functools.wraps(original)
    def load_parameter_state_from_fully_reshardable(self, state_dict, *args, **kwargs):
        if isinstance(state_dict, dict):
            state_dict = {index: swapped(states) for index, states in state_dict.items()}
        else:
            state_dict = [swapped(states) for states in state_dict]
        return original(self, state_dict, *args, **kwargs)
    return load_parameter_state_from_fully_reshardable


def swiglu_halves_swapped(original, M):
    def swapped_factory(orig, offsets, *a, **k):
        factory = original(orig, offsets, *a, **k)
        build = factory.build_fn

        def swapped_build(*b, **kb):
            pieces = build(*b, **kb)
            w, v = pieces
            w.global_offset, v.global_offset = v.global_offset, w.global_offset
            return pieces
        factory.build_fn = swapped_build
        return factory
    return swapped_factory
