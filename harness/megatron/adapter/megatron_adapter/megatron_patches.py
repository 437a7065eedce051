"""The patches that let Megatron's GTP checkpoint code run on a CPU-only machine (docs/megatron-patches.md).

Only what needs a GPU is patched. GTP in Megatron is gated on Transformer Engine: gtp_api's
HAVE_GTP mirrors generalized_tensor_parallelism.HAVE_TE, and the mixers copy HAVE_GTP and
is_gtp_param into their own namespaces at import. Without TE (no GPU here) every GTP branch of
the checkpoint code is skipped although none of it uses TE or CUDA. Each patch is declared as
(name, module, attribute, value expected unpatched, replacement, source snippet that must still
be in the module's code). apply() refuses a patch whose module, attribute or snippet is gone
(an error, never a silent no-op) and records a patch as "not needed" when the attribute already
has the patched value (a machine with TE).
"""

import importlib
import inspect

_ABSENT = object()


class PatchError(Exception):
    """A patch that no longer matches the checkout's code."""


def _gtp_is_gtp_param():
    return importlib.import_module("megatron.core.tensor_parallel.generalized_tensor_parallelism").is_gtp_param


# (name, module, attribute, unpatched value, replacement (value or zero-arg callable), snippet)
PATCHES = (
    ("gtp_api.HAVE_GTP", "megatron.core.tensor_parallel.gtp_api", "HAVE_GTP", False, True,
     "HAVE_GTP = HAVE_TE"),
    ("gated_delta_product.HAVE_GTP", "megatron.core.ssm.gated_delta_product", "HAVE_GTP", False, True,
     "HAVE_GTP and is_gtp_param(self.in_proj.weight)"),
    ("gated_delta_product.is_gtp_param", "megatron.core.ssm.gated_delta_product", "is_gtp_param", None,
     _gtp_is_gtp_param, "is_gtp_param = None"),
    ("mamba_mixer.HAVE_GTP", "megatron.core.ssm.mamba_mixer", "HAVE_GTP", False, True,
     "HAVE_GTP and is_gtp_param(self.in_proj.weight)"),
    ("mamba_mixer.is_gtp_param", "megatron.core.ssm.mamba_mixer", "is_gtp_param", None,
     _gtp_is_gtp_param, "is_gtp_param = None"),
    ("tensor_aware_state_dict.HAVE_NVRX", "megatron.core.dist_checkpointing.tensor_aware_state_dict", "HAVE_NVRX",
     False, True, "if not HAVE_NVRX:"),
)

# Why each patch exists (docs/megatron-patches.md repeats these).
WHY = {
    "gtp_api.HAVE_GTP": "HAVE_GTP is False without Transformer Engine; make_tp_sharded_tensor_for_checkpoint and "
                        "make_sharded_tensors_for_checkpoint read it at call time to enter their GTP branch",
    "gated_delta_product.HAVE_GTP": "the GDP mixer copied HAVE_GTP at import; its in_proj gather/merge branch needs it",
    "gated_delta_product.is_gtp_param": "bound to None at import when HAVE_GTP is False",
    "mamba_mixer.HAVE_GTP": "the Mamba mixer copied HAVE_GTP at import; its in_proj gather/merge branch needs it",
    "mamba_mixer.is_gtp_param": "bound to None at import when HAVE_GTP is False",
    "tensor_aware_state_dict.HAVE_NVRX": "MCoreTensorAwareStateDict.from_state_dict refuses to run without the "
                                         "nvidia_resiliency_ext package, whose base class the in-memory "
                                         "from_state_dict/to_state_dict path never uses; the only wheel that installs "
                                         "here (0.4.1) breaks `import megatron.core` of a checkout that asks for >= 0.6",
}


# Patches whose target may be absent from an older checkout without making the GDP path unusable:
# Mamba's GTP branch came separately. Absent, the patch is recorded "not_applicable" (with the
# reason) and Megatron's Mamba code runs as it is; present but changed is still an error.
OPTIONAL = {"mamba_mixer.HAVE_GTP", "mamba_mixer.is_gtp_param", "tensor_aware_state_dict.HAVE_NVRX"}


def _check_or_optional(name, module_name, attr, unpatched, snippet):
    try:
        return check(name, module_name, attr, unpatched, snippet)
    except PatchError as exc:
        if name in OPTIONAL:
            try:
                module = importlib.import_module(module_name)
            except Exception:  # noqa: BLE001
                return None, str(exc)
            if getattr(module, attr, _ABSENT) is _ABSENT:
                return None, str(exc)
        raise


