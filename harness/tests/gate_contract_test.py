#!/usr/bin/env python3
"""The gate's contract with CI: reports a parser accepts, a planted failure shown in all three with a
REPRO line that reproduces it, the same seed and budget giving the same report, and tokens that do
not move when a pinned case is added; bad input refused with a typed message; known findings pinned,
a different failure of a pinned check failing, a stale pin reported.
Usage: run_pytest.sh gate_contract_test.py --cli INTEROP_HARNESS --corpus CORPUS_DIR"""
import json
import os
import re
import shutil
import xml.etree.ElementTree as ElementTree
import zlib

import pytest

MUTANT = ("--mutant", "maps_accept_mixed", "--property-cases", "5")  # the C++ mutant that accepts mixed MLP kinds
R2 = "gate/spec-invariants/gtp_linear_resume_tp2_gtp_change"


def without_timings(report):
    for c in report["checks"]:
        c.pop("seconds", None)
    return report


def outcomes(result):
    return {c["name"]: c for c in json.loads(result.stdout)["checks"]}


@pytest.fixture(scope="module")
def planted(run, tmp_path_factory):
    """The gate under the planted failure, its report folder and its report."""
    folder = str(tmp_path_factory.mktemp("contract") / "a")
    result = run("gate", *MUTANT, "--report", folder)
    with open(os.path.join(folder, "report.json")) as f:
        return result, folder, json.load(f)


def test_a_planted_failure_fails_the_gate_in_all_three_reports(planted):
    result, folder, report = planted
    assert result.returncode == 1
    junit = ElementTree.parse(os.path.join(folder, "junit.xml")).getroot()
    failed_cases = junit.findall(".//testcase/failure")
    assert len(failed_cases) > 0 and int(junit.attrib["failures"]) == len(failed_cases)
    assert all("REPRO: interop-harness repro ih2:" in (f.text or "") for f in failed_cases)
    failed = [c for c in report["checks"] if c["outcome"] == "failed"]
    assert report["ok"] is False and len(failed) == len(failed_cases)
    with open(os.path.join(folder, "summary.md")) as f:
        summary = f.read()
    assert "FAILED" in summary and "interop-harness repro ih2:" in summary
    assert "seed 1, 5 cases per property" in result.stdout.splitlines()[1], "the first line names seed and budget"


def _first_token(report):
    return next(c for c in report["checks"] if c["outcome"] == "failed")["repro"].split()[-1]


def test_the_repro_line_reproduces_the_failure(run, planted):
    replay = run("repro", _first_token(planted[2]))
    assert replay.returncode == 1, replay.stderr[-300:]


def test_same_seed_and_budget_give_the_same_report(run, planted, tmp_path):
    second = run("gate", *MUTANT, "--report", str(tmp_path))
    with open(tmp_path / "report.json") as f:
        assert second.returncode == 1 and without_timings(json.load(f)) == without_timings(planted[2])


def test_tokens_name_checks_not_positions(run, corpus, planted, tmp_path):
    """A pinned case added first changes no other token; a token of a check that is gone is stale."""
    moved = str(tmp_path / "corpus")
    shutil.copytree(corpus, moved)
    before = run("gate", "--corpus", moved, *MUTANT, "--json")
    maps = os.path.join(moved, "pinned", "layer_maps.jsonl")
    lines = open(maps).read().splitlines()
    first_case = next(i for i, line in enumerate(lines) if line.startswith("{"))
    lines.insert(first_case, json.dumps({"pattern": "M*E|M*E", "ok": True, "num_gpt_layers": 2,
                                         "attention_to_gpt": [[1, 0], [5, 1]], "mlp_to_gpt": [[2, 0], [6, 1]],
                                         "fresh_init": [0, 4]}))
    open(maps, "w").write("\n".join(lines) + "\n")
    after = run("gate", "--corpus", moved, *MUTANT, "--json")
    tokens_before = {c["name"]: c.get("repro") for c in json.loads(before.stdout)["checks"]}
    tokens_after = {c["name"]: c.get("repro") for c in json.loads(after.stdout)["checks"]}
    assert len(tokens_after) == len(tokens_before) + 1, "the inserted case is a new check"
    assert [n for n, t in tokens_before.items() if tokens_after.get(n) != t] == []
    renamed = re.sub(r"ih2:gate/pinned-layer-maps/[^:]+", "ih2:gate/pinned-layer-maps/%27nope%27",
                     _first_token(planted[2]))
    renamed = renamed[:renamed.rindex(":crc=")]
    stale = run("repro", renamed + ":crc=%08x" % zlib.crc32(renamed.encode()))  # a well-formed token, re-signed
    assert stale.returncode == 2 and "stale token" in stale.stderr, stale.stderr


