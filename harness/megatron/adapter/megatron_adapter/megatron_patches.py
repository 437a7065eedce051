"""The patches that let Megatron's GTP checkpoint code run on a CPU-only machine (docs/megatron-patches.md).

Only what needs a GPU is patched. GTP in Megatron is gated on Transformer Engine: gtp_api's
HAVE_GTP mirrors generalized_tensor_parallelism.HAVE_TE, and the mixers copy HAVE_GTP and
is_gtp_param into their own namespaces at import. Without TE (no GPU here) every GTP branch of
the checkpoint code is skipped although none of it uses TE or CUDA. Each patch is declared as
(name, module, attribute, value expected unpatched, replacement, the code it relies on). The code
is checked on the module's syntax tree, not its text (formatting never matters): the module still
binds the attribute at module level (to the declared expression, where one is declared) and the
function the patch is for still reads it. apply() refuses a patch whose module, attribute or
reading function is gone (an error, never a silent no-op), records a patch as "not needed" when
the attribute already has the patched value (a machine with TE), and records it "not applicable"
when the module has no code of the patch's family at all (an older checkout whose GDP mixer has
no GTP branch: Megatron's code runs as it is and its behaviour is the verdict).
"""

import ast
import importlib
import inspect

_ABSENT = object()


class PatchError(Exception):
    """A patch that no longer matches the checkout's code."""


def _gtp_is_gtp_param():
    return importlib.import_module("megatron.core.tensor_parallel.generalized_tensor_parallelism").is_gtp_param


class Relies:
    """The code a patch relies on: `binds` (an expression's source, or None for any binding,
    import included) bound to the attribute at module level; `reader` = (module or None for the
    patched module, function name) that reads the attribute; `family` the identifier fragment
    whose complete absence from the module means it has no such branch (not applicable)."""

    def __init__(self, binds, reader, family):
        self.binds, self.reader, self.family = binds, reader, family


_GDP_READER = (None, "sharded_state_dict")
_GTP = "gtp"

# (name, module, attribute, unpatched value, replacement (value or zero-arg callable), Relies)
PATCHES = (
    ("gtp_api.HAVE_GTP", "megatron.core.tensor_parallel.gtp_api", "HAVE_GTP", False, True,
     Relies("HAVE_TE", ("megatron.core.utils", "make_tp_sharded_tensor_for_checkpoint"), _GTP)),
    ("gated_delta_product.HAVE_GTP", "megatron.core.ssm.gated_delta_product", "HAVE_GTP", False, True,
     Relies(None, _GDP_READER, _GTP)),
    ("gated_delta_product.is_gtp_param", "megatron.core.ssm.gated_delta_product", "is_gtp_param", None,
     _gtp_is_gtp_param, Relies("None", _GDP_READER, _GTP)),
    ("mamba_mixer.HAVE_GTP", "megatron.core.ssm.mamba_mixer", "HAVE_GTP", False, True,
     Relies(None, _GDP_READER, _GTP)),
    ("mamba_mixer.is_gtp_param", "megatron.core.ssm.mamba_mixer", "is_gtp_param", None,
     _gtp_is_gtp_param, Relies("None", _GDP_READER, _GTP)),
    ("tensor_aware_state_dict.HAVE_NVRX", "megatron.core.dist_checkpointing.tensor_aware_state_dict", "HAVE_NVRX",
     False, True, Relies("False", (None, "from_state_dict"), "nvrx")),
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


# Patches whose module may be absent from (or fail to import in) an older checkout without making
# the GDP path unusable: Mamba's GTP branch came separately. Such a patch is recorded
# "not_applicable" (with the reason) and Megatron's code runs as it is.
OPTIONAL = {"mamba_mixer.HAVE_GTP", "mamba_mixer.is_gtp_param", "tensor_aware_state_dict.HAVE_NVRX"}


class NotApplicable(Exception):
    """The module has no code of the patch's family: nothing to enable, Megatron runs as it is."""


def _tree(name, module_name):
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001
        raise PatchError(f"patch {name}: cannot import {module_name}: {type(exc).__name__}: {exc}")
    try:
        return module, ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError) as exc:
        raise PatchError(f"patch {name}: cannot read the source of {module_name}: {exc}")


