"""Patch checking (megatron_adapter/megatron_patches.py) on stand-in modules, without Megatron: a patch
applies only while the code it is about is still there, and is undone and redone on request."""

import sys

import pytest

from megatron_adapter import megatron_patches as mp

SOURCE = """HAVE_TE = False
HAVE_GTP = HAVE_TE
is_gtp_param = None
"""


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
    module, needed = mp.check("p", fake(), "HAVE_GTP", False, "HAVE_GTP = HAVE_TE")
    assert needed is True and module.__name__ == "ih_fake_megatron_mod"
    module.HAVE_GTP = True
    assert mp.check("p", "ih_fake_megatron_mod", "HAVE_GTP", False, "HAVE_GTP = HAVE_TE")[1] is False


@pytest.mark.parametrize("attr,snippet,needle", [
    ("HAVE_NOPE", "HAVE_GTP = HAVE_TE", "does not exist in this Megatron"),
    ("HAVE_GTP", "HAVE_GTP = HAVE_TE and HAVE_X", "no longer contains"),
])
def test_changed_code_is_a_patch_error(fake, attr, snippet, needle):
    with pytest.raises(mp.PatchError, match=needle):
        mp.check("p", fake(), attr, False, snippet)


def test_a_module_that_does_not_import_is_a_patch_error(fake):
    with pytest.raises(mp.PatchError, match="cannot import ih_fake_megatron_mod: SyntaxError"):
        mp.check("p", fake("HAVE_GTP = (\n"), "HAVE_GTP", False, "HAVE_GTP")


def test_an_optional_patch_whose_target_is_absent_is_not_applicable(fake, monkeypatch):
    monkeypatch.setattr(mp, "OPTIONAL", {"opt"})
    module, reason = mp._check_or_optional("opt", fake(), "HAVE_NVRX", False, "if not HAVE_NVRX:")
    assert module is None and "does not exist" in reason
    with pytest.raises(mp.PatchError):  # present but changed stays an error
        mp._check_or_optional("opt", "ih_fake_megatron_mod", "HAVE_GTP", False, "HAVE_GTP = 1")


def test_apply_checks_all_first_then_patches_and_unpatched_restores(fake, monkeypatch):
    name = fake()
    monkeypatch.setattr(mp, "PATCHES", (
        ("a", name, "HAVE_GTP", False, True, "HAVE_GTP = HAVE_TE"),
        ("b", name, "is_gtp_param", None, lambda: len, "is_gtp_param = None"),
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


def test_apply_patches_nothing_when_one_patch_no_longer_matches(fake, monkeypatch):
    name = fake()
    monkeypatch.setattr(mp, "PATCHES", (
        ("a", name, "HAVE_GTP", False, True, "HAVE_GTP = HAVE_TE"),
        ("b", name, "is_gtp_param", None, len, "is_gtp_param = other"),
    ))
    monkeypatch.setattr(mp, "ORIGINALS", {})
    monkeypatch.setattr(mp, "OPTIONAL", set())
    with pytest.raises(mp.PatchError):
        mp.apply()
    assert sys.modules[name].HAVE_GTP is False


def test_every_patch_says_why():
    assert {p[0] for p in mp.PATCHES} == set(mp.WHY)
    assert mp.OPTIONAL <= set(mp.WHY)
