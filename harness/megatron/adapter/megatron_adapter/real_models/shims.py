"""The declared shims that let a real Megatron model be built on a CPU-only machine
(docs/megatron-patches.md, "Real-model shims"). Each names the Megatron code it stands in for and is
checked before it is used: still needed (what it replaces needs CUDA and CUDA is absent here) and
still matching (the source snippet it was written against is still in the module). A shim that no
longer applies is a harness error (ShimError -> exit 3), never a finding. Shims are scoped: they are
in force only inside `applied()` while a model is built and dumped.
"""

import contextlib
import importlib
import inspect


class ShimError(Exception):
    """A shim that no longer matches the checkout (the harness must be updated)."""


# name -> (module, source snippet that must still be there, why)
SHIMS = {
    "embedding_group_cuda_copy": (
        "megatron.core.models.common.language_module.language_module",
        "weight.data = weight.data.cuda()",
        "LanguageModule.setup_embeddings_and_output_layer moves the tied word-embedding weight to CUDA before "
        "all-reducing it over the embedding group (tied embeddings with pp > 1); on CPU Tensor.cuda() is made "
        "the identity while the model is built, and gloo all-reduces the CPU tensor",
    ),
    "mamba_ssm_rmsnorm_gated": (
        "megatron.core.ssm.mamba_mixer",
        "RMSNormGated = MagicMock()",
        "without mamba_ssm the mixer's gated RMSNorm base class is a MagicMock and MambaMixer refuses to "
        "build (HAVE_MAMBA_SSM); while building, HAVE_MAMBA_SSM is True and ExtendedRMSNorm is a CPU module "
        "with the same weight whose forward raises (a kernel stub) and whose sharded_state_dict is "
        "ExtendedRMSNorm's (make_sharded_tensors_for_checkpoint, weight sharded along axis 0 over TP); the "
        "mixer's ExtendedRMSNorm class itself is a MagicMock here, so its method cannot be reused",
    ),
    "einops_flag": (
        "megatron.core.ssm.mamba_mixer",
        'raise ImportError("einops is required by the Mamba model but cannot be imported")',
        "einops is not installed; it is used only in the mixer's forward, which is never called here",
    ),
    "einops_flag_context_parallel": (
        "megatron.core.ssm.mamba_context_parallel",
        'raise ImportError("einops is required by the Mamba model but cannot be imported")',
        "the same einops check in MambaContextParallel, which the mixer builds; einops is used only in forward",
    ),
    "cuda_current_device": (
        "megatron.core.ssm.mamba_mixer",
        "device=torch.cuda.current_device()",
        "the Mamba mixer allocates its conv1d, A_log, D, dt_bias and norm on torch.cuda.current_device() "
        "regardless of use_cpu_initialization; while building it is 'cpu'",
    ),
    "cuda_rng_tracker_fork": (
        "megatron.core.ssm.mamba_mixer",
        "with get_cuda_rng_tracker().fork():",
        "the Mamba mixer initialises its parameters under the CUDA RNG tracker's fork, which needs CUDA RNG "
        "states; while building, the mixer's tracker forks nothing (parameters are never used)",
    ),
    "hybrid_final_norm_tenorm": (
        "megatron.core.models.hybrid.hybrid_block",
        "self.final_norm = TENorm(",
        "HybridStack hard-codes Transformer Engine's TENorm for its final norm; while building, the local "
        "spec's norm (the one get_gpt_layer_local_spec uses) stands in, same weight and key",
    ),
    # The optimizer's shims (in force only while `model dump --optimizer` builds and dumps it).
    "optimizer_cuda_scalars": (
        "megatron.core.optimizer.optimizer",
        "self._scale_one = torch.tensor([1.0], dtype=torch.float, device='cuda')",
        "MixedPrecisionOptimizer (the base of the DistributedOptimizer) allocates its found-inf flag, overflow "
        "buffer and unit scale with torch.tensor(..., device='cuda'); while the optimizer is built, a "
        "torch.tensor asked for a CUDA device is made on the CPU (they are used only in step's unscaling)",
    ),
    "optimizer_cuda_type_names": (
        "megatron.core.optimizer.distrib_optimizer",
        "elif model_param.type() == 'torch.cuda.FloatTensor':",
        "the DistributedOptimizer sorts parameters into fp32 / float16 groups by their CUDA type names "
        "(torch.cuda.FloatTensor, ...) and refuses any other; while the optimizer is built, Tensor.type() of "
        "a CPU tensor answers the CUDA name of the same dtype",
    ),
    "optimizer_gather_cuda_copy": (
        "megatron.core.optimizer.distrib_optimizer",
        "send_tensor = send_tensor.cuda()",
        "the fully_reshardable format gathers each DP rank's state shard over the data-parallel group "
        "(get_parameter_state_dp_zero) after copying it to CUDA; Tensor.cuda() is the identity, as for "
        "embedding_group_cuda_copy, and gloo gathers the CPU tensors",
    ),
    "optimizer_empty_state_step": (
        "megatron.core.optimizer.distrib_optimizer",
        'steps = list(set([s["step"].item() for s in inner_state_dict["state"].values()]))',
        "without Transformer Engine or Apex, DistributedOptimizer.state_dict reads the step from torch's "
        "per-parameter states and asserts there is exactly one; an optimizer that holds no parameter here "
        "has none (param groups are aligned over all ranks, so a pipeline stage without experts still has an "
        "expert optimizer with empty groups). For such an optimizer only, state_dict runs its Transformer "
        "Engine branch (what GPU training runs: the step from non-empty param groups, here none); needed "
        "while distrib_optimizer.HAVE_APEX_OR_TE is False, whatever the CUDA state",
    ),
    # The GatedDeltaProduct mixer's shims (in force only while `model dump --mixer gdp` builds and dumps it).
    "gdp_mamba_ssm_rmsnorm_gated": (
        "megatron.core.ssm.gated_delta_product",
        "RMSNormGated = MagicMock()",
        "the same gated RMSNorm as mamba_ssm_rmsnorm_gated, in the GDP mixer's module: without mamba_ssm "
        "GatedDeltaProductMixer refuses to build (HAVE_MAMBA_SSM) and its ExtendedRMSNorm is a MagicMock; while "
        "building, HAVE_MAMBA_SSM is True and ExtendedRMSNorm is the same CPU stand-in (weight sharded along "
        "axis 0 over TP, forward raises)",
    ),
    "gdp_fla_kernels": (
        "megatron.core.ssm.gated_delta_product",
        "from fla.ops.gated_delta_product import chunk_gated_delta_product",
        "without flash-linear-attention (fla) GatedDeltaProductMixer refuses to build (HAVE_FLA); while "
        "building, HAVE_FLA is True and the mixer's chunk_gated_delta_product and l2_norm are kernel stubs that "
        "raise KernelNotAvailable when called (the mixer only stores the kernel at construction)",
    ),
    "gdp_causal_conv1d": (
        "megatron.core.ssm.gated_delta_product",
        "ok, reason = check_fla_sequence_packing_support()",
        "GatedDeltaProductMixer asserts at construction that causal_conv1d >= 1.4.0 is installed (its packed-"
        "sequence conv, used only in forward), which imports causal_conv1d; while building, the mixer's "
        "check answers supported and its causal_conv1d_fn is a kernel stub that raises KernelNotAvailable "
        "(without the package it is None)",
    ),
    "gdp_einops_context_parallel": (
        "megatron.core.ssm.gdp_context_parallel",
        'raise ImportError("einops is required but cannot be imported")',
        "GDPContextParallel, which the GDP mixer builds, refuses to build without einops (HAVE_EINOPS); "
        "einops is used only in forward",
    ),
    "gdp_cuda_current_device": (
        "megatron.core.ssm.gated_delta_product",
        "device=torch.cuda.current_device()",
        "the GDP mixer allocates its conv1d, dt_bias, A_log and norm on torch.cuda.current_device() regardless "
        "of use_cpu_initialization; while building it is 'cpu' (the same patch as cuda_current_device)",
    ),
    "gdp_cuda_rng_tracker_fork": (
        "megatron.core.ssm.gated_delta_product",
        "with get_cuda_rng_tracker().fork():",
        "the GDP mixer initialises its parameters under the CUDA RNG tracker's fork; while building, the "
        "mixer's tracker forks nothing (parameters are never used)",
    ),
}
OPTIMIZER_SHIMS = ("optimizer_cuda_scalars", "optimizer_cuda_type_names", "optimizer_gather_cuda_copy",
                   "optimizer_empty_state_step")
