"""How a mutant's patch is planted (mutants/table.py): "module:name" sets the module's own attribute, so every
caller that looks it up through the module sees it; a path through a class ("module:Class.method") sets the class
attribute itself; a path through a module-level name other code shares ("module:torch.nn.functional.pad" as the
GDP mixer sees it) is rebound only in that module, by a proxy, so the rest of Megatron and torch stay untouched.
A target that no longer exists raises (the mutant would silently be a no-op)."""

import importlib
import types


class _Proxy(types.ModuleType):
    """A module stand-in: one attribute replaced, everything else from the wrapped object."""

    def __init__(self, wrapped, name, value):
        super().__init__(getattr(wrapped, "__name__", "proxy"))
        object.__setattr__(self, "_wrapped", wrapped)
        object.__setattr__(self, "_name", name)
        object.__setattr__(self, "_value", value)

    def __getattr__(self, attr):
        if attr == object.__getattribute__(self, "_name"):
            return object.__getattribute__(self, "_value")
        return getattr(object.__getattribute__(self, "_wrapped"), attr)


def resolve(target):
    """(module, attribute path, the objects along it) of module:attr.path; ImportError or
    AttributeError naming what is missing."""
    module_name, _, path = target.partition(":")
    module = importlib.import_module(module_name)
    parts = path.split(".")
    chain = [module]
    for part in parts:
        if not hasattr(chain[-1], part):
            raise AttributeError(f"mutant target {target}: {part} not found")
        chain.append(getattr(chain[-1], part))
    return module, parts, chain[:-1]


def install(target, make):
    module, parts, chain = resolve(target)
    value = make(getattr(chain[-1], parts[-1]))
    if len(chain) > 1 and isinstance(chain[-1], type):
        setattr(chain[-1], parts[-1], value)  # a class attribute: set on the class itself
        return
    # rebind from the innermost attribute outwards; only the module's own name is changed
    for holder, part in zip(reversed(chain[1:]), reversed(parts[:-1])):
        value = _Proxy(holder, parts[parts.index(part) + 1], value)
    setattr(module, parts[0] if len(parts) > 1 else parts[-1], value)
