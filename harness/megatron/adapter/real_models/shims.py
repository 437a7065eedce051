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
    original = torch.Tensor.cuda
    if "embedding_group_cuda_copy" in needed:
        torch.Tensor.cuda = lambda self, *args, **kwargs: self
    try:
        yield
    finally:
        torch.Tensor.cuda = original
