"""The checks that a patch still fits the code it is about (docs/megatron-patches.md). Each check is run before
its patch is applied or reported; a check that no longer holds raises PatchError (the harness must be updated:
a harness error, never a finding), and one whose module has no code of the patch's family at all raises
NotApplicable (nothing to enable: Megatron's code runs as it is).

Code is read on its syntax tree where the patch is about a name (`Binds`, `Reads`, `FlagOfFamily`: formatting
never matters) and as text where it is about a statement (`Snippet`)."""

import ast
import importlib
import inspect


class PatchError(Exception):
    """A patch that no longer matches the checkout's code."""


class NotApplicable(Exception):
    """The module has no code of the patch's family: nothing to enable, Megatron runs as it is."""


def import_module(name, module_name):
    try:
        return importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure is the patch's error
        raise PatchError(f"patch {name}: cannot import {module_name}: {type(exc).__name__}: {exc}")


def source_of(name, module_name):
    module = import_module(name, module_name)
    try:
        return inspect.getsource(module)
    except (OSError, TypeError) as exc:
        raise PatchError(f"patch {name}: cannot read the source of {module_name}: {exc}")


def tree_of(name, module_name):
    try:
        return ast.parse(source_of(name, module_name))
    except SyntaxError as exc:
        raise PatchError(f"patch {name}: cannot read the source of {module_name}: {exc}")


def module_level(body):
    """The statements run at import (into if/try/with blocks, not into functions or classes)."""
    for stmt in body:
        yield stmt
        if isinstance(stmt, (ast.If, ast.Try, ast.With)) or type(stmt).__name__ == "TryStar":
            for part in ("body", "orelse", "finalbody"):
                yield from module_level(getattr(stmt, part, ()))
            for handler in getattr(stmt, "handlers", ()):
                yield from module_level(handler.body)


def bindings(tree, attr):
    """What the module binds to attr at module level: the value expressions (ast) and "import"."""
    out = []
    for stmt in module_level(tree.body):
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == attr for t in stmt.targets):
            out.append(stmt.value)
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == attr:
            out.append(stmt.value)
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)) and any((a.asname or a.name) == attr for a in stmt.names):
            out.append("import")
    return out


