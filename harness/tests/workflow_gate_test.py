#!/usr/bin/env python3
"""The shipped gate workflows pass today: runs the gate job's own command lines (ci/github/workflows/
megatron-gate.yml and ci/gitlab/.gitlab-ci.yml, the lines that call ci/ scripts, with the workflow's
own variables) against the Megatron-LM snapshot laid out as the workflow's checkout, and requires exit 0
and a written summary. A workflow that runs --require-all without listing what today's Megatron lacks
fails here, as it would on every pull request.

Usage: run_pytest.sh workflow_gate_test.py --root REPO_ROOT. Exit 77 (skipped, never a pass): no PyYAML or no
snapshot."""
import os
import pathlib
import re
import subprocess
import tempfile
import time

import pytest

yaml = pytest.importorskip("yaml", reason="no PyYAML for this python3")


# The runner's own settings stay the runner's: this machine's venv and compiler cache, this clone.
RUNNER_OWNED = {"IH", "CCACHE_DIR", "INTEROP_MEGATRON_VENV"}


def plain_variables(mapping):
    """The workflow's variables that are plain values (no ${{ }} expression of the CI system)."""
    return {k: str(v) for k, v in (mapping or {}).items()
            if k not in RUNNER_OWNED and isinstance(v, (str, int)) and "${{" not in str(v)}


def gate_job_lines(steps_or_script):
    """The job's shell lines that call scripts of the harness (install, build, gate)."""
    lines = []
    for item in steps_or_script:
        text = item.get("run", "") if isinstance(item, dict) else item
        if isinstance(text, str) and "$IH/ci/" in text:
            lines.append(text)
    return lines


def github_job(doc):
    for job in doc["jobs"].values():
        lines = gate_job_lines(job.get("steps", []))
        if any("ci/gate.sh" in line for line in lines):
            return plain_variables(doc.get("env")) | plain_variables(job.get("env")), lines
    return None


def gitlab_job(doc):
    for name, job in doc.items():
        if isinstance(job, dict) and not name.startswith(".") and "script" in job:
            lines = gate_job_lines(job["script"])
            if any("ci/gate.sh" in line for line in lines):
                return plain_variables(doc.get("variables")) | plain_variables(job.get("variables")), lines
    return None


def run_job(root, name, variables, lines, workspace_env):
    env = dict(os.environ, IH=str(root), **variables, **workspace_env)
    for line in lines:
        started = time.time()
        done = subprocess.run(["bash", "-c", line], env=env, cwd=workspace_env["WORKSPACE"], capture_output=True,
                              text=True, timeout=1200)
        verdict = [v for v in done.stdout.splitlines() if v.startswith("gate: ")]
        print(f"{name}: exit {done.returncode} in {time.time() - started:.0f} s: {line.strip()[:160]}"
              + (f"\n    {verdict[-1]}" if verdict else ""))
        if done.returncode != 0:
            print(done.stdout[-3000:] + done.stderr[-2000:])
            return [f"{name}: `{line.strip()[:120]}` exited {done.returncode}"]
    summary = pathlib.Path(workspace_env["WORKSPACE"]) / "out" / "summary.md"
    return [] if summary.is_file() else [f"{name}: no report written at {summary}"]


@pytest.fixture(scope="module")
def snapshot(root):
    found = subprocess.run(["bash", os.path.join(root, "ci", "megatron-snapshot.sh")], capture_output=True, text=True)
    if found.returncode == 3:
        pytest.skip("no Megatron-LM snapshot here (ci/megatron-snapshot.sh exited 3)")
    assert found.returncode == 0, "ci/megatron-snapshot.sh failed: " + found.stderr
    return pathlib.Path(found.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name,workflow,find", [("github", "ci/github/workflows/megatron-gate.yml", github_job),
                                                ("gitlab", "ci/gitlab/.gitlab-ci.yml", gitlab_job)])
def test_the_workflows_gate_job_passes_against_the_snapshot(root, snapshot, name, workflow, find):
    found = find(yaml.safe_load((pathlib.Path(root) / workflow).read_text()))
    assert found, f"{workflow}: no job calls ci/gate.sh"
    variables, lines = found
    assert any(re.search(r"--require-all", line) for line in lines), f"{workflow}: the gate job does not run --require-all"
    with tempfile.TemporaryDirectory(prefix="ih-workflow-") as work:
        work = pathlib.Path(work)
        if name == "github":  # actions/checkout path: megatron, beside the harness
            (work / "megatron").symlink_to(snapshot)
            workspace_env = {"GITHUB_WORKSPACE": str(work)}
        else:  # the Megatron-LM project itself is the checkout
            (work / "megatron").symlink_to(snapshot / "megatron")
            workspace_env = {"CI_PROJECT_DIR": str(work)}
        workspace_env["WORKSPACE"] = str(work)
        assert run_job(root, name, variables, lines, workspace_env) == []
