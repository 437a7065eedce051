"""Patch checking (megatron_adapter/megatron_patches.py) on stand-in modules, without Megatron: a patch
applies only while the code it is about is still there (judged on the syntax tree, so formatting
never matters), is "not applicable" to a module with no code of its family, and is undone and
redone on request."""

import sys

import pytest

from megatron_adapter import megatron_patches as mp

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

FLAG = mp.Relies("HAVE_TE", (None, "sharded_state_dict"), "gtp")
FN = mp.Relies("None", (None, "sharded_state_dict"), "gtp")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    """A module ih_fake_megatron_mod written to disk (check reads its source), imported fresh."""
    def make(source=SOURCE):
        (tmp_path / "ih_fake_megatron_mod.py").write_text(source)
        sys.modules.pop("ih_fake_megatron_mod", None)
        return "ih_fake_megatron_mod"
    monkeypatch.syspath_prepend(str(tmp_path))
    yield make
    sys.modules.pop("ih_fake_megatron_mod", None)


def test_needed_while_the_value_is_the_unpatched_one(fake):
    module, needed = mp.check("p", fake(), "HAVE_GTP", False, FLAG)
    assert needed is True and module.__name__ == "ih_fake_megatron_mod"
    module.HAVE_GTP = True
    assert mp.check("p", "ih_fake_megatron_mod", "HAVE_GTP", False, FLAG)[1] is False


@pytest.mark.parametrize("attr,relies", [("HAVE_GTP", FLAG), ("is_gtp_param", FN),
                                         ("HAVE_GTP", mp.Relies(None, (None, "sharded_state_dict"), "gtp"))])
def test_formatting_does_not_matter(fake, attr, relies):
    """The issue's case: the guarded code is there, black-formatted over several lines."""
    assert mp.check("p", fake(REFORMATTED), attr, {"HAVE_GTP": False}.get(attr), relies)[1] is True


@pytest.mark.parametrize("source,attr,relies,needle", [
    # the attribute is gone although the module still has GTP code (a renamed flag)
    (SOURCE.replace("HAVE_GTP", "HAVE_GTP2"), "HAVE_GTP", FLAG, "does not exist in this Megatron although"),
    # bound to something else than the patch relies on
    (SOURCE.replace("HAVE_GTP = HAVE_TE", "HAVE_GTP = HAVE_TE and HAVE_X"), "HAVE_GTP", FLAG, "no longer binds"),
    (SOURCE.replace("is_gtp_param = None", "is_gtp_param = len"), "is_gtp_param", FN, "no longer binds"),
    # bound only inside a function (not at import)
    (SOURCE.replace("HAVE_GTP = HAVE_TE\n", "def f():\n    HAVE_GTP = HAVE_TE\nHAVE_GTP = 0\n"), "HAVE_GTP", FLAG,
     "no longer binds"),
    # the function the patch is for no longer reads it (the guarded branch is gone)
    (SOURCE.replace("HAVE_GTP and ", ""), "HAVE_GTP", FLAG, "no longer reads HAVE_GTP"),
    # ... or is gone itself
    (SOURCE.replace("def sharded_state_dict", "def state_dict"), "is_gtp_param", FN, "no longer reads"),
    # read only outside the function the patch is for
    (SOURCE.replace("HAVE_GTP and ", "") + "\nprint(HAVE_GTP)\n", "HAVE_GTP", FLAG, "no longer reads"),
])
def test_changed_code_is_a_patch_error(fake, source, attr, relies, needle):
    with pytest.raises(mp.PatchError, match=needle):
        mp.check("p", fake(source), attr, None, relies)


def test_a_module_that_does_not_import_is_a_patch_error(fake):
    with pytest.raises(mp.PatchError, match="cannot import ih_fake_megatron_mod: SyntaxError"):
        mp.check("p", fake("HAVE_GTP = (\n"), "HAVE_GTP", False, FLAG)


def test_a_module_with_no_code_of_the_family_is_not_applicable(fake):
    with pytest.raises(mp.NotApplicable, match="has no HAVE_GTP and no GTP code at all"):
        mp.check("p", fake(NO_GTP), "HAVE_GTP", False, FLAG)
    module, reason = mp._check_or_optional("p", "ih_fake_megatron_mod", "is_gtp_param", None, FN)
    assert module is None and "no GTP code at all" in reason
    # one GTP identifier anywhere (a helper named *_gtp_*) makes the missing flag an error again
    with pytest.raises(mp.PatchError, match="although the module has GTP code"):
        mp.check("p", fake(NO_GTP + "\ndef _gtp_helper():\n    pass\n"), "HAVE_GTP", False, FLAG)