def check(name, module_name, attr, unpatched, snippet):
    """(module, needed) for one patch, or PatchError when it no longer matches the checkout."""
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001
        raise PatchError(f"patch {name}: cannot import {module_name}: {type(exc).__name__}: {exc}")
    current = getattr(module, attr, _ABSENT)
    if current is _ABSENT:
        raise PatchError(f"patch {name}: {module_name}.{attr} does not exist in this Megatron")
    try:
        source = inspect.getsource(module)
    except (OSError, TypeError) as exc:
        raise PatchError(f"patch {name}: cannot read the source of {module_name}: {exc}")
    if snippet not in source:
        raise PatchError(f"patch {name}: {module_name} no longer contains {snippet!r}; re-read the code and "
                         f"update the patch")
    if current is unpatched or current == unpatched:
        return module, True
    return module, False


def apply():
    """Applies every patch; returns [{"name", "applied", "why"}]. Raises PatchError."""
    out = []
    # Check every patch before applying any: a module imported after gtp_api was patched would
    # copy the patched HAVE_GTP and look as if it needed nothing.
    checked = [_check_or_optional(name, module_name, attr, unpatched, snippet)
               for name, module_name, attr, unpatched, _, snippet in PATCHES]
    for (name, module_name, attr, unpatched, replacement, snippet), (module, needed) in zip(PATCHES, checked):
        if module is None:  # an optional patch whose code is not in this checkout (recorded, see OPTIONAL)
            out.append({"name": name, "applied": False, "not_applicable": needed, "why": WHY[name]})
            continue
        if needed:
            value = replacement() if callable(replacement) else replacement
            ORIGINALS[name] = (module, attr, getattr(module, attr), value)
            setattr(module, attr, value)
        out.append({"name": name, "applied": needed, "why": WHY[name]})
    return out


ORIGINALS = {}  # name -> (module, attr, unpatched value, patched value) of the patches applied


class unpatched:
    """Context manager: the applied patches undone (to show each is still needed), then redone."""

    def __enter__(self):
        for module, attr, old, _ in ORIGINALS.values():
            setattr(module, attr, old)
        return self

    def __exit__(self, *exc):
        for module, attr, _, new in ORIGINALS.values():
            setattr(module, attr, new)
        return False


def report():
    """[{"name", "needed", "why"}] without applying anything; PatchError when one no longer matches."""
    return [{"name": name, "needed": check(name, module_name, attr, unpatched_value, snippet)[1], "why": WHY[name]}
            for name, module_name, attr, unpatched_value, _, snippet in PATCHES]


def available(M):
    """True when this Megatron has the GTP modules the patches target (else GTP ops are unsupported)."""
    return all(getattr(M, mod, None) is not None for mod in ("gtp", "gdp"))


# ---- declared optional fixes (--fix NAME): never applied by default ------------------------------
# Each changes Megatron's behaviour the way a proposed fix would, so the gate can show that the fix
# makes a finding's check pass (the finding's pin then reports STALE). Same rules as PATCHES: the
# code the fix is about must still be there (snippet), or applying it is an error.

TASD = "megatron.core.dist_checkpointing.tensor_aware_state_dict"


def _fix_to_state_dict_order(module):
    """MCoreTensorAwareStateDict.to_state_dict with its factory merges applied to the complete tree
    (loaded shards merged with the common and nonpersistent parts first), the order serialization.load
    uses (the review's proposal, spec 3.8). Megatron's merge and apply_factory_merges do the work; only
    when the merges run changes."""
    cls = module.MCoreTensorAwareStateDict
    original = cls.to_state_dict
    real_merges = module.apply_factory_merges

    def to_state_dict(self, *args, **kwargs):
        held = []

        def defer(loaded, factories):
            held.append(factories)
            return loaded
        module.apply_factory_merges = defer
        try:
            out = original(self, *args, **kwargs)
        finally:
            module.apply_factory_merges = real_merges
        tree = out[0] if isinstance(out, tuple) else out
        for factories in held:
            tree = real_merges(tree, factories)
        return (tree,) + tuple(out[1:]) if isinstance(out, tuple) else tree
    cls.to_state_dict = to_state_dict


FIXES = {
    "to_state_dict_order": (TASD, "apply_factory_merges(sharded_part, sh_ten_factories)", _fix_to_state_dict_order,
                            "MCoreTensorAwareStateDict.to_state_dict applies the factory merges after merging the "
                            "loaded shards into the common and nonpersistent tree, as serialization.load does "
                            "(finding C's proposed fix)"),
}


def apply_fixes(names):
    """Applies the named fixes; returns [{"name", "what"}]. PatchError for an unknown name or a fix
    whose code is no longer in the checkout."""
    out = []
    for name in names:
        if name not in FIXES:
            raise PatchError(f"no fix {name!r} (known: {', '.join(sorted(FIXES))})")
        module_name, snippet, fix, what = FIXES[name]
        module = importlib.import_module(module_name)
        if snippet not in inspect.getsource(module):
            raise PatchError(f"fix {name}: {module_name} no longer contains {snippet!r}; the fix does not apply")
        fix(module)
        out.append({"name": name, "what": what})
    return out