def _module_level(body):
    """The statements run at import (into if/try/with blocks, not into functions or classes)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for part in ("body", "orelse", "finalbody"):
                yield from _module_level(getattr(stmt, part, ()))
            for handler in getattr(stmt, "handlers", ()):
                yield from _module_level(handler.body)


def _bindings(tree, attr):
    """What the module binds to attr at module level: the value expressions (ast) and "import"."""
    out = []
    for stmt in _module_level(tree.body):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
            out.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr:
            out.append(stmt.value)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == attr for a in stmt.names):
            out.append("import")
    return out


def _reads(tree, function, attr):
    """True when a function named `function` (at any depth: a method too) reads attr (as a name or
    as an attribute of something)."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == function:
            for node in ast.walk(fn):
                if (isinstance(node, ast.Name) and node.id == attr and isinstance(node.ctx, ast.Load)) or \
                        (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.ctx, ast.Load)):
                    return True
    return False


def _mentions(tree, family):
    """True when any identifier of the module (name, attribute, import, function, argument) contains family."""
    family = family.lower()
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [a.asname or "" for a in node.names] + [getattr(node, "module", "") or ""]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names = [node.name]
        elif isinstance(node, ast.arg):
            names = [node.arg]
        if any(family in n.lower() for n in names):
            return True
    return False


def check(name, module_name, attr, unpatched, relies):
    """(module, needed) for one patch; NotApplicable when the module has no code of the patch's
    family at all; PatchError when it no longer matches the checkout."""
    module, tree = _tree(name, module_name)
    bound = _bindings(tree, attr)
    current = getattr(module, attr, _ABSENT)
    if not bound and current is _ABSENT:
        if not _mentions(tree, relies.family):
            raise NotApplicable(f"{module_name} has no {attr} and no {relies.family.upper()} code at all: no branch to "
                                f"enable, Megatron's code runs as it is")
        raise PatchError(f"patch {name}: {module_name}.{attr} does not exist in this Megatron although the module has "
                         f"{relies.family.upper()} code; re-read the code and update the patch")
    if current is _ABSENT:
        raise PatchError(f"patch {name}: {module_name}.{attr} does not exist in this Megatron")
    if relies.binds is not None:
        want = ast.dump(ast.parse(relies.binds, mode="eval").body)
        if not any(b != "import" and ast.dump(b) == want for b in bound):
            raise PatchError(f"patch {name}: {module_name} no longer binds {attr} = {relies.binds} at module level; "
                             f"re-read the code and update the patch")
    elif not bound:
        raise PatchError(f"patch {name}: {module_name} no longer binds {attr} at module level; re-read the code and "
                         f"update the patch")
    reader_module, function = relies.reader
    reader_tree = tree if reader_module is None else _tree(name, reader_module)[1]
    if not _reads(reader_tree, function, attr):
        raise PatchError(f"patch {name}: {reader_module or module_name}.{function} no longer reads {attr}; re-read the "
                         f"code and update the patch")
    if current is unpatched or current == unpatched:
        return module, True
    return module, False


def _check_or_optional(name, module_name, attr, unpatched, relies):
    """check(), with (None, reason) for a patch that is not applicable to this checkout."""
    try:
        return check(name, module_name, attr, unpatched, relies)
    except NotApplicable as exc:
        return None, str(exc)
    except PatchError as exc:
        try:
            importlib.import_module(module_name)
        except ModuleNotFoundError as missing:
            # The module itself is absent (a megatron-core without GDP): no code of the patch's family.
            if missing.name == module_name:
                return None, f"{module_name} is not in this Megatron"
            if name in OPTIONAL:
                return None, str(exc)
        except Exception:  # noqa: BLE001
            if name in OPTIONAL:
                return None, str(exc)
        raise


def apply():
    """Applies every patch; returns [{"name", "applied", "why"}]. Raises PatchError."""
    out = []
    # Check every patch before applying any: a module imported after gtp_api was patched would
    # copy the patched HAVE_GTP and look as if it needed nothing.
    checked = [_check_or_optional(name, module_name, attr, unpatched, relies)
               for name, module_name, attr, unpatched, _, relies in PATCHES]
    for (name, module_name, attr, unpatched, replacement, _), (module, needed) in zip(PATCHES, checked):
        if module is None:  # not applicable to this checkout (recorded with the reason)
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
    """[{"name", "needed", "why"}] without applying anything ("not_applicable" with the reason, and
    needed false, for a patch this checkout has no code for); PatchError when one no longer matches."""
    out = []
    for name, module_name, attr, unpatched_value, _, relies in PATCHES:
        module, needed = _check_or_optional(name, module_name, attr, unpatched_value, relies)
        row = {"name": name, "needed": needed if module is not None else False, "why": WHY[name]}
        if module is None:
            row["not_applicable"] = needed
        out.append(row)
    return out


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
