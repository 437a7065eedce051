"""The patch registry (megatron_adapter/patches/) on stand-in modules, without Megatron: a row applies only while
the code it is about is still there (judged on the syntax tree where it is about a name, so formatting never
matters), is "not applicable" to a module with no code of its family, is checked with every other row before any
is applied, and is undone when its block ends, exactly (values, absent attributes, mapping items, class
attributes it shadowed)."""

import os
import sys
import types

import pytest

from megatron_adapter import patches
from megatron_adapter.patches import __main__ as doc
from megatron_adapter.patches import checks
from megatron_adapter.patches.checks import FlagOfFamily, NotApplicable, PatchError, Reads, Snippet
from megatron_adapter.patches.entries import Patch, Target, always, to, value_is, wrapping
from megatron_adapter.patches.table import FAMILIES, TABLE

SOURCE = """HAVE_TE = False
HAVE_GTP = HAVE_TE
is_gtp_param = None


class Mixer:
    def sharded_state_dict(self):
        if self.size > 1 and HAVE_GTP and is_gtp_param(self.weight):
            return 1
        return 0
"""

# The same code black-formatted over several lines (what an older checkout has).
REFORMATTED = """HAVE_TE = False
try:
    HAVE_GTP = (
        HAVE_TE
    )
except ImportError:
    HAVE_GTP = False
if HAVE_GTP:
    from elsewhere import is_gtp_param
else:
    is_gtp_param = None


class Mixer:
    def sharded_state_dict(self):
        uses_gtp = (
            self.size > 1
            and HAVE_GTP
            and is_gtp_param(self.weight)
        )
        return 1 if uses_gtp else 0
"""

# An older GDP mixer: no GTP flag, no GTP branch, no GTP code at all.
NO_GTP = """class Mixer:
    def sharded_state_dict(self):
        return 0
"""

MOD = "ih_fake_megatron_mod"
READER = (None, "sharded_state_dict")


def flag(attr="HAVE_GTP", binds="HAVE_TE", optional=False, module=MOD):
    return FlagOfFamily(module, attr, binds, READER, "gtp", optional=optional)


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A module ih_fake_megatron_mod written to disk (the checks read its source), imported fresh."""
    def make(source=SOURCE):
        (tmp_path / f"{MOD}.py").write_text(source)
        sys.modules.pop(MOD, None)
        return MOD
    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    sys.modules.pop(MOD, None)


def status(check, attr="HAVE_GTP", unpatched=False):
    return Patch("p", "gtp", (f"{MOD}:{attr}",), "why", check, to(True), needed=value_is(unpatched)).status()


# ---- the checks ------------------------------------------------------------------------------------------------

def test_needed_while_the_value_is_the_unpatched_one(fake):
    fake()
    assert status(flag()) == (None, True)
    sys.modules[MOD].HAVE_GTP = True
    assert status(flag()) == (None, False)


@pytest.mark.parametrize("attr,binds", [("HAVE_GTP", "HAVE_TE"), ("is_gtp_param", "None"), ("HAVE_GTP", None)])
def test_formatting_does_not_matter(fake, attr, binds):
    """The issue's case: the guarded code is there, black-formatted over several lines."""
    fake(REFORMATTED)
    flag(attr, binds).check("p")