def test_an_unknown_mutant_is_refused_before_any_work(run):
    assert run("gate", "--mutant", "no_such_mutant").returncode == 2


@pytest.mark.parametrize("args", [
    ["properties", "--max-size", "-1"], ["properties", "--max-size", "1e12"],
    ["properties", "--max-size", "1000000000000"], ["properties", "--cases", "-5"],
    ["properties", "--cases", "0"], ["properties", "--only", "no_such_property"],
    ["gate", "--property-cases", "-1"], ["gate", "--property-cases", "0"],
    ["gate", "--target", "megatron", "--megatron-path", "."],
    ["properties", "--mutant", "no_such_mutant"], ["repro", "prop:x:reference:rc=1"]])
def test_bad_input_is_a_typed_error_never_a_crash_hang_or_pass(run, args, tmp_path):
    args = [str(tmp_path) if a == "." else a for a in args]  # a folder that is no Megatron-LM checkout
    result = run(*args)
    assert result.returncode == 2 and "ERROR: invalid_argument: " in result.stderr, result.stderr[-200:]


def test_help_goes_to_stdout_and_double_dash_ends_the_options(run):
    assert run("gate", "--help").stdout.startswith("usage: interop-harness gate")
    assert run("repro", "--", "--help").returncode == 2


def test_pinned_findings_are_known_findings_and_pass_the_gate(run):
    """The spec-invariant checks the reference fails as it models Megatron (corpus/findings/*.finding)."""
    known = run("gate", "--property-cases", "5", "--json")
    found = [n for n, c in outcomes(known).items() if c["outcome"] == "known finding"]
    assert known.returncode == 0 and R2 in found and len(found) >= 4, found


@pytest.fixture
def pins(corpus, tmp_path):
    """A copy of the corpus, and the text of the R2 pin the tests below change."""
    folder = str(tmp_path / "pins")
    shutil.copytree(corpus, folder)
    r2 = os.path.join(folder, "findings", "R2-gtp-linear-resume-tp2-gtp-change.reference.finding")
    return folder, r2, open(r2).read()


def test_a_failure_other_than_the_pinned_one_fails_the_gate(run, pins):
    folder, r2, text = pins
    open(r2, "w").write(re.sub(r"(?m)^violation: .*$", "violation: rows_misplaced weight", text))
    differs = run("gate", "--corpus", folder, "--property-cases", "5", "--json")
    c = outcomes(differs).get(R2, {})
    assert differs.returncode == 1 and c.get("outcome") == "failed" and "not the known finding" in c.get("detail", "")


def test_a_releases_pin_does_not_hold_for_another_version(run, pins):
    """A pin naming a Megatron release (a finding of that release, fixed since) holds only for a token naming
    it: beside the pin of every version it changes nothing where the token names no release (the reference)."""
    folder, _, text = pins
    signed = "ih2:gate/spec-invariants/gtp_linear_resume_tp2_gtp_change:megatron-version=0.0.1:target=reference"
    open(os.path.join(folder, "findings", "R2-release.reference.finding"), "w").write(
        re.sub(r"(?m)^token: .*$", "token: %s:crc=%08x" % (signed, zlib.crc32(signed.encode())), text)
        .replace("violation: ", "violation: rows_misplaced weight\nviolation: ", 1))
    versioned = run("gate", "--corpus", folder, "--property-cases", "5", "--json")
    c = outcomes(versioned).get(R2, {})
    assert versioned.returncode == 0 and c.get("outcome") == "known finding" \
        and "R2-release" not in c.get("known_finding", ""), c


def test_a_stale_pin_is_reported_and_a_pin_without_its_failure_is_refused(run, pins):
    folder = pins[0]
    stale_pin = os.path.join(folder, "findings", "stale.reference.finding")
    with open(stale_pin, "w") as f:
        f.write("token: ih1:gate/spec-invariants/optimizer_resume_tp1_gtp_change:target=reference\n"
                "reason: a finding that no longer reproduces\nexpect: anything\n")
    stale = run("gate", "--corpus", folder, "--property-cases", "5")
    assert stale.returncode == 0 and \
        "STALE FINDING spec invariants: optimizer_resume_tp1_gtp_change" in stale.stdout, stale.stdout[-400:]
    with open(stale_pin, "w") as f:
        f.write("token: ih1:gate/spec-invariants/optimizer_resume_tp1_gtp_change:target=reference\nreason: r\n")
    assert run("gate", "--corpus", folder, "--property-cases", "5").returncode == 2


def test_the_reference_runs_every_check(run):
    clean = run("gate", "--require-all", "--property-cases", "5")
    assert clean.returncode == 0, clean.stdout[-500:]