GDP_SHIMS = ("gdp_mamba_ssm_rmsnorm_gated", "gdp_fla_kernels", "gdp_causal_conv1d", "gdp_einops_context_parallel",
             "gdp_cuda_current_device", "gdp_cuda_rng_tracker_fork")


def check(names=None):
    """[{"name", "needed", "why"}] of the shims `names` (default: all); ShimError when a shim's code is no
    longer in the checkout."""
    import torch
    out = []
    for name, (module_name, snippet, why) in SHIMS.items():
        if names is not None and name not in names:
            continue
        try:
            module = importlib.import_module(module_name)
            source = inspect.getsource(module)
        except Exception as exc:  # noqa: BLE001
            raise ShimError(f"shim {name}: cannot read {module_name}: {type(exc).__name__}: {exc}")
        if snippet not in source:
            raise ShimError(f"shim {name}: {module_name} no longer contains {snippet!r}; re-read the code and "
                            "update the shim")
        needed = not torch.cuda.is_available()
        if name == "optimizer_empty_state_step":  # about Transformer Engine / Apex, not CUDA
            needed = not getattr(module, "HAVE_APEX_OR_TE", True)
        out.append({"name": name, "needed": needed, "why": why})
    return out


@contextlib.contextmanager
def applied(optimizer=False, gdp=False):
    """The shims in force (only those still needed; the optimizer's only with `optimizer`, the GDP mixer's
    only with `gdp`, so a checkout without that code builds everything else); undone on exit."""
    import torch
    wanted = [name for name in SHIMS
              if (optimizer or name not in OPTIMIZER_SHIMS) and (gdp or name not in GDP_SHIMS)]
    needed = {s["name"] for s in check(wanted) if s["needed"]}
    undo = []

    def patch(obj, attr, value):  # an attribute the module lacks (a failed import's name) is removed again
        undo.append((obj, attr, getattr(obj, attr, _ABSENT)))
        setattr(obj, attr, value)

    if needed & {"embedding_group_cuda_copy", "optimizer_gather_cuda_copy"}:
        patch(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)
    if "optimizer_cuda_scalars" in needed:
        patch(torch, "tensor", _host_tensor(torch.tensor))
    if "optimizer_cuda_type_names" in needed:
        patch(torch.Tensor, "type", _cuda_type_name(torch.Tensor.type))
    mixer = importlib.import_module("megatron.core.ssm.mamba_mixer")
    if "mamba_ssm_rmsnorm_gated" in needed and not getattr(mixer, "HAVE_MAMBA_SSM", True):
        patch(mixer, "HAVE_MAMBA_SSM", True)
        patch(mixer, "ExtendedRMSNorm", _gated_norm_stub(torch))
    if "einops_flag" in needed and not getattr(mixer, "HAVE_EINOPS", True):
        patch(mixer, "HAVE_EINOPS", True)
    context_parallel = importlib.import_module("megatron.core.ssm.mamba_context_parallel")
    if "einops_flag_context_parallel" in needed and not getattr(context_parallel, "HAVE_EINOPS", True):
        patch(context_parallel, "HAVE_EINOPS", True)
    if needed & {"cuda_current_device", "gdp_cuda_current_device"}:
        patch(torch.cuda, "current_device", lambda: "cpu")
    if needed & set(GDP_SHIMS):
        _gdp_stubs(torch, needed, patch)
    if "cuda_rng_tracker_fork" in needed:
        patch(mixer, "get_cuda_rng_tracker", lambda *a, **k: _NoFork())
    if "hybrid_final_norm_tenorm" in needed:
        block = importlib.import_module("megatron.core.models.hybrid.hybrid_block")
        from megatron.core.models.gpt.gpt_layer_specs import LNImpl
        patch(block, "TENorm", LNImpl)
    if "optimizer_empty_state_step" in needed:
        distrib = importlib.import_module("megatron.core.optimizer.distrib_optimizer")
        patch(distrib.DistributedOptimizer, "state_dict",
              _te_branch_when_empty(distrib, distrib.DistributedOptimizer.state_dict))
    try:
        yield
    finally:
        for obj, attr, value in reversed(undo):
            if value is _ABSENT:
                delattr(obj, attr)
            else:
                setattr(obj, attr, value)