@pytest.mark.parametrize("source,attr,binds,needle", [
    # the attribute is gone although the module still has GTP code (a renamed flag)
    (SOURCE.replace("HAVE_GTP", "HAVE_GTP2"), "HAVE_GTP", "HAVE_TE", "does not exist in this Megatron although"),
    # bound to something else than the patch relies on
    (SOURCE.replace("HAVE_GTP = HAVE_TE", "HAVE_GTP = HAVE_TE and HAVE_X"), "HAVE_GTP", "HAVE_TE", "no longer binds"),
    (SOURCE.replace("is_gtp_param = None", "is_gtp_param = len"), "is_gtp_param", "None", "no longer binds"),
    # bound only inside a function (not at import)
    (SOURCE.replace("HAVE_GTP = HAVE_TE\n", "def f():\n    HAVE_GTP = HAVE_TE\nHAVE_GTP = 0\n"), "HAVE_GTP", "HAVE_TE",
     "no longer binds"),
    # the function the patch is for no longer reads it (the guarded branch is gone)
    (SOURCE.replace("HAVE_GTP and ", ""), "HAVE_GTP", "HAVE_TE", "no longer reads HAVE_GTP"),
    # ... or is gone itself
    (SOURCE.replace("def sharded_state_dict", "def state_dict"), "is_gtp_param", "None", "no longer reads"),
    # read only outside the function the patch is for
    (SOURCE.replace("HAVE_GTP and ", "") + "\nprint(HAVE_GTP)\n", "HAVE_GTP", "HAVE_TE", "no longer reads"),
])
def test_changed_code_is_a_patch_error(fake, source, attr, binds, needle):
    fake(source)
    with pytest.raises(PatchError, match=needle):
        flag(attr, binds).check("p")


def test_a_module_that_does_not_import_is_a_patch_error(fake):
    fake("HAVE_GTP = (\n")
    with pytest.raises(PatchError, match=f"cannot import {MOD}: SyntaxError"):
        flag().check("p")


def test_a_module_with_no_code_of_the_family_is_not_applicable(fake):
    fake(NO_GTP)
    with pytest.raises(NotApplicable, match="has no HAVE_GTP and no GTP code at all"):
        flag().check("p")
    assert "no GTP code at all" in status(flag("is_gtp_param", "None"), "is_gtp_param", None)[0]
    # one GTP identifier anywhere (a helper named *_gtp_*) makes the missing flag an error again
    fake(NO_GTP + "\ndef _gtp_helper():\n    pass\n")
    with pytest.raises(PatchError, match="although the module has GTP code"):
        flag().check("p")


@pytest.mark.parametrize("optional", [True, False])
def test_a_patch_whose_module_is_absent_is_not_applicable(optional):
    # A megatron-core without the module (no GDP at all) has no code of the patch's family, optional or not.
    with pytest.raises(NotApplicable, match="ih_no_such_module is not in this Megatron"):
        flag(optional=optional, module="ih_no_such_module").check("p")


def test_a_module_whose_dependency_is_missing_is_an_error_unless_optional(fake):
    # The module is there but cannot import (a missing dependency): only an optional patch may skip it.
    fake("import ih_missing_dependency\nHAVE_GTP = False\n")
    with pytest.raises(NotApplicable, match="cannot import"):
        flag(optional=True).check("p")
    with pytest.raises(PatchError, match="cannot import"):
        flag().check("p")


def test_an_optional_patch_present_but_changed_stays_an_error(fake):
    fake(SOURCE.replace("HAVE_GTP and ", ""))
    with pytest.raises(PatchError):
        flag(optional=True).check("p")


def test_a_snippet_or_a_reader_that_is_gone_is_a_patch_error(fake):
    fake()
    Snippet(MOD, "is_gtp_param = None").check("p")
    Reads(MOD, "sharded_state_dict", "is_gtp_param").check("p")
    with pytest.raises(PatchError, match="no longer contains 'HAVE_GTP = 1'"):
        Snippet(MOD, "HAVE_GTP = 1").check("p")
    with pytest.raises(PatchError, match="no longer reads HAVE_TE"):
        Reads(MOD, "sharded_state_dict", "HAVE_TE").check("p")


# ---- applying and undoing --------------------------------------------------------------------------------------

def _holder():
    """A module the rows below patch: a flag, a function, a mapping, a class with an inherited method."""
    class Base:
        def hello(self):
            return "base"

    class Child(Base):
        pass
    module = types.ModuleType("ih_holder")
    module.FLAG, module.fn, module.env, module.Child = False, len, {"A": "1"}, Child
    sys.modules["ih_holder"] = module
    return module


@pytest.fixture
def holder():
    yield _holder()
    sys.modules.pop("ih_holder", None)


OK = Snippet("os", "def getenv")  # a check that holds (os is there, with its source)


