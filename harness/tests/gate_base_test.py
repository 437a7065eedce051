#!/usr/bin/env python3
"""The gate's base mode without Megatron: a planted mutant judged against the unmutated reference (the change
first, exit 1), the target against itself (no change, exit 0), and --base-ref on a git checkout of a stand-in
Megatron served by the fake adapter (harness/megatron/testdata/fake_adapter.py): the worktree kept for NEW's
cross-version round trips and removed after the run and after SIGINT, the changed lines unknown without coverage
data, the base read back from its content-hash cache, a changed base tree missing it, bad bases refused (exit 2).
Usage: run_pytest.sh gate_base_test.py --cli INTEROP_HARNESS --root REPO_ROOT --corpus CORPUS_DIR"""
import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

MUTANT = ("--mutant", "maps_accept_mixed", "--property-cases", "5")
UNSUPPORTED = json.dumps({"ok": False, "unsupported": True,
                          "error": {"kind": "unsupported", "message": "fake Megatron"}})


def test_a_planted_mutant_against_its_base_lists_the_worse_checks_first(run, tmp_path):
    report = str(tmp_path / "report")
    result = run("gate", *MUTANT, "--base-without-mutant", "--report", report)
    assert result.returncode == 1, result.stdout[-2000:]
    out = result.stdout
    change = out.index("CHANGE against base reference: 2 checks differ")
    assert change < out.index("group   "), "the change comes before the absolute table"
    lines = out[change:].splitlines()
    assert lines[1] == "WORSE gate/pinned-layer-maps/'M*-M*E': FAILED (base: ok) new_failure"
    assert lines[3] == "WORSE gate/properties/error_parity: FAILED (base: ok) new_failure"
    # The number passed grows with the gate's checks; the two failures, the pins and the change's counts do not.
    assert re.fullmatch(r"gate: FAILED \(2 failed, \d+ passed, 4 known findings\), against base: 2 worse, 0 better, "
                        r"0 other", out.splitlines()[-1]), out.splitlines()[-1]
    with open(os.path.join(report, "report.json")) as f:
        written = json.load(f)
    assert written["base"]["target"] == "reference" and written["base"]["exit_code"] == 0
    assert [c["name"] for c in written["delta"]["changes"] if c["worse"]] == [
        "gate/pinned-layer-maps/'M*-M*E'", "gate/properties/error_parity"]
    assert written["verdict_line"] == out.splitlines()[-1]
    with open(os.path.join(report, "summary.md")) as f:
        summary = f.read()
    assert summary.index("**WORSE** new_failure") < summary.index("Target: `mutant:maps_accept_mixed`")
    with open(os.path.join(report, "junit.xml")) as f:
        assert '<testsuite name="change against base" tests="2" failures="2"' in f.read()


def test_the_target_against_itself_is_no_change(run):
    result = run("gate", "--property-cases", "5", "--base-without-mutant")
    assert result.returncode == 0, result.stdout[-2000:]
    assert "CHANGE against base reference: none (every check's verdict is the base's)" in result.stdout
    assert result.stdout.splitlines()[-1].endswith("), against base: 0 worse, 0 better, 0 other")


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture
def fake_megatron(tmp_path, root):
    """A git checkout of a stand-in Megatron-LM (two commits) and the environment that serves it by the fake
    adapter, every request answered unsupported: every check NOT RUN, in a second."""
    repo = tmp_path / "megatron-lm"
    (repo / "megatron" / "core").mkdir(parents=True)
    (repo / "megatron" / "core" / "__init__.py").write_text("# base\n")
    git(repo, "init", "-q")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "add", ".")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (repo / "megatron" / "core" / "__init__.py").write_text("# the change\n")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "change")
    data = tmp_path / "data" / "harness" / "megatron" / "adapter"
    data.mkdir(parents=True)
    shutil.copy(os.path.join(root, "harness", "megatron", "testdata", "fake_adapter.py"), data / "adapter.py")
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    os.symlink(shutil.which("python3"), venv / "python")
    env = dict(os.environ, IH_DATA_DIR=str(tmp_path / "data"), INTEROP_MEGATRON_VENV=str(tmp_path / "venv"),
               IH_FAKE_ADAPTER=json.dumps({"replies": [UNSUPPORTED]}), TMPDIR=str(tmp_path))
    return repo, env


