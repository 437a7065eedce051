"""Imports Megatron-LM for the adapter: the namespace of its modules and helpers the ops use."""

import os
import sys
import traceback
import types


def log(*args):
    print("megatron-adapter:", *args, file=sys.stderr, flush=True)


# The namespace's optional modules: one that fails to import makes the ops that need it "unsupported".
OPTIONAL = {
    "interop": "megatron.core.dist_checkpointing.gpt_checkpoint_interop",
    "alloc": "megatron.core.models.hybrid.hybrid_layer_allocation",
    "validation": "megatron.core.dist_checkpointing.validation",
    "ssm_utils": "megatron.core.ssm.utils",
    "gdp": "megatron.core.ssm.gated_delta_product",
    "gtp": "megatron.core.tensor_parallel.generalized_tensor_parallelism",
    "mlp": "megatron.core.transformer.mlp",
}


# Every message of a Megatron whose own code raised at import starts so (the harness's mutate tells such a mutant
# incompetent by it, docs/adapter-protocol.md).
DOES_NOT_IMPORT = "Megatron does not import"


def raised_by_megatron(exc):
    """Whether `exc`, raised while importing Megatron, is Megatron's own failure: raised in a frame of a megatron/
    package (a module of the tree raising at import), not an import of a module outside megatron (a dependency
    the environment lacks) nor in the adapter's own code."""
    if isinstance(exc, ImportError) and (exc.name or "megatron").split(".")[0] != "megatron":
        return False
    frames = traceback.extract_tb(exc.__traceback__)
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    return bool(frames) and os.sep + "megatron" + os.sep in frames[-1].filename \
        and not os.path.abspath(frames[-1].filename).startswith(here)


def where_raised(exc):
    """'file:line in function' of the frame that raised `exc`, the path from its megatron/ folder on."""
    frame = traceback.extract_tb(exc.__traceback__)[-1]
    path = frame.filename
    return f"{path[path.rfind(os.sep + 'megatron' + os.sep) + 1:]}:{frame.lineno} in {frame.name}"


def require_importable(M, modules, what):
    """OpError megatron_error when one of the namespace's `modules` raised while Megatron imported it."""
    from megatron_adapter.errors import OpError
    broken = sorted(set(modules) & set(M.broken_imports))
    if broken:
        raise OpError("megatron_error", f"{DOES_NOT_IMPORT}: {what} needs "
                                        + "; ".join(M.broken_imports[name] for name in broken))


def world_start_error(M, exc, what):
    """The OpError of a world that did not start: Megatron's failure where some of its modules raised at import
    (every world worker imports them, its patches check them), else the harness's own."""
    from megatron_adapter.errors import OpError
    broken = getattr(M, "broken_imports", {})  # a pool without a namespace imported nothing itself
    if broken:
        return OpError("megatron_error", f"{DOES_NOT_IMPORT}: {what}: " + "; ".join(broken.values()))
    return OpError("harness_error", f"{what}: {exc}")


def load_megatron(megatron_path):
    """Imports Megatron; returns a namespace of modules and helpers, or raises ImportError.
    Optional modules that fail to import are recorded in import_errors (their ops answer
    "unsupported"), and in broken_imports where Megatron's own code raised (their ops fail)."""
    if megatron_path:
        _put_first_on_path(megatron_path)
    import torch

    M = types.SimpleNamespace(torch=torch, import_errors={}, broken_imports={})
    import megatron.core  # noqa: F401 - the fatal one
    M.megatron_version = _megatron_version()
    M.megatron_path = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(megatron.core.__file__))))
    if megatron_path and os.path.realpath(M.megatron_path) != os.path.realpath(megatron_path):
        raise ImportError(f"megatron.core was imported from {M.megatron_path}, not from --megatron-path "
                          f"{megatron_path} (an earlier import shadows it)")
    M.megatron_revision = _megatron_revision(M.megatron_path)
    _mapping(M)
    _optional_modules(M)
    M.candidate = {}  # the candidate's install report (Server.__init__), {} without --candidate
    M.call_split_factory, M.swiglu_factory, M.find_gtp_split_factory = _calls(M)
    return M