def rows():
    return (
        Patch("flag", "f", ("ih_holder:FLAG",), "why flag", OK, to(True), needed=value_is(False)),
        Patch("fn", "f", ("ih_holder:fn",), "why fn", OK, wrapping(lambda original: lambda x: original(x) + 1),
              needed=always),
        Patch("env", "f", ("ih_holder:env[A]", "ih_holder:env[B]"), "why env", OK,
              lambda current, params: (params["a"], "2"), needed=always),
        Patch("method", "f", ("ih_holder:Child.hello", "ih_holder:absent"), "why method", OK,
              to(lambda self: "patched", 7), needed=always),
    )


def snapshot(module):
    child = module.Child
    return (module.FLAG, module.fn, dict(module.env), "hello" in vars(child), child().hello(), hasattr(module, "absent"))


def assert_restored(module, before):
    assert snapshot(module) == before, "a patch was not undone"


def test_a_block_patches_then_undoes_every_row(holder):
    before = snapshot(holder)
    with patches.applied("f", table=rows(), a="x") as applied:
        assert holder.FLAG is True and holder.fn("ab") == 3 and holder.env == {"A": "x", "B": "2"}
        assert holder.Child().hello() == "patched" and holder.absent == 7
        assert [r["applied"] for r in applied.rows] == [True] * 4
    assert_restored(holder, before)


def test_the_restoration_check_fails_when_a_patch_is_not_undone(holder, monkeypatch):
    """The test above can fail: with undo made a no-op, what it checks is left patched."""
    before = snapshot(holder)
    monkeypatch.setattr(Patch, "install", lambda self, params: (Target(self.targets[0].text).write(True)
                                                                if self.name == "flag" else None) or (lambda: None))
    with patches.applied("f", table=rows(), a="x"):
        pass
    with pytest.raises(AssertionError, match="not undone"):
        assert_restored(holder, before)


def test_a_block_that_raises_still_undoes(holder):
    before = snapshot(holder)
    with pytest.raises(RuntimeError):
        with patches.applied("f", table=rows(), a="x"):
            raise RuntimeError("inside")
    assert_restored(holder, before)


def test_nested_blocks_patching_one_attribute_give_it_back_as_they_found_it(holder):
    inner = (Patch("again", "g", ("ih_holder:fn",), "why", OK, wrapping(lambda original: lambda x: original(x) * 10),
                   needed=always),)
    with patches.applied("f", table=rows(), a="x"):
        with patches.applied("g", table=inner):
            assert holder.fn("ab") == 30
        assert holder.fn("ab") == 3
    assert holder.fn is len


def test_a_row_not_needed_is_recorded_and_left_alone(holder):
    holder.FLAG = True  # a machine that has what the patch stands in for
    with patches.applied("f", table=rows()[:1]) as applied:
        assert applied.rows == [{"name": "flag", "applied": False, "why": "why flag"}] and applied.summaries == []


def test_every_row_is_checked_before_any_is_applied(holder):
    broken = rows()[:1] + (Patch("gone", "f", ("ih_holder:fn",), "why", Snippet("os", "no such line"), to(1),
                                 needed=always),)
    with pytest.raises(PatchError, match="no longer contains"):
        with patches.applied("f", table=broken):
            pass
    assert holder.FLAG is False


def test_a_row_not_applicable_is_recorded_and_changes_nothing(fake, holder):
    fake(NO_GTP)
    table = (Patch("a", "gtp", (f"{MOD}:HAVE_GTP",), "why a", flag(), to(True), needed=value_is(False)),)
    with patches.applied("gtp", table=table) as applied:
        [row] = applied.rows
    assert row["applied"] is False and "no GTP code at all" in row["not_applicable"]
    assert not hasattr(sys.modules[MOD], "HAVE_GTP")
    [rep] = patches.report("gtp", table=table)
    assert rep["needed"] is False and "no GTP code at all" in rep["not_applicable"]


