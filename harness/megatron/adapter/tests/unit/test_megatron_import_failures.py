"""megatron_import.raised_by_megatron: which failures while importing Megatron are Megatron's own (a module of its
tree raising at import) and which the environment's (a dependency missing) or the adapter's."""

import importlib
import sys

import pytest

from megatron_adapter.megatron_import import raised_by_megatron, where_raised

MODULES = {
    "name_error": "import os\nNOT_DEFINED_NAME\n",
    "missing_dependency": "import os\nimport no_such_dependency_of_the_environment\n",
    "missing_megatron_name": "from megatron.core.fake_tree import nothing_by_this_name\n",
    "fine": "VALUE = 1\n",
}


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """A stand-in megatron/ package tree first on sys.path; its modules forgotten after."""
    package = tmp_path / "megatron" / "core" / "fake_tree"
    package.mkdir(parents=True)
    for folder in (tmp_path / "megatron", tmp_path / "megatron" / "core", package):
        (folder / "__init__.py").write_text("")
    for name, text in MODULES.items():
        (package / f"{name}.py").write_text(text)
    monkeypatch.syspath_prepend(str(tmp_path))
    saved = {k: v for k, v in sys.modules.items() if k == "megatron" or k.startswith("megatron.")}
    for k in saved:
        del sys.modules[k]
    yield
    for k in [k for k in sys.modules if k == "megatron" or k.startswith("megatron.")]:
        del sys.modules[k]
    sys.modules.update(saved)


def raised_importing(name):
    with pytest.raises(Exception) as info:
        importlib.import_module(f"megatron.core.fake_tree.{name}")
    return info.value


def test_a_module_of_the_tree_raising_at_import_is_megatrons_failure(tree):
    exc = raised_importing("name_error")
    assert isinstance(exc, NameError) and raised_by_megatron(exc)
    assert where_raised(exc) == "megatron/core/fake_tree/name_error.py:2 in <module>"


def test_a_missing_megatron_name_imported_by_megatron_is_megatrons_failure(tree):
    assert raised_by_megatron(raised_importing("missing_megatron_name"))


def test_a_dependency_the_environment_lacks_is_not(tree):
    exc = raised_importing("missing_dependency")
    assert isinstance(exc, ModuleNotFoundError) and not raised_by_megatron(exc)


def test_the_adapters_own_raise_is_not():
    try:
        raise ImportError("the adapter's own check", name="megatron.core")
    except ImportError as exc:
        assert not raised_by_megatron(exc)