_ABSENT = object()


def _gdp_stubs(torch, needed, patch):
    gdp = importlib.import_module("megatron.core.ssm.gated_delta_product")
    if "gdp_mamba_ssm_rmsnorm_gated" in needed and not getattr(gdp, "HAVE_MAMBA_SSM", True):
        patch(gdp, "HAVE_MAMBA_SSM", True)
        patch(gdp, "ExtendedRMSNorm", _gated_norm_stub(torch))
    if "gdp_fla_kernels" in needed and not getattr(gdp, "HAVE_FLA", True):
        patch(gdp, "HAVE_FLA", True)
        for kernel in ("chunk_gated_delta_product", "l2_norm"):
            patch(gdp, kernel, _kernel_stub(f"fla's {kernel}"))
    if "gdp_causal_conv1d" in needed and getattr(gdp, "causal_conv1d_fn", None) is None:
        patch(gdp, "check_fla_sequence_packing_support", lambda: (True, None))
        patch(gdp, "causal_conv1d_fn", _kernel_stub("causal_conv1d's causal_conv1d_fn"))
    context_parallel = importlib.import_module("megatron.core.ssm.gdp_context_parallel")
    if "gdp_einops_context_parallel" in needed and not getattr(context_parallel, "HAVE_EINOPS", True):
        patch(context_parallel, "HAVE_EINOPS", True)
    if "gdp_cuda_rng_tracker_fork" in needed:
        patch(gdp, "get_cuda_rng_tracker", lambda *a, **k: _NoFork())