def reads(tree, function, attr):
    """True when a function named `function` (at any depth: a method too) reads attr (as a name or as an
    attribute of something)."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == function:
            for node in ast.walk(fn):
                if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load) and \
                        (node.id if isinstance(node, ast.Name) else node.attr) == attr:
                    return True
    return False


def compares_with(tree, function, literal):
    """True when a function named `function` (a method too) compares something with the constant `literal`
    (e.g. `if k == "step":`, the branch that skips a key)."""
    for fn in ast.walk(tree):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == function:
            for node in ast.walk(fn):
                if isinstance(node, ast.Compare) and any(isinstance(c, ast.Constant) and c.value == literal
                                                         for c in [node.left, *node.comparators]):
                    return True
    return False


def _identifiers(node):
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [a.name for a in node.names] + [a.asname or "" for a in node.names] + [getattr(node, "module", "") or ""]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    if isinstance(node, ast.arg):
        return [node.arg]
    return []


def mentions(tree, family):
    """True when any identifier of the module (name, attribute, import, function, argument) contains family."""
    family = family.lower()
    return any(family in n.lower() for node in ast.walk(tree) for n in _identifiers(node))


class Snippet:
    """The module still contains `text` (the statement the patch stands in for)."""

    def __init__(self, module, text):
        self.module, self.text = module, text

    def check(self, name):
        if self.text not in source_of(name, self.module):
            raise PatchError(f"patch {name}: {self.module} no longer contains {self.text!r}; re-read the code and "
                             "update the patch")

    def describe(self):
        return f"`{self.text}` in `{self.module}`"


class Reads:
    """`function` of the module (a method too) still reads `attr` (judged on the syntax tree)."""

    def __init__(self, module, function, attr):
        self.module, self.function, self.attr = module, function, attr

    def check(self, name):
        if not reads(tree_of(name, self.module), self.function, self.attr):
            raise PatchError(f"patch {name}: {self.module}.{self.function} no longer reads {self.attr}; re-read the "
                             "code and update the patch")

    def describe(self):
        return f"`{self.module}.{self.function}` reads `{self.attr}`"


class Exists:
    """The attribute the patch replaces still exists (a torch function the harness stands in for)."""

    def __init__(self, module, attr):
        self.module, self.attr = module, attr

    def check(self, name):
        holder = import_module(name, self.module)
        for part in self.attr.split("."):
            if not hasattr(holder, part):
                raise PatchError(f"patch {name}: {self.module}.{self.attr} does not exist here")
            holder = getattr(holder, part)

    def describe(self):
        return f"`{self.module}.{self.attr}` exists"


class All:
    """Every one of several checks."""

    def __init__(self, *checks):
        self.checks = checks

    def check(self, name):
        for c in self.checks:
            c.check(name)

    def describe(self):
        return "; ".join(c.describe() for c in self.checks)


class FlagOfFamily:
    """A module-level flag of Megatron that a function reads at call time (the GTP availability flags): the
    module binds `attr` at module level (to the expression `binds`, or to anything with None) and
    `reader` = (module or None for the patched module, function) reads it. A module with no identifier of
    `family` at all has no such branch (NotApplicable); so has a module that is not in the Megatron at all,
    and, when `optional`, one that cannot import."""

    def __init__(self, module, attr, binds, reader, family, optional=False):
        self.module, self.attr, self.binds, self.reader = module, attr, binds, reader
        self.family, self.optional = family, optional

    def check(self, name):
        try:
            self._check(name)
        except PatchError as exc:
            try:
                importlib.import_module(self.module)
            except ModuleNotFoundError as missing:
                if missing.name == self.module:  # a megatron-core without the module: no code of the family
                    raise NotApplicable(f"{self.module} is not in this Megatron")
                if self.optional:
                    raise NotApplicable(str(exc))
            except Exception:  # noqa: BLE001 - the module is there but cannot import
                if self.optional:
                    raise NotApplicable(str(exc))
            raise

    def _check(self, name):
        module, tree = import_module(name, self.module), tree_of(name, self.module)
        bound = bindings(tree, self.attr)
        if not bound and not hasattr(module, self.attr):
            if not mentions(tree, self.family):
                raise NotApplicable(f"{self.module} has no {self.attr} and no {self.family.upper()} code at all: no "
                                    "branch to enable, Megatron's code runs as it is")
            raise PatchError(f"patch {name}: {self.module}.{self.attr} does not exist in this Megatron although the "
                             f"module has {self.family.upper()} code; re-read the code and update the patch")
        if not hasattr(module, self.attr):
            raise PatchError(f"patch {name}: {self.module}.{self.attr} does not exist in this Megatron")
        if self.binds is not None:
            want = ast.dump(ast.parse(self.binds, mode="eval").body)
            if not any(b != "import" and ast.dump(b) == want for b in bound):
                raise PatchError(f"patch {name}: {self.module} no longer binds {self.attr} = {self.binds} at module "
                                 "level; re-read the code and update the patch")
        elif not bound:
            raise PatchError(f"patch {name}: {self.module} no longer binds {self.attr} at module level; re-read the "
                             "code and update the patch")
        reader_module, function = self.reader
        if not reads(tree if reader_module is None else tree_of(name, reader_module), function, self.attr):
            raise PatchError(f"patch {name}: {reader_module or self.module}.{function} no longer reads {self.attr}; "
                             "re-read the code and update the patch")

    def describe(self):
        binds = f"bound `= {self.binds}`" if self.binds is not None else "bound"
        reader_module, function = self.reader
        return f"{binds} at module level; read in `{(reader_module + '.') if reader_module else ''}{function}`"