def test_a_patch_whose_module_is_absent_is_not_applicable(monkeypatch):
    # A megatron-core without the module (no GDP at all) has no code of the patch's family, optional or not.
    monkeypatch.setattr(mp, "OPTIONAL", {"opt"})
    for name in ("opt", "other"):
        module, reason = mp._check_or_optional(name, "ih_no_such_module", "HAVE_NVRX", False, FLAG)
        assert module is None and "ih_no_such_module is not in this Megatron" in reason


def test_a_module_whose_dependency_is_missing_is_an_error_unless_optional(fake, monkeypatch):
    # The module is there but cannot import (a missing dependency): only an optional patch may skip it.
    broken = fake("import ih_missing_dependency\nHAVE_GTP = False\n")
    monkeypatch.setattr(mp, "OPTIONAL", {"opt"})
    module, reason = mp._check_or_optional("opt", broken, "HAVE_GTP", False, FLAG)
    assert module is None and "cannot import" in reason
    with pytest.raises(mp.PatchError, match="cannot import"):
        mp._check_or_optional("other", broken, "HAVE_GTP", False, FLAG)


def test_an_optional_patch_present_but_changed_stays_an_error(fake, monkeypatch):
    monkeypatch.setattr(mp, "OPTIONAL", {"opt"})
    with pytest.raises(mp.PatchError):
        mp._check_or_optional("opt", fake(SOURCE.replace("HAVE_GTP and ", "")), "HAVE_GTP", False, FLAG)


def test_apply_checks_all_first_then_patches_and_unpatched_restores(fake, monkeypatch):
    name = fake()
    monkeypatch.setattr(mp, "PATCHES", (
        ("a", name, "HAVE_GTP", False, True, FLAG),
        ("b", name, "is_gtp_param", None, lambda: len, FN),
    ))
    monkeypatch.setattr(mp, "WHY", {"a": "why a", "b": "why b"})
    monkeypatch.setattr(mp, "ORIGINALS", {})
    monkeypatch.setattr(mp, "OPTIONAL", set())
    report = mp.apply()
    module = sys.modules[name]
    assert [r["applied"] for r in report] == [True, True] and module.HAVE_GTP is True and module.is_gtp_param is len
    with mp.unpatched():
        assert module.HAVE_GTP is False and module.is_gtp_param is None
    assert module.HAVE_GTP is True


def test_apply_records_a_not_applicable_patch_and_changes_nothing(fake, monkeypatch):
    name = fake(NO_GTP)
    monkeypatch.setattr(mp, "PATCHES", (("a", name, "HAVE_GTP", False, True, FLAG),))
    monkeypatch.setattr(mp, "WHY", {"a": "why a"})
    monkeypatch.setattr(mp, "ORIGINALS", {})
    [row] = mp.apply()
    assert row["applied"] is False and "no GTP code at all" in row["not_applicable"]
    assert not hasattr(sys.modules[name], "HAVE_GTP") and mp.ORIGINALS == {}
    [rep] = mp.report()
    assert rep["needed"] is False and "no GTP code at all" in rep["not_applicable"]


def test_apply_patches_nothing_when_one_patch_no_longer_matches(fake, monkeypatch):
    name = fake()
    monkeypatch.setattr(mp, "PATCHES", (
        ("a", name, "HAVE_GTP", False, True, FLAG),
        ("b", name, "is_gtp_param", None, len, mp.Relies("other", (None, "sharded_state_dict"), "gtp")),
    ))
    monkeypatch.setattr(mp, "ORIGINALS", {})
    monkeypatch.setattr(mp, "OPTIONAL", set())
    with pytest.raises(mp.PatchError):
        mp.apply()
    assert sys.modules[name].HAVE_GTP is False


def test_every_patch_says_why():
    assert {p[0] for p in mp.PATCHES} == set(mp.WHY)
    assert mp.OPTIONAL <= set(mp.WHY)
