"""What one row of the patch table is (patches/table.py): a declared patch of Megatron's, torch's or the process's
state, with the check that it still fits the code it is about, when it is needed, and how it is put in place and
undone (docs/megatron-patches.md)."""

import importlib

from megatron_adapter.patches.checks import NotApplicable

ABSENT = object()  # an attribute or item that was not there before the patch (removed again after)


class Target:
    """"module:attr.path" (an attribute of a module or of something it holds) or "module:attr[KEY]" (an item
    of a mapping the module holds, e.g. "os:environ[RANK]")."""

    def __init__(self, text):
        self.text = text
        module, _, path = text.partition(":")
        self.module = module
        self.item = None
        if path.endswith("]") and "[" in path:
            path, _, key = path[:-1].partition("[")
            self.item = key
        self.path = path.split(".")

    def _holder(self):
        holder = importlib.import_module(self.module)
        parts = self.path if self.item is not None else self.path[:-1]
        for part in parts:
            holder = getattr(holder, part)
        return holder, (self.item if self.item is not None else self.path[-1])

    def read(self):
        """(current value or ABSENT, whether the holder itself holds it: a class attribute it inherits is not)."""
        holder, key = self._holder()
        if self.item is not None:
            return holder.get(key, ABSENT), True
        try:
            own = key in vars(holder)
        except TypeError:
            own = True
        return getattr(holder, key, ABSENT), own

    def write(self, value):
        holder, key = self._holder()
        if self.item is not None:
            holder[key] = value
        else:
            setattr(holder, key, value)

    def restore(self, saved):
        """Back to what read() saw: the value, or no attribute (item) of the holder's own."""
        value, own = saved
        holder, key = self._holder()
        if self.item is not None:
            if value is ABSENT:
                holder.pop(key, None)
            else:
                holder[key] = value
        elif value is ABSENT or not own:
            if key in vars(holder):
                delattr(holder, key)
        else:
            setattr(holder, key, value)

    def __str__(self):
        return self.text


class Need:
    """When a patch is needed: a predicate of the targets' current values, with the words the docs print."""

    def __init__(self, test, text):
        self.test, self.text = test, text

    def __call__(self, current):
        return bool(self.test(current))


def _no_cuda(current):
    import torch
    return not torch.cuda.is_available()


no_cuda = Need(_no_cuda, "without CUDA")  # what the patched code needs a GPU for
always = Need(lambda current: True, "always")


def value_is(unpatched):
    """Needed while the (one) target still holds its unpatched value (a machine with TE has the patched one)."""
    return Need(lambda current: current[0] is unpatched or current[0] == unpatched, f"while it is {unpatched}")


def flag_false(module, attr):
    """Needed while the module's flag is False (the dependency it guards is absent); not where it is absent."""
    return Need(lambda current: not getattr(importlib.import_module(module), attr, True),
                f"while `{module.rpartition('.')[2]}.{attr}` is False")


def compares_with(module, function, literal, what):
    """Needed while `function` of the module still compares with `literal` (the branch a finding is about)."""
    from megatron_adapter.patches.checks import compares_with as compares, tree_of
    return Need(lambda current: compares(tree_of(f"{module}.{function}", module), function, literal), what)


def target_is_none(index, what):
    return Need(lambda current: current[index] is None, f"while {what} is None")


def both(first, second):
    return Need(lambda current: first(current) and second(current), f"{first.text}, {second.text}")


def to(*values):
    """make(): the targets take these values, whatever they held."""
    return lambda current, params: values


def wrapping(factory):
    """make(): the one target takes factory(its current value)."""
    return lambda current, params: (factory(current[0]),)


class Patch:
    """One declared patch: `targets` take make(current values, params) while it is in force (needed(current
    values) says whether this machine needs it) and their own values back after."""

    def __init__(self, name, family, targets, why, fits, make, needed=no_cuda, summary=None):
        self.name, self.family, self.targets = name, family, tuple(Target(t) for t in targets)
        self.why, self.fits, self.make, self.needed = why, fits, make, needed
        self.summary = summary or ", ".join(map(str, self.targets)) + " patched"

    def status(self):
        """(None, whether it is needed here), or (the reason it is not applicable, False); PatchError when the
        code it is about has changed."""
        try:
            self.fits.check(self.name)
        except NotApplicable as exc:
            return str(exc), False
        return None, self.needed(tuple(t.read()[0] for t in self.targets))

    def install(self, params):
        """Puts the patch in place; returns what undoes it."""
        saved = [t.read() for t in self.targets]
        values = self.make(tuple(s[0] for s in saved), params)
        for target, value in zip(self.targets, values):
            target.write(value)

        def undo():
            for target, before in reversed(list(zip(self.targets, saved))):
                target.restore(before)
        return undo


class SetUp:
    """A declared change of Megatron's state made through Megatron's own functions (its global args):
    enter(params) makes it, leave() takes it back."""

    def __init__(self, name, family, target, why, fits, enter, leave, summary=None):
        self.name, self.family, self.targets = name, family, (target,)
        self.why, self.fits, self.enter, self.leave = why, fits, enter, leave
        self.summary = summary or target
        self.needed = always

    def status(self):
        self.fits.check(self.name)
        return None, True

    def install(self, params):
        self.enter(params)
        return self.leave
