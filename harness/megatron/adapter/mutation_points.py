"""Mutants of Megatron's Python source for `interop-harness mutate`, made with cosmic-ray's operators.

cosmic-ray is used as a library: its operators find the mutation positions of a parso tree and
`mutate_code` applies one (operator, occurrence); its own runner and database are not used. The
harness decides which lines may be mutated (lines the gate executes) and runs each mutant itself.

Input (the JSON file named by the one argument): {"root": TREE, "lines": {"<file relative to TREE>": [line, ...]}, "max_mutants": N,
"seed": S, "out": DIR, optional "run_lines": {"<file>": [every line the gate ran, ...]} (a change's lines are fewer)}. Each chosen mutant's whole mutated file is written to DIR/<index>.py.
Output (stdout): {"candidates": <positions on the given lines>, "mutants": [{"file", "line", "function",
"judged_by_lines", "operator", "occurrence", "diff", "diff_sha256", "source"}]}; a file that does not parse is {"error": ...}, exit 2.
"""

import difflib
import hashlib
import json
import os
import random
import sys

from cosmic_ray import plugins
from cosmic_ray.ast import ast_nodes, get_ast
from cosmic_ray.mutating import mutate_code


def operators():
    """cosmic-ray's operators that take no arguments (the variable operators need a name to insert)."""
    out = []
    for name in plugins.operator_names():
        cls = plugins.get_operator(name)
        if not cls.arguments():
            out.append((name, cls()))
    return out


def positions(tree, allowed_lines, ops, run_lines=None):
    """(line, operator name, operator, occurrence) for every position on `allowed_lines`; the occurrence
    counts positions in the pre-order walk that cosmic-ray's MutationVisitor applies them in. `run_lines`: every
    line the gate ran in the file (default: the allowed ones), which tells whose function bodies ran."""
    nodes = list(ast_nodes(tree))
    run = set(allowed_lines if run_lines is None else run_lines)
    allowed_lines = set(allowed_lines) - headers_of_functions_never_run(nodes, run)
    found = []
    for name, op in ops:
        occurrence = 0
        for node in nodes:
            for (start, _end) in op.mutation_positions(node):
                if start[0] in allowed_lines:
                    found.append((start[0], name, op, occurrence))
                occurrence += 1
    return found


def headers_of_functions_never_run(nodes, run_lines):
    """The decorator and `def` lines of functions no line of whose body ran: they run at import, under
    every check, but a mutant there (a decorator removed, a default changed) only shows when the function
    is called, which no check does."""
    out = set()
    for node in nodes:
        if node.type != "funcdef":
            continue
        body = node.children[-1]  # a suite starts on the `def` line (its newline): the body is below it
        if body.type != "suite" or any(line in run_lines for line in range(body.start_pos[0] + 1, body.end_pos[0] + 1)):
            continue
        out.update(range(definition_start(node), body.start_pos[0] + 1))
    return out


def definition_start(node):
    """The first line of a function's or class's definition: its first decorator's, else its own."""
    return node.parent.start_pos[0] if node.parent.type == "decorated" else node.start_pos[0]


def spread(found, max_mutants, seed):
    """At most `max_mutants` positions, drawn from `seed` one line at a time in rounds, so that lines
    with many operators (a binary operator has a dozen replacements) do not crowd the others out."""
    rng = random.Random(seed)
    by_line = {}
    for item in found:
        by_line.setdefault((item[0]), []).append(item)
    lines = sorted(by_line)
    rng.shuffle(lines)
    for line in lines:
        rng.shuffle(by_line[line])
    chosen = []
    while len(chosen) < max_mutants and any(by_line[line] for line in lines):
        for line in lines:
            if by_line[line] and len(chosen) < max_mutants:
                chosen.append(by_line[line].pop())
    return chosen


def last_line(node):
    """The last line a node's text is on (parso ends a suite at column 0 of the line after it)."""
    return node.end_pos[0] - (1 if node.end_pos[1] == 0 else 0)


def judged_by(nodes, line):
    """The lines whose checks judge a mutant on `line`. A function's header (its decorators, `def` line, defaults and
    annotations) runs at import, under whichever check imported the module first, but acts when the function is
    called: its body's lines; a class body's statement outside its functions (a dataclass field's default) acts
    when the class is used: the class's lines. Any other line: itself."""
    innermost = None
    for node in nodes:
        if node.type not in ("funcdef", "classdef"):
            continue
        start = definition_start(node)
        body = node.children[-1]
        in_header = start <= line <= body.start_pos[0]
        in_class_body = node.type == "classdef" and body.start_pos[0] < line <= last_line(body)
        if in_header or in_class_body:
            innermost = (node, start, in_header)  # pre-order: the innermost definition comes last
        elif node.type == "funcdef" and body.start_pos[0] < line <= last_line(body):
            innermost = None  # inside a function's body: runs when called, as covered
    if innermost is None:
        return [line]
    node, start, in_header = innermost
    body = node.children[-1]
    first = body.start_pos[0] + 1 if in_header and node.type == "funcdef" else start
    return list(range(first, last_line(body) + 1)) or [line]  # a one-line `def f(): ...` is its own body


def function_at(tree, line):
    """The qualified name of the function or class holding `line` ("<module>" at top level)."""
    names = []
    for node in ast_nodes(tree):
        if node.type in ("funcdef", "classdef") and node.start_pos[0] <= line <= node.end_pos[0]:
            names.append(node.name.value)  # pre-order: outer definitions come first
    return ".".join(names) or "<module>"


def unified_diff(before, after, relative):
    return "".join(difflib.unified_diff(before.splitlines(keepends=True), after.splitlines(keepends=True),
                                        fromfile="a/" + relative, tofile="b/" + relative, n=1))


def main():
    with open(sys.argv[1], encoding="utf-8") as handle:
        request = json.load(handle)
    ops = operators()
    per_file, trees, nodes = [], {}, {}
    for relative, lines in sorted(request["lines"].items()):
        with open(os.path.join(request["root"], relative), encoding="utf-8") as handle:
            source = handle.read()
        try:
            trees[relative] = get_ast(source)
            nodes[relative] = list(ast_nodes(trees[relative]))
            found = positions(trees[relative], set(lines), ops, request.get("run_lines", {}).get(relative))
        except Exception as exc:  # noqa: BLE001 - parso's errors are not one type
            print(json.dumps({"error": f"{relative}: cannot parse: {type(exc).__name__}: {exc}"}))
            return 2
        per_file.extend((relative, source, item) for item in found)
    candidates = len(per_file)
    # One draw over every file's positions, keyed by (file, line) so the rounds spread across files too.
    keyed = [((relative, item[0]), item[1], item[2], item[3], relative, source)
             for relative, source, item in per_file]
    chosen = spread(keyed, request["max_mutants"], request["seed"])
    chosen.sort(key=lambda c: (c[0], c[1], c[3]))
    mutants = []
    for (relative, line), name, op, occurrence, _, source in chosen:
        mutated = mutate_code(source, op, occurrence)
        if mutated is None or mutated == source:
            continue
        path = os.path.join(request["out"], f"{len(mutants)}.py")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(mutated)
        diff = unified_diff(source, mutated, relative)
        mutants.append({"file": relative, "line": line, "function": function_at(trees[relative], line),
                        "judged_by_lines": judged_by(nodes[relative], line), "operator": name,
                        "occurrence": occurrence, "diff": diff,
                        "diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:16], "source": path})
    print(json.dumps({"candidates": candidates, "mutants": mutants}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
