#!/usr/bin/env python3
"""Every command in README.md and docs/guides/*.md runs as written (docs/guides/README.md, "Commands in
these docs"): each ```sh block is run line by line (a trailing backslash joins lines) from the clone's
root in one bash session, so a variable set by one line is seen by the next, and each line must end
with exit 0, or with N where its comment says [exit N]. Tags in a line's comment:
  [megatron]  needs the Megatron venv (ci/install-megatron.sh); skipped, and said so, without it
  [shared]    needs ../shared/megatron (the Megatron-LM snapshot); skipped without it
  [long]      over five minutes: run only with IH_DOCS_LONG=1
  [runs-the-tests]  the test command itself (ci/test.sh): run by CI, never from inside it
Files a command writes into the clone (out/, tiling.svg: untracked, not ignored) are removed afterwards;
ignored folders (build*/, which other tests use at the same time) are left alone.

A command that appears twice (README and a guide) runs once. --part plain runs the commands without
[megatron]/[shared], --part megatron the others (two ctests, so they run side by side).

Usage: docs_commands_test.py REPO_ROOT [--part plain|megatron] [--list]. Prints each command with its
exit code and seconds."""
import os
import pathlib
import re
import shutil
import subprocess
import sys
import time

root = pathlib.Path(sys.argv[1]).resolve()
list_only = "--list" in sys.argv[2:]
part = sys.argv[sys.argv.index("--part") + 1] if "--part" in sys.argv else None
venv = pathlib.Path(os.environ.get("INTEROP_MEGATRON_VENV", pathlib.Path.home() / ".cache/interop-harness/megatron-venv"))
have = {
    "megatron": (venv / "bin" / "python").exists(),
    "shared": any((root.parent / "shared" / "megatron").glob("megatron-lm-*.tar.gz")),
    "long": os.environ.get("IH_DOCS_LONG") == "1",
    "runs-the-tests": False,
}
why_missing = {"megatron": f"no Megatron venv at {venv}", "shared": "no ../shared/megatron snapshot",
               "long": "over five minutes (IH_DOCS_LONG=1 runs it)", "runs-the-tests": "it is the test command itself"}


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


files = [root / "README.md"] + sorted((root / "docs" / "guides").glob("*.md"))


def untracked():
    """Top-level entries git shows as untracked (not ignored): what a documented command wrote."""
    listing = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=normal"],
                             capture_output=True, text=True).stdout
    return {line[3:].rstrip("/").split("/")[0] for line in listing.splitlines() if line.startswith("?? ")}


before = untracked()
failures, ran, skipped, seen = [], 0, 0, set()
try:
    for path in files:
        cmds = commands(path)
        if not cmds:
            continue
        env = dict(os.environ)
        shell = subprocess.Popen(["bash"], cwd=root, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True, env=env, start_new_session=True)
        log = root / "build" / f".docs-test-{os.getpid()}.log"
        for number, command, tags in cmds:
            where = f"{path.relative_to(root)}:{number}"
            needs_megatron = "megatron" in tags or "shared" in tags
            if (part == "plain" and needs_megatron) or (part == "megatron" and not needs_megatron) or command in seen:
                continue
            seen.add(command)
            want = next((int(t.split()[1]) for t in tags if t.startswith("exit ")), 0)
            missing = [t for t in tags if t in have and not have[t]]
            if list_only or missing:
                print(f"SKIP {where}: {command.strip()[:100]}" + (f"  ({why_missing[missing[0]]})" if missing else ""))
                skipped += 1
                continue
            started = time.time()
            # One line at a time in the same shell: its output to a log, its exit code and seconds back.
            # In the shell itself, not a subshell: an assignment (checkout=...) holds for the next lines.
            shell.stdin.write(f"{{ {command}\n}} >{log} 2>&1 </dev/null; echo \"__rc=$?\"\n")
            shell.stdin.flush()
            reply = shell.stdout.readline()
            seconds = time.time() - started
            rc = int(reply.strip().split("=")[1]) if reply.startswith("__rc=") else -1
            ran += 1
            verdict = "ok  " if rc == want else "FAIL"
            print(f"{verdict} {where}: exit {rc} in {seconds:.0f} s: {command.strip()[:110]}", flush=True)
            if rc != want:
                failures.append(f"{where}: exit {rc}, the docs say {want}: {command.strip()}")
                print("     " + log.read_text()[-2500:].replace("\n", "\n     "))
        shell.stdin.close()
        shell.wait(timeout=60)
        log.unlink(missing_ok=True)
finally:
    for name in untracked() - before:  # what the commands wrote (out/, tiling.svg)
        target = root / name
        shutil.rmtree(target) if target.is_dir() and not target.is_symlink() else target.unlink()

print(f"{ran} passed, {len(failures)} failed, {skipped} skipped" if not list_only else f"{skipped} commands")
for failure in failures:
    print("FAIL " + failure)
sys.exit(1 if failures else 0)