def gate_base_ref(cli, corpus, repo, env, *more):
    return subprocess.run([cli, "gate", "--target", "megatron", "--megatron-path", str(repo), "--corpus", corpus,
                           "--base-ref", "HEAD~1", *more], capture_output=True, text=True, env=env, timeout=300)


def worktree_count(repo):
    return git(repo, "worktree", "list", "--porcelain").count("worktree ")


def test_base_ref_gates_a_worktree_removed_after_and_cached_by_content(cli, corpus, fake_megatron, tmp_path):
    repo, env = fake_megatron
    cache = str(tmp_path / "cache")
    first = gate_base_ref(cli, corpus, repo, env, "--base-cache", cache)
    assert first.returncode == 5, first.stdout[-2000:] + first.stderr[-2000:]  # nothing ran on either side
    assert "INFO: base: a worktree of " in first.stdout and "INFO: gating the base first" in first.stdout
    assert "CHANGE against base megatron-core 0.0-fake" in first.stdout and ": none (" in first.stdout
    assert worktree_count(repo) == 1, "the base's worktree is gone"
    assert not [p for p in os.listdir(tmp_path) if p.startswith("interop-harness-run-")], "nor its run folder"
    assert len(os.listdir(cache)) == 1
    second = gate_base_ref(cli, corpus, repo, env, "--base-cache", cache)
    assert second.returncode == 5
    assert "its verdicts from the cache" in second.stdout and "gating the base first" not in second.stdout
    # HEAD~1 now names the changed tree: another content hash, another key.
    commit_empty = ("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "empty")
    git(repo, *commit_empty)
    third = gate_base_ref(cli, corpus, repo, env, "--base-cache", cache)
    assert "gating the base first" in third.stdout and len(os.listdir(cache)) == 2
    # Another commit of the same tree: the same key (the content is hashed, not the commit).
    git(repo, *commit_empty)
    fourth = gate_base_ref(cli, corpus, repo, env, "--base-cache", cache)
    assert "its verdicts from the cache" in fourth.stdout and len(os.listdir(cache)) == 2
    uncached = gate_base_ref(cli, corpus, repo, env, "--base-cache", cache, "--no-base-cache")
    assert "gating the base first" in uncached.stdout and len(os.listdir(cache)) == 2
    assert worktree_count(repo) == 1


def test_base_ref_keeps_its_worktree_for_news_cross_round_trips_and_removes_it_after(cli, corpus, fake_megatron,
                                                                                    tmp_path):
    """NEW's side runs group real-roundtrip-cross against the worktree (NOT RUN on the fake adapter, with its
    reason); the fake adapter records no coverage, so the changed lines are unknown, never "0 not run"."""
    repo, env = fake_megatron
    report = tmp_path / "report"
    result = gate_base_ref(cli, corpus, repo, env, "--no-base-cache", "--report", str(report))
    out = result.stdout
    assert result.returncode == 5, out[-2000:] + result.stderr[-2000:]  # nothing ran: nothing verified
    worktree = out.split("INFO: base: a worktree of ")[1].split(" at ")[1].split("\n")[0]
    started_on_base = out.find("starting the Megatron adapter on " + worktree, out.index("INFO: gating the change"))
    assert started_on_base > 0, "NEW's cross-version round trips start worlds on the base's worktree"
    assert not os.path.exists(worktree) and worktree_count(repo) == 1, "the worktree is gone after the run"
    written = json.loads((report / "report.json").read_text())
    cross = [c for c in written["checks"] if c["group"] == "real-roundtrip-cross"]
    # each real round trip of the gated side once in each direction (base-to-new_X, new-to-base_X)
    real = {c["name"].rsplit("/", 1)[1] for c in written["checks"] if c["group"] == "real-roundtrips"}
    crossed = {c["name"].rsplit("/", 1)[1].split("_", 1)[1] for c in cross}
    assert crossed and crossed <= real and len(cross) == 2 * len(crossed), (sorted(crossed), sorted(real))
    assert {c["outcome"] for c in cross} == {"not run"}
    assert all("fake Megatron" in c["detail"] for c in cross), cross[0]
    assert written["coverage"] == {"data_file": "", "json_report": "", "measured": False,
                                   "not_measured": "no Megatron process recorded coverage data"}
    assert out.splitlines()[-1].endswith(", coverage not measured (changed lines unknown)")
    assert "changed lines not run" not in out
    assert "Which changed lines ran is unknown." in (report / "summary.md").read_text()


def test_sigint_removes_the_base_worktree(cli, corpus, fake_megatron, tmp_path):
    repo, env = fake_megatron
    env["IH_FAKE_ADAPTER"] = json.dumps({"hello": "!hang"})  # the base's adapter never answers
    out = open(tmp_path / "out.txt", "w+")
    child = subprocess.Popen([cli, "gate", "--target", "megatron", "--megatron-path", str(repo), "--corpus", corpus,
                              "--base-ref", "HEAD~1", "--no-base-cache"], stdout=out, stderr=subprocess.STDOUT,
                             env=env)
    deadline = time.time() + 120
    while "a worktree of" not in open(tmp_path / "out.txt").read() and time.time() < deadline:
        time.sleep(0.2)
    time.sleep(1)
    worktree = open(tmp_path / "out.txt").read().split(" at ")[-1].split("\n")[0]
    assert os.path.isdir(worktree), worktree
    child.send_signal(signal.SIGINT)
    assert child.wait(timeout=60) == 130
    assert not os.path.exists(worktree)
    # The entry it left in the repository is pruned by the next --base-ref run.
    env["IH_FAKE_ADAPTER"] = json.dumps({"replies": [UNSUPPORTED]})
    assert gate_base_ref(cli, corpus, repo, env, "--no-base-cache").returncode == 5
    assert worktree_count(repo) == 1


@pytest.mark.parametrize("args,message", [
    (("--base-ref", "no-such-ref"), "--base-ref 'no-such-ref' names no commit of the git checkout at"),
    (("--base-ref", "--help"), "--base-ref '--help' is no git revision"),
    (("--base-ref", "HEAD", "--base-without-mutant"), "name one base"),
    (("--base-megatron-path", "/nonexistent"), "--base-megatron-path /nonexistent holds no megatron/core"),
    (("--base-cache", "/tmp"), "--base-cache and --no-base-cache need a base"),
])
def test_a_bad_base_is_refused_before_anything_runs(cli, corpus, fake_megatron, args, message):
    repo, env = fake_megatron
    result = subprocess.run([cli, "gate", "--target", "megatron", "--megatron-path", str(repo), "--corpus", corpus,
                             *args], capture_output=True, text=True, env=env, timeout=60)
    assert result.returncode == 2, result.stdout[-500:] + result.stderr[-500:]
    assert message in result.stderr
    assert "INFO: gate target" not in result.stdout


def test_base_flags_of_megatron_on_the_reference_and_a_base_ref_without_a_checkout_are_refused(run, tmp_path):
    assert run("gate", "--base-megatron-path", str(tmp_path)).returncode == 2
    no_git = run("gate", "--target", "megatron", "--base-ref", "HEAD")
    assert no_git.returncode == 2 and "--base-ref needs --megatron-path" in no_git.stderr


def test_a_base_ref_whose_tree_has_no_megatron_at_news_place_is_refused(cli, corpus, fake_megatron):
    repo, env = fake_megatron
    inner = repo / "ignored" / "megatron-lm"  # a tree git does not track, inside another checkout
    (inner / "megatron" / "core").mkdir(parents=True)
    (inner / "megatron" / "core" / "__init__.py").write_text("")
    result = subprocess.run([cli, "gate", "--target", "megatron", "--megatron-path", str(inner), "--corpus", corpus,
                             "--base-ref", "HEAD"], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 2, result.stdout[-500:] + result.stderr[-500:]
    assert "has no megatron/core/__init__.py at ignored/megatron-lm" in result.stderr
    assert worktree_count(repo) == 1
