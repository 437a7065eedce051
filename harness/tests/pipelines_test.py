#!/usr/bin/env python3
"""The CI pipeline files in ci/github/ and ci/gitlab/ parse, have the shape their CI system needs,
and call only scripts that exist in ci/; the flags they pass to `gate` are flags the gate accepts.

Usage: pipelines_test.py REPO_ROOT [INTEROP_HARNESS_BINARY]. Exit 77 (ctest: skipped, never a pass)
when no YAML parser is available."""
import pathlib
import re
import subprocess
import sys

try:
    import yaml
except ImportError:  # the Megatron venv has PyYAML; system python3 may not
    print("NOT RUN: no PyYAML for this python3 (pip install pyyaml, or run with the Megatron venv's python)")
    sys.exit(77)

root = pathlib.Path(sys.argv[1])
binary = sys.argv[2] if len(sys.argv) > 2 else None
failures = []


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


def check_scripts(path, doc):
    lines = list(commands(doc))
    if not lines:
        failures.append(f"{path}: no commands found")
    scripts = set()
    for line in lines:
        scripts.update(re.findall(r"ci/[A-Za-z0-9_.-]+\.(?:sh|py)", line))
    for script in sorted(scripts):
        if not (root / script).is_file():
            failures.append(f"{path}: calls {script}, which does not exist")
        else:
            print(f"ok   {path.name}: {script} exists")
    gate_flags = set()
    for line in lines:
        for call in re.findall(r"ci/gate\.sh([^\n]*)", line):
            gate_flags.update(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", call))
    return gate_flags


def check_github(path, doc):
    # PyYAML reads the key `on` as True (YAML 1.1).
    if not isinstance(doc, dict) or not ("on" in doc or True in doc) or "jobs" not in doc:
        failures.append(f"{path}: a GitHub workflow needs 'on' and 'jobs'")
        return set()
    for name, job in doc["jobs"].items():
        if "runs-on" not in job or not job.get("steps"):
            failures.append(f"{path}: job {name} needs runs-on and steps")
        for step in job.get("steps", []):
            if not ("run" in step) ^ ("uses" in step):
                failures.append(f"{path}: job {name}: a step needs exactly one of run/uses: {step}")
    return check_scripts(path, doc)


def check_gitlab(path, doc):
    jobs = {k: v for k, v in doc.items() if isinstance(v, dict) and not k.startswith(".") and k not in ("variables", "default")}
    if not jobs:
        failures.append(f"{path}: no jobs")
    stages = doc.get("stages", ["build", "test", "deploy"])
    for name, job in jobs.items():
        if "script" not in job:
            failures.append(f"{path}: job {name} has no script")
        if job.get("stage", "test") not in stages:
            failures.append(f"{path}: job {name} uses stage {job.get('stage')} not in {stages}")
    return check_scripts(path, doc)


gate_flags = set()
github = sorted((root / "ci" / "github" / "workflows").glob("*.yml"))
gitlab = sorted((root / "ci" / "gitlab").glob("*.yml"))
if not github or not gitlab:
    failures.append("expected workflows in ci/github/workflows/ and ci/gitlab/")
for path in github + gitlab:
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        failures.append(f"{path}: does not parse: {error}")
        continue
    print(f"ok   {path.relative_to(root)} parses")
    gate_flags |= (check_github if path in github else check_gitlab)(path, doc)

if binary and gate_flags:
    help_text = subprocess.run([binary, "gate", "--help"], capture_output=True, text=True, timeout=60)
    accepted = help_text.stdout + help_text.stderr
    for flag in sorted(gate_flags):
        if re.search(rf"{re.escape(flag)}(?![\w-])", accepted):
            print(f"ok   gate accepts {flag}")
        else:
            failures.append(f"the pipelines pass {flag} to the gate, which `gate --help` does not list")

for failure in failures:
    print("FAIL " + failure)
sys.exit(1 if failures else 0)
