"""mutation_points.py (mutate's cosmic-ray mutants) on a small source: only the given lines, every mutant a
real change whose diff names the file, functions attributed, and no mutant in the header of a function whose
body never ran. Needs cosmic-ray (the Megatron venv), not Megatron."""

import json
import subprocess
import sys

import pytest

pytest.importorskip("cosmic_ray")

import mutation_points  # noqa: E402

SOURCE = """\
class A:
    @classmethod
    def never(cls, x=1):
        return x + 1

    def ran(self, y):
        if y > 2 and y < 9:
            return y * 2
        return 0
"""


def test_headers_of_functions_whose_body_never_ran_are_left_out():
    nodes = list(mutation_points.ast_nodes(mutation_points.get_ast(SOURCE)))
    # Lines 1-3, 6 run at import; 7-9 ran (the body of `ran`); `never`'s body (4) did not.
    assert mutation_points.headers_of_functions_never_run(nodes, {1, 2, 3, 6, 7, 8}) == {2, 3}


def test_mutants_only_on_the_given_lines_each_a_real_change(tmp_path):
    (tmp_path / "m.py").write_text(SOURCE)
    out = tmp_path / "out"
    out.mkdir()
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"root": str(tmp_path), "lines": {"m.py": [2, 3, 7]}, "max_mutants": 50, "seed": 1,
                                   "out": str(out)}))
    reply = json.loads(subprocess.run([sys.executable, mutation_points.__file__, str(request)], check=True,
                                      capture_output=True, text=True).stdout)
    assert reply["mutants"], reply
    for m in reply["mutants"]:
        assert m["line"] == 7, m  # 2 and 3 are the header of `never`, whose body did not run
        assert m["function"] == "A.ran" and m["diff"].startswith("--- a/m.py\n+++ b/m.py\n"), m
        mutated = open(m["source"]).read()
        assert mutated != SOURCE and mutated.splitlines()[:6] == SOURCE.splitlines()[:6], m
    assert {m["operator"] for m in reply["mutants"]} >= {"core/ReplaceAndWithOr"}


DEFINITIONS = """\
import dataclasses


@dataclasses.dataclass
class Factory:
    replica_id: int = 0

    def build(self, key, scale=1):
        def inner(x=2):
            return x
        return key * scale

    def one_line(self): return 1
"""


def test_definitions_are_judged_by_the_lines_that_use_them():
    nodes = list(mutation_points.ast_nodes(mutation_points.get_ast(DEFINITIONS)))
    # A dataclass field's default acts when the class is used: the class's lines, its decorator's on.
    assert mutation_points.judged_by(nodes, 6) == list(range(4, 14))
    # A method's default (its `def` line) acts when it is called: its body's lines.
    assert mutation_points.judged_by(nodes, 8) == [9, 10, 11]
    # A nested function's default: the nested body; a body line: itself.
    assert mutation_points.judged_by(nodes, 9) == [10]
    assert mutation_points.judged_by(nodes, 11) == [11]
    # A one-line method is its own body; a module-level line is itself.
    assert mutation_points.judged_by(nodes, 13) == [13]
    assert mutation_points.judged_by(nodes, 1) == [1]


def test_a_changed_header_is_mutated_when_its_body_ran_though_unchanged():
    # A change's lines are fewer than the lines the gate ran: whose bodies ran is read off the latter.
    ops = mutation_points.operators()
    assert not mutation_points.positions(mutation_points.get_ast(SOURCE), {3}, ops)
    found = mutation_points.positions(mutation_points.get_ast(SOURCE), {3}, ops, run_lines={1, 2, 3, 4})
    assert found and {line for line, *_ in found} == {3}
