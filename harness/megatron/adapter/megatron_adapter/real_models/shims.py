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
}


def check():
    """[{"name", "needed", "why"}]; ShimError when a shim's code is no longer in the checkout."""
    import torch
    out = []
    for name, (module_name, snippet, why) in SHIMS.items():
        try:
            module = importlib.import_module(module_name)
            source = inspect.getsource(module)
        except Exception as exc:  # noqa: BLE001
            raise ShimError(f"shim {name}: cannot read {module_name}: {type(exc).__name__}: {exc}")
        if snippet not in source:
            raise ShimError(f"shim {name}: {module_name} no longer contains {snippet!r}; re-read the code and "
                            "update the shim")
        out.append({"name": name, "needed": not torch.cuda.is_available(), "why": why})
    return out


@contextlib.contextmanager
def applied():
    """The shims in force (only those still needed); undone on exit."""
    import torch
    needed = {s["name"] for s in check() if s["needed"]}
    undo = []

    def patch(obj, attr, value):
        undo.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)

    if "embedding_group_cuda_copy" in needed:
        patch(torch.Tensor, "cuda", lambda self, *args, **kwargs: self)
    mixer = importlib.import_module("megatron.core.ssm.mamba_mixer")
    if "mamba_ssm_rmsnorm_gated" in needed and not getattr(mixer, "HAVE_MAMBA_SSM", True):
        patch(mixer, "HAVE_MAMBA_SSM", True)
        patch(mixer, "ExtendedRMSNorm", _gated_norm_stub(torch))
    if "einops_flag" in needed and not getattr(mixer, "HAVE_EINOPS", True):
        patch(mixer, "HAVE_EINOPS", True)
    context_parallel = importlib.import_module("megatron.core.ssm.mamba_context_parallel")
    if "einops_flag_context_parallel" in needed and not getattr(context_parallel, "HAVE_EINOPS", True):
        patch(context_parallel, "HAVE_EINOPS", True)
    if "cuda_current_device" in needed:
        patch(torch.cuda, "current_device", lambda: "cpu")
    if "cuda_rng_tracker_fork" in needed:
        patch(mixer, "get_cuda_rng_tracker", lambda *a, **k: _NoFork())
    if "hybrid_final_norm_tenorm" in needed:
        block = importlib.import_module("megatron.core.models.hybrid.hybrid_block")
        from megatron.core.models.gpt.gpt_layer_specs import LNImpl
        patch(block, "TENorm", LNImpl)
    try:
        yield
    finally:
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


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
