"""What the patches of patches/table.py put in place: kernel stubs, CPU stand-ins of CUDA calls, one-process
ranks, Megatron's own branches chosen for an empty optimizer, and the declared optional fix. Nothing here is
Megatron's code; each is described beside its row in the table."""

import contextlib
import importlib


class KernelNotAvailable(RuntimeError):
    """A CUDA kernel stub was called: this harness builds models to read their state dicts only."""


def kernel_stub(what):
    def kernel(*args, **kwargs):
        raise KernelNotAvailable(f"{what} is stubbed on this CPU machine")
    return kernel


def identity_cuda(self, *args, **kwargs):
    """Tensor.cuda on a CPU machine: the tensor itself (gloo carries CPU tensors)."""
    return self


def cpu_device():
    return "cpu"


def no_wait(*args, **kwargs):
    """torch.cuda.synchronize on a CPU machine: nothing to wait for."""
    return None


def no_memory():
    """filesystem_async._process_memory without psutil: its debug log of memory use reads 0."""
    return 0


def host_tensor(tensor):
    """torch.tensor that makes a tensor asked for on CUDA on the CPU."""
    def make(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return tensor(*args, **kwargs)
    return make


def cuda_type_name(type_of):
    """Tensor.type() that names a CPU tensor by the CUDA type of its dtype; a conversion is unchanged."""
    def cuda_type(self, *args, **kwargs):
        name = type_of(self, *args, **kwargs)
        if args or kwargs or not name.startswith("torch.") or name.startswith("torch.cuda."):
            return name  # a conversion (.type(dtype)) or already a CUDA name: unchanged
        return "torch.cuda." + name[len("torch."):]
    return cuda_type


def te_branch_when_empty(state_dict):
    """DistributedOptimizer.state_dict that runs Megatron's Transformer Engine branch for an optimizer holding no
    state (the step from its non-empty param groups: none), its own branch otherwise."""
    def state_dict_of(self):
        if self.optimizer.state:
            return state_dict(self)
        distrib = importlib.import_module("megatron.core.optimizer.distrib_optimizer")
        flags = (distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER)
        distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER = True, True
        try:
            return state_dict(self)
        finally:
            distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER = flags
    return state_dict_of


def step_from_own_state(set_states):
    """DistributedOptimizer._set_main_param_and_optimizer_states that, handed no `step` (finding F), takes the one
    the optimizer's own state of the parameter holds, which load_state_dict put there: Megatron's setter then
    copies it onto itself and every other state from the tensors handed in, as it would without the shim."""
    def set_main_param_and_optimizer_states(self, model_param, tensors):
        if "step" not in tensors:
            group_index, group_order = self.model_param_group_index_map[model_param]
            own = self.optimizer.state.get(self.optimizer.param_groups[group_index]["params"][group_order], {})
            if "step" in own:
                tensors = {**tensors, "step": own["step"]}
        return set_states(self, model_param, tensors)
    return set_main_param_and_optimizer_states


class NoFork:
    """A CUDA RNG tracker whose fork() does nothing (the parameters it would initialise are never used)."""

    def fork(self, *args, **kwargs):
        return contextlib.nullcontext()


def no_fork_tracker(*args, **kwargs):
    return NoFork()


def supported(*args, **kwargs):
    """check_fla_sequence_packing_support answering supported."""
    return True, None


def gated_norm_stub():
    """mamba_ssm's RMSNormGated parameters (weight of the TP-local d_inner) without its kernel: a CPU module
    whose forward raises and whose sharded_state_dict is ExtendedRMSNorm's (weight split along axis 0 over TP)."""
    import torch

    class GatedRMSNormStub(torch.nn.Module):
        def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True, device=None, dtype=None):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(hidden_size, device="cpu", dtype=dtype))

        def forward(self, *args, **kwargs):
            raise KernelNotAvailable("mamba_ssm's gated RMSNorm kernel is stubbed on this CPU machine")

        def sharded_state_dict(self, prefix="", sharded_offsets=(), metadata=None):
            from megatron.core import parallel_state
            from megatron.core.transformer.utils import make_sharded_tensors_for_checkpoint
            return make_sharded_tensors_for_checkpoint(
                self.state_dict(prefix="", keep_vars=True), prefix, {"weight": 0}, sharded_offsets,
                tp_group=parallel_state.get_tensor_model_parallel_group(), dp_cp_group=metadata["dp_cp_group"])

    return GatedRMSNormStub


def local_norm():
    """The local spec's norm (the one get_gpt_layer_local_spec uses), for HybridStack's hard-coded TENorm."""
    from megatron.core.models.gpt.gpt_layer_specs import LNImpl
    return LNImpl


def gtp_is_gtp_param():
    return importlib.import_module("megatron.core.tensor_parallel.generalized_tensor_parallelism").is_gtp_param


class FakeGroup:
    """Stands for a process group in one process: rank()/size() only."""

    def __init__(self, rank, size):
        self._rank, self._size = rank, size

    def rank(self):
        return self._rank

    def size(self):
        return self._size


def one_process_initialized():
    return True


def one_process_rank(group=None):
    """Global rank 0; a FakeGroup answers for its own group."""
    return group.rank() if isinstance(group, FakeGroup) else 0


def one_process_world_size(group=None):
    return group.size() if isinstance(group, FakeGroup) else 1


def to_state_dict_merges_last(to_state_dict):
    """MCoreTensorAwareStateDict.to_state_dict with its factory merges applied to the complete tree (loaded
    shards merged with the common and nonpersistent parts first), the order serialization.load uses (finding C's
    proposed fix, spec 3.8). Megatron's merge and apply_factory_merges do the work; only when the merges run
    changes."""
    module = importlib.import_module("megatron.core.dist_checkpointing.tensor_aware_state_dict")
    real_merges = module.apply_factory_merges

    def merges_last(self, *args, **kwargs):
        held = []

        def defer(loaded, factories):
            held.append(factories)
            return loaded
        module.apply_factory_merges = defer
        try:
            out = to_state_dict(self, *args, **kwargs)
        finally:
            module.apply_factory_merges = real_merges
        tree = out[0] if isinstance(out, tuple) else out
        for factories in held:
            tree = real_merges(tree, factories)
        return (tree,) + tuple(out[1:]) if isinstance(out, tuple) else tree
    return merges_last


def set_global_args(params):
    """Megatron's global variables set from the run's args as its training start sets them (no tokenizer:
    nothing is tokenized); an earlier run's are unset first."""
    from megatron.training import global_vars
    global_vars.unset_global_variables()
    global_vars.set_global_variables(params["args"], build_tokenizer=False)


def unset_global_args():
    from megatron.training import global_vars
    global_vars.unset_global_variables()