def _kernel_stub(what):
    def kernel(*args, **kwargs):
        raise KernelNotAvailable(f"{what} is stubbed on this CPU machine")
    return kernel


def _host_tensor(tensor):
    def host_tensor(*args, **kwargs):
        if str(kwargs.get("device", "")).startswith("cuda"):
            kwargs["device"] = "cpu"
        return tensor(*args, **kwargs)
    return host_tensor


def _cuda_type_name(type_of):
    def cuda_type_name(self, *args, **kwargs):
        name = type_of(self, *args, **kwargs)
        if args or kwargs or not name.startswith("torch.") or name.startswith("torch.cuda."):
            return name  # a conversion (.type(dtype)) or already a CUDA name: unchanged
        return "torch.cuda." + name[len("torch."):]
    return cuda_type_name


def _te_branch_when_empty(distrib, state_dict):
    def state_dict_of(self):
        if self.optimizer.state:
            return state_dict(self)
        flags = (distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER)
        distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER = True, True
        try:
            return state_dict(self)
        finally:
            distrib.HAVE_APEX_OR_TE, distrib.USING_TE_OPTIMIZER = flags
    return state_dict_of


class _NoFork:
    def fork(self, *args, **kwargs):
        return contextlib.nullcontext()


class KernelNotAvailable(RuntimeError):
    """A CUDA kernel stub was called: this harness builds models to read their state dicts only."""


def _gated_norm_stub(torch):
    class GatedRMSNormStub(torch.nn.Module):
        """mamba_ssm's RMSNormGated parameters (weight of the TP-local d_inner) without its kernel."""

        def __init__(self, hidden_size, eps=1e-5, group_size=None, norm_before_gate=True, device=None,
                     dtype=None):
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