def test_suspended_undoes_for_a_while_then_patches_again(holder):
    with patches.applied("f", table=rows(), a="x") as applied:
        with applied.suspended():
            assert holder.FLAG is False and holder.fn is len and holder.Child().hello() == "base"
        assert holder.FLAG is True and holder.fn("ab") == 3


def test_only_names_the_rows_and_an_unknown_name_or_family_is_refused(holder):
    with patches.applied("f", only=["flag"], table=rows()) as applied:
        assert [r["name"] for r in applied.rows] == ["flag"] and holder.fn is len
    with pytest.raises(PatchError, match="no f 'nope' \\(known: env, flag, fn, method\\)"):
        with patches.applied("f", only=["nope"], table=rows()):
            pass
    with pytest.raises(PatchError, match="no patch family"):
        patches.report("nope", table=rows())


# ---- the table and its doc -------------------------------------------------------------------------------------

def test_every_row_says_why_and_what_it_must_still_fit():
    names = [e.name for e in TABLE]
    assert len(names) == len(set(names))
    for e in TABLE:
        assert e.family in FAMILIES and len(e.why) > 40, e.name
        assert e.fits.describe() and e.needed.text, e.name
        assert isinstance(e.fits, (checks.Snippet, checks.Reads, checks.Exists, checks.All, checks.FlagOfFamily))
    assert {e.family for e in TABLE} == set(FAMILIES)


def test_the_docs_hold_the_tables_of_the_table():
    path = os.path.join(os.path.dirname(__file__), *[os.pardir] * 5, "docs", "megatron-patches.md")
    with open(path, encoding="utf-8") as f:
        _, body, _ = doc.split(f.read(), path)
    assert body == patches.markdown()
    assert all(f"| `{e.name}` |" in body for e in TABLE)


def test_a_doc_without_the_markers_is_refused():
    with pytest.raises(ValueError, match="must hold the markers"):
        doc.split("no markers", "x.md")
    with pytest.raises(ValueError, match="must hold the markers"):
        doc.split(doc.END + "\n" + doc.BEGIN + "\n", "x.md")


# ---- finding F's shim (distributed_optimizer_load) ---------------------------------------------------------------

LOADER = """class DistributedOptimizer:
    def load_parameter_state_from_fully_reshardable(self, state_dict):
        for k, v in state_dict.items():
            if k == "step":
                continue
"""


def test_a_function_compares_with_a_literal_only_where_its_branch_is(fake):
    from megatron_adapter.patches.entries import compares_with
    fake(LOADER)
    function = "load_parameter_state_from_fully_reshardable"
    assert checks.compares_with(checks.tree_of("p", MOD), function, "step")
    assert not checks.compares_with(checks.tree_of("p", MOD), function, "exp_avg")
    assert compares_with(MOD, function, "step", "skips step")(())
    fake(LOADER.replace('if k == "step":\n                continue', 'pass'))  # a loader that hands step on: F fixed
    assert not compares_with(MOD, function, "step", "skips step")(())


class _Optimizer:
    """What the shim reads of a DistributedOptimizer: the parameter's group index and torch's state of it."""

    def __init__(self, own):
        main = object()
        self.model_param_group_index_map = {"model_param": (0, 0)}
        self.optimizer = types.SimpleNamespace(param_groups=[{"params": [main]}], state={main: own})


def _handed(own, tensors):
    from megatron_adapter.patches import stand_ins
    seen = []
    stand_ins.step_from_own_state(lambda self, model_param, t: seen.append(t))(_Optimizer(own), "model_param", tensors)
    return seen[0]


def test_the_shim_supplies_only_the_missing_step_from_the_parameters_own_state():
    step, exp_avg, param = object(), object(), object()
    assert _handed({"step": step, "exp_avg": 1}, {"param": param, "exp_avg": exp_avg}) == \
        {"param": param, "exp_avg": exp_avg, "step": step}
    handed = {"param": param, "step": "the loader's"}
    assert _handed({"step": step}, handed) is handed  # a loader that hands step on is left alone
    assert _handed({"exp_avg": 1}, {"param": param}) == {"param": param}  # no step to take: Megatron's KeyError stays