def modules_outside(megatron_path):
    """The modules that load_megatron(megatron_path) loads from outside Megatron (torch's, numpy's, ...), in the
    order they were loaded: what a warm process may import before any tree's Megatron (fork_server.py)."""
    before = set(sys.modules)
    M = load_megatron(megatron_path)
    root = os.path.join(os.path.realpath(M.megatron_path), "")
    return [name for name, module in list(sys.modules.items())
            if name not in before and name != "megatron" and not name.startswith("megatron.")
            and not os.path.realpath(getattr(module, "__file__", None) or "/").startswith(root)]


def _put_first_on_path(megatron_path):
    """A Megatron-LM checkout first on sys.path (before the installed megatron-core)."""
    root = os.path.abspath(megatron_path)
    if not os.path.isfile(os.path.join(root, "megatron", "core", "__init__.py")):
        raise ImportError(f"--megatron-path {megatron_path}: no megatron/core/__init__.py there "
                          "(give the root of a Megatron-LM checkout)")
    sys.path.insert(0, root)
    if not os.path.exists(os.path.join(root, ".git")):
        # Megatron's package_info appends `git rev-parse` of whatever repository encloses it: for
        # a snapshot extracted under this project's build/ that is the harness's own commit.
        os.environ.setdefault("NO_VCS_VERSION", "1")


def _mapping(M):
    from megatron.core.dist_checkpointing import core, dict_utils, mapping
    M.mapping, M.dict_utils = mapping, dict_utils
    M.ShardedTensor, M.ShardedObject = mapping.ShardedTensor, mapping.ShardedObject
    M.ShardedBase, M.ShardedTensorFactory = mapping.ShardedBase, mapping.ShardedTensorFactory
    M.LocalNonpersistentObject = mapping.LocalNonpersistentObject
    M.CheckpointingException = core.CheckpointingException
    M.nested_values = dict_utils.nested_values


def _optional_modules(M):
    import importlib
    for name, module in OPTIONAL.items():
        try:
            setattr(M, name, importlib.import_module(module))
        except Exception as exc:  # noqa: BLE001 - a missing optional module means "unsupported"
            setattr(M, name, None)
            M.import_errors[name] = f"cannot import {module}: {type(exc).__name__}: {exc}"
            if raised_by_megatron(exc):
                M.broken_imports[name] = f"{M.import_errors[name]} (at {where_raised(exc)})"
            log(M.import_errors[name])


def _calls(M):
    """The calls the ops make through the namespace: the split factory and the SwiGLU factory with what they
    raise typed (error_kinds), and the shard-split factory: the checkout's own, else the candidate's."""
    from megatron_adapter.error_kinds import classify

    def call_split_factory(fn, orig, sections, names, dim):
        try:
            return fn(orig, sections, names, dim)
        except Exception as exc:  # noqa: BLE001
            raise classify(exc, {AssertionError: "split_assertion", TypeError: "split_type_error"})

    def swiglu_factory(orig, offsets):
        if M.mlp is None or not hasattr(M.mlp, "apply_swiglu_sharded_factory"):
            from megatron_adapter.errors import Unsupported
            raise Unsupported("apply_swiglu_sharded_factory is not available: "
                              + M.import_errors.get("mlp", "missing"))
        try:
            return M.mlp.apply_swiglu_sharded_factory(orig, offsets)
        except Exception as exc:  # noqa: BLE001
            raise classify(exc, {AssertionError: "swiglu_assertion"})

    def find_gtp_split_factory():
        """The checkout's own shard-split factory, else the candidate's when it is applied."""
        import candidates
        own = candidates.find_real_gtp_split_factory(M)
        if own is not None or not M.candidate.get("applied"):
            return own
        import functools
        from candidates import shard_split
        return functools.partial(shard_split.gtp_split_tensor_factory, M)

    return call_split_factory, swiglu_factory, find_gtp_split_factory


def _megatron_revision(root):
    """The checkout's git revision, else a hex revision in its folder name (snapshots are named
    megatron-lm-<rev>), else None."""
    import re
    import subprocess
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    m = re.search(r"-([0-9a-f]{7,40})$", os.path.basename(os.path.normpath(root)))
    return m.group(1) if m else None


def _megatron_version():
    try:
        from megatron.core import package_info
        return package_info.__version__
    except Exception:  # noqa: BLE001
        import megatron.core
        return getattr(megatron.core, "__version__", "unknown")

