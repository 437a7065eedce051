#!/usr/bin/env python3
"""The CI pipeline files in ci/github/ and ci/gitlab/ parse, have the shape their CI system needs,
and call only scripts that exist in ci/; the flags they pass to `gate` and `mutate` are flags those accept.

Usage: run_pytest.sh pipelines_test.py --root REPO_ROOT [--cli INTEROP_HARNESS]. Exit 77 (ctest: skipped, never
a pass) when no YAML parser is available."""
import pathlib
import re
import subprocess

import pytest

yaml = pytest.importorskip("yaml", reason="no PyYAML for this python3 (pip install pyyaml, or the Megatron venv)")


def commands(node):
    """Every shell line in run: / script: / before_script: / after_script: values."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("run", "script", "before_script", "after_script"):
                for line in value if isinstance(value, list) else [value]:
                    if isinstance(line, str):
                        yield line
            else:
                yield from commands(value)
    elif isinstance(node, list):
        for item in node:
            yield from commands(item)


def workflows(root):
    return (sorted((pathlib.Path(root) / "ci" / "github" / "workflows").glob("*.yml")),
            sorted((pathlib.Path(root) / "ci" / "gitlab").glob("*.yml")))


@pytest.fixture(scope="module")
def docs(root):
    """{path: its parsed YAML} of every workflow; both CI systems have some."""
    github, gitlab = workflows(root)
    assert github and gitlab, "expected workflows in ci/github/workflows/ and ci/gitlab/"
    return {path: yaml.safe_load(path.read_text()) for path in github + gitlab}


def test_github_workflows_have_the_shape_github_needs(root, docs):
    for path in workflows(root)[0]:
        doc = docs[path]
        # PyYAML reads the key `on` as True (YAML 1.1).
        assert isinstance(doc, dict) and ("on" in doc or True in doc) and "jobs" in doc, path
        for name, job in doc["jobs"].items():
            assert "runs-on" in job and job.get("steps"), f"{path}: job {name} needs runs-on and steps"
            for step in job["steps"]:
                assert ("run" in step) ^ ("uses" in step), f"{path}: job {name}: a step needs one of run/uses: {step}"


def test_gitlab_pipelines_have_the_shape_gitlab_needs(root, docs):
    for path in workflows(root)[1]:
        doc = docs[path]
        jobs = {k: v for k, v in doc.items()
                if isinstance(v, dict) and not k.startswith(".") and k not in ("variables", "default")}
        assert jobs, f"{path}: no jobs"
        stages = doc.get("stages", ["build", "test", "deploy"])
        for name, job in jobs.items():
            assert "script" in job, f"{path}: job {name} has no script"
            assert job.get("stage", "test") in stages, f"{path}: job {name} uses stage {job.get('stage')}"


def test_every_script_the_pipelines_call_exists(root, docs):
    for path, doc in docs.items():
        lines = list(commands(doc))
        assert lines, f"{path}: no commands found"
        scripts = {s for line in lines for s in re.findall(r"ci/[A-Za-z0-9_.-]+\.(?:sh|py)", line)}
        assert [s for s in sorted(scripts) if not (pathlib.Path(root) / s).is_file()] == [], path


@pytest.mark.parametrize("command,call", [
    ("gate", r"ci/gate\.sh([^\n]*)"),
    # a line continued with a backslash is one call
    ("mutate", r"interop-harness\"? mutate((?:[^\n]*\\\n)*[^\n]*)"),
], ids=["gate", "mutate"])
def test_the_flags_passed_to_the_harness_are_its_commands(pytestconfig, docs, command, call):
    binary = pytestconfig.getoption("--cli")
    if not binary:
        pytest.skip("needs --cli")
    flags = {f for doc in docs.values() for line in commands(doc) for args in re.findall(call, line)
             for f in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", args)}
    assert flags, f"no pipeline calls {command}"
    help_text = subprocess.run([binary, command, "--help"], capture_output=True, text=True, timeout=60)
    accepted = help_text.stdout + help_text.stderr
    assert [f for f in sorted(flags) if not re.search(rf"{re.escape(f)}(?![\w-])", accepted)] == []
