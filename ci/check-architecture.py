#!/usr/bin/env python3
"""Checks the project's #include lines against the house plan in docs/architecture.md, and the
Python adapter's imports for a circle.

Each room may include only the rooms listed for it (and itself). A room is a top-level folder, or a
folder under harness/. Prints every upward or sideways include with file and line; exits 1 if any.
The adapter's modules (harness/megatron/adapter/) must import each other along a DAG: every import
counts, at module level or inside a function; a circle is printed module by module and exits 1.
"""
import ast
import os
import re
import sys

# room -> rooms it may include. The same table is drawn in docs/architecture.md.
ALLOWED = {
    "models": set(),
    "seam": {"models"},
    "mutants": {"seam", "models"},
    # codec and process name the seam's error kinds (unsupported, timeout, harness_error) and nothing else of it;
    # the codec also reads Megatron's replies into the scenario operations' typed answers (seam/scenarios).
    "codec": {"models", "seam/error_kinds", "seam/scenarios"},
    "properties": {"seam", "models"},
    # fuzz targets drive the invariants the properties state (one body each) and the CLI's parser.
    "fuzz": {"models", "seam", "codec", "properties/invariants", "harness/cli/args"},
    "bench": {"models", "seam"},
    "harness/install": set(),
    "harness/process": {"models", "seam/error_kinds"},
    # The Megatron client answers the seam; the gate's checks ask the seam, never the client: no megatron -> gate.
    # ... and names the gate check each request serves when coverage is on (harness/coverage/coverage_context).
    "harness/megatron": {"harness/process", "harness/install", "harness/coverage/coverage_context", "codec", "seam",
                         "models"},
    # Line coverage of a Megatron tree: the check running, coverage.py's report read, the checkpoint path and a
    # change's lines (coverage.py and git run through harness/process).
    "harness/coverage": {"harness/process", "codec", "seam", "models"},
    # targets starts what a command needs of a target: the Implementation, and the gate's real round trips (the
    # round-trip session, handed to the gate as its runner type).
    "harness/targets": {"harness/roundtrip", "harness/megatron", "harness/gate/real_roundtrip_runner",
                        "harness/coverage/coverage_context", "mutants", "codec", "seam", "models"},
    "harness/gate": {"properties", "codec", "seam", "models"},
    "harness/report": {"harness/gate", "properties", "codec", "seam", "models"},
    "harness/roundtrip": {"harness/megatron", "harness/process", "harness/install", "properties", "codec", "seam",
                          "models"},
    # mutate runs the gate as a child, never its checks in-process.
    "harness/mutate": {"harness/coverage", "harness/process", "harness/install", "harness/megatron", "codec", "seam",
                       "models"},
    "harness/cli": {"harness/mutate", "harness/gate", "harness/report", "harness/roundtrip", "harness/targets",
                    "harness/megatron", "harness/coverage",
                    "harness/process", "harness/install", "properties", "mutants", "codec", "seam", "models"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    parts = path.split("/")
    if parts[0] == "harness" and len(parts) > 2:
        return "harness/" + parts[1]
    return parts[0]


# Tests may reach one step sideways: the mutation test proves each planted mutant fails some property.
TEST_EXTRA = {"properties": {"mutants"}}


def allowed(source_room, include, is_test):
    target = room_of(include)
    rules = ALLOWED.get(source_room, set()) | (TEST_EXTRA.get(source_room, set()) if is_test else set())
    return target == source_room or target in rules or os.path.splitext(include)[0] in rules


ADAPTER = "harness/megatron/adapter"


def adapter_modules(base):
    """{dotted module name: path} of the adapter's Python files, as its entry scripts see them (base on
    sys.path): adapter.py is `adapter`, megatron_adapter/ops/gtp.py is `megatron_adapter.ops.gtp`, a
    package is its __init__.py."""
    modules = {}
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for name in filenames:
            if name.endswith(".py"):
                parts = os.path.relpath(os.path.join(dirpath, name), base)[:-3].split(os.sep)
                modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = os.path.join(dirpath, name)
    return modules


def adapter_imports(path, module, modules):
    """(line, imported module) for each import in the file of one of the adapter's own modules."""
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[:len(package.split(".")) - node.level + 1] if package else []
                base = ".".join(anchor + ([base] if base else []))
            names = [base + "." + alias.name if base + "." + alias.name in modules else base for alias in node.names]
        else:
            continue
        for name in names:
            if name.partition(".")[0] == "megatron_adapter" and name not in modules and (
                    isinstance(node, ast.Import) or name == base):
                yield node.lineno, "(missing) " + name
                continue
            while name and name not in modules:  # `import a.b.c` of a non-module attribute: its module
                name = name.rpartition(".")[0]
            if name and name != module:
                yield node.lineno, name


def python_import_cycles(root):
    """Problems: each circle among the adapter's imports, as `a -> b -> a` with file and line, and each
    import of a megatron_adapter module that does not exist (a stale name after a move)."""
    base = os.path.join(root, ADAPTER)
    modules = adapter_modules(base)
    edges = {m: sorted(set(adapter_imports(p, m, modules)), key=lambda e: e[1]) for m, p in sorted(modules.items())}
    state, stack, problems = {}, [], []

    def visit(m):
        state[m] = "open"
        stack.append(m)
        for line, n in edges[m]:
            if n.startswith("(missing) "):
                problems.append(f"{os.path.relpath(modules[m], root)}:{line}: imports {n[10:]}, no module of the adapter")
            elif state.get(n) == "open":
                circle = stack[stack.index(n):] + [n]
                where = os.path.relpath(modules[m], root)
                problems.append(f"{where}:{line}: import circle " + " -> ".join(circle))
            elif n not in state:
                visit(n)
        stack.pop()
        state[m] = "done"

    for m in sorted(modules):
        if m not in state:
            visit(m)
    return problems, len(modules)


def main(root):
    problems = []
    for folder in ALLOWED:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, root)
            if folder == "harness" or (rel_dir != folder and room_of(rel_dir + "/x") != folder):
                continue
            for name in sorted(filenames):
                if not name.endswith((".cc", ".h")):
                    continue
                rel = os.path.join(rel_dir, name)
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and "/" in m.group(1) and not allowed(folder, m.group(1), name.endswith("_test.cc")):
                            problems.append(f"{rel}:{number}: {folder} may not include {m.group(1)}")
    for p in problems:
        print(p)
    print(f"architecture: {len(problems)} forbidden include(s)")
    circles, checked = python_import_cycles(root)
    for p in circles:
        print(p)
    print(f"architecture: {len(circles)} import circle(s) or missing module(s) among {checked} adapter modules")
    return 1 if problems or circles else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
