#!/usr/bin/env python3
"""Every command in README.md and docs/guides/*.md runs as written (docs/guides/README.md, "Commands in
these docs"): each ```sh block is run line by line (a trailing backslash joins lines) from the clone's
root in one bash session per file, so a variable set by one line is seen by the next, and each line must end
with exit 0, or with N where its comment says [exit N]. Tags in a line's comment:
  [megatron]  needs the Megatron venv (ci/install-megatron.sh); skipped, and said so, without it
  [shared]    needs ../shared/megatron (the Megatron-LM snapshot); skipped without it
  [long]      over five minutes: run only with IH_DOCS_LONG=1
  [runs-the-tests]  the test command itself (ci/test.sh): run by CI, never from inside it
Files a command writes into the clone (out/, tiling.svg: untracked, not ignored) are removed afterwards;
ignored folders (build*/, which other tests use at the same time) are left alone.

A command that appears twice (README and a guide) runs once. --part plain runs the commands without
[megatron]/[shared], --part megatron the others (two ctests, so they run side by side).

Usage: run_pytest.sh docs_commands_test.py --root REPO_ROOT [--part plain|megatron] (-s prints each command with
its exit code and seconds)."""
import os
import pathlib
import re
import shutil
import subprocess
import time

import pytest

VENV = pathlib.Path(os.environ.get("INTEROP_MEGATRON_VENV",
                                   pathlib.Path.home() / ".cache/interop-harness/megatron-venv"))
WHY_MISSING = {"megatron": f"no Megatron venv at {VENV}", "shared": "no ../shared/megatron snapshot",
               "long": "over five minutes (IH_DOCS_LONG=1 runs it)", "runs-the-tests": "it is the test command itself"}
SOURCE = pathlib.Path(__file__).resolve().parents[2]
FILES = [SOURCE / "README.md"] + sorted((SOURCE / "docs" / "guides").glob("*.md"))


def commands(path):
    """(line number, command, tags) of every command in the file's ```sh blocks."""
    found, in_block, pending, start = [], False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("```"):
            in_block = line.strip() in ("```sh", "```bash") if not in_block else False
            continue
        if not in_block or (not pending and (not line.strip() or line.lstrip().startswith("#"))):
            continue
        start = start if pending else number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = pending + line
        pending = ""
        comment = re.search(r"\s#\s(.*)$", command)
        tags = re.findall(r"\[([a-z-]+(?: \d+)?)\]", comment.group(1)) if comment else []
        found.append((start, command, tags))
    return found


def untracked(root):
    """Top-level entries git shows as untracked (not ignored): what a documented command wrote."""
    listing = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
                             capture_output=True, text=True).stdout
    return {line[3:].rstrip("/").split("/")[0] for line in listing.splitlines() if line.startswith("?? ")}


@pytest.fixture(scope="module")
def clone(root):
    """The clone's root; what the documented commands wrote into it is removed after them all."""
    root = pathlib.Path(root)
    before = untracked(root)
    yield root
    for name in untracked(root) - before:  # what the commands wrote (out/, tiling.svg)
        target = root / name
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()


@pytest.fixture(scope="module")
def seen():
    return set()  # commands already run (a command in README and a guide runs once)


def have(root):
    return {"megatron": (VENV / "bin" / "python").exists(),
            "shared": any((root.parent / "shared" / "megatron").glob("megatron-lm-*.tar.gz")),
            "long": os.environ.get("IH_DOCS_LONG") == "1", "runs-the-tests": False}


def to_run(root, path, part, seen):
    """(where, command, expected exit code) of the file's commands this part runs; the others printed as SKIP."""
    available, out = have(root), []
    for number, command, tags in commands(root / path.relative_to(SOURCE)):
        needs_megatron = "megatron" in tags or "shared" in tags
        if (part == "plain" and needs_megatron) or (part == "megatron" and not needs_megatron) or command in seen:
            continue
        seen.add(command)
        where = f"{path.relative_to(SOURCE)}:{number}"
        missing = [t for t in tags if t in available and not available[t]]
        if missing:
            print(f"SKIP {where}: {command.strip()[:100]}  ({WHY_MISSING[missing[0]]})")
            continue
        out.append((where, command, next((int(t.split()[1]) for t in tags if t.startswith("exit ")), 0)))
    return out


def run_in_one_shell(root, lines):
    """Runs each (where, command, want) in one bash session; the failures as text."""
    shell = subprocess.Popen(["bash"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True, start_new_session=True)
    log = root / "build" / f".docs-test-{os.getpid()}.log"
    failures = []
    for where, command, want in lines:
        started = time.time()
        # One line at a time in the same shell: its output to a log, its exit code and seconds back.
        # In the shell itself, not a subshell: an assignment (checkout=...) holds for the next lines.
        shell.stdin.write(f"{{ {command}\n}} >{log} 2>&1 </dev/null; echo \"__rc=$?\"\n")
        shell.stdin.flush()
        reply = shell.stdout.readline()
        rc = int(reply.strip().split("=")[1]) if reply.startswith("__rc=") else -1
        print(f"{'ok  ' if rc == want else 'FAIL'} {where}: exit {rc} in {time.time() - started:.0f} s: "
              f"{command.strip()[:110]}", flush=True)
        if rc != want:
            failures.append(f"{where}: exit {rc}, the docs say {want}: {command.strip()}")
            print("     " + log.read_text()[-2500:].replace("\n", "\n     "))
    shell.stdin.close()
    shell.wait(timeout=60)
    log.unlink(missing_ok=True)
    return failures


@pytest.mark.parametrize("path", FILES, ids=lambda p: str(p.relative_to(SOURCE)))
def test_every_command_of_the_file_runs_as_written(clone, seen, pytestconfig, path):
    lines = to_run(clone, path, pytestconfig.getoption("--part"), seen)
    if not lines:
        pytest.skip("no command of this part to run here")
    assert run_in_one_shell(clone, lines) == []
