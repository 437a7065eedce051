#!/usr/bin/env python3
"""The gate's contract with CI: reports a parser accepts, a planted failure shown in all three with a
REPRO line that reproduces it, the same seed and budget giving the same report, and tokens that do
not move when a pinned case is added. Usage: gate_contract_test.py INTEROP_HARNESS CORPUS_DIR"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree
import zlib

cli, corpus = sys.argv[1], sys.argv[2]
failures = []
checks_run = 0


def run(*args, timeout=600):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout)


def check(name, condition, detail=""):
    global checks_run
    checks_run += 1
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + detail))
    if not condition:
        failures.append(name)


def without_timings(report):
    for c in report["checks"]:
        c.pop("seconds", None)
    return report


work = tempfile.mkdtemp(prefix="ih-gate-contract-")
try:
    # A planted failure: the C++ mutant that accepts mixed MLP kinds.
    a, b = os.path.join(work, "a"), os.path.join(work, "b")
    first = run("gate", "--mutant", "maps_accept_mixed", "--property-cases", "5", "--report", a)
    check("planted failure fails the gate", first.returncode == 1, f"rc={first.returncode}")
    junit = ElementTree.parse(os.path.join(a, "junit.xml")).getroot()
    failed_cases = junit.findall(".//testcase/failure")
    check("junit parses and has failures", len(failed_cases) > 0 and int(junit.attrib["failures"]) == len(failed_cases))
    check("junit failure carries a REPRO line", all("REPRO: interop-harness repro ih2:" in (f.text or "") for f in failed_cases))
    report = json.load(open(os.path.join(a, "report.json")))
    failed = [c for c in report["checks"] if c["outcome"] == "failed"]
    check("json report lists the failures", report["ok"] is False and len(failed) == len(failed_cases))
    summary = open(os.path.join(a, "summary.md")).read()
    check("markdown summary shows the failure", "FAILED" in summary and "interop-harness repro ih2:" in summary)
    token = failed[0]["repro"].split()[-1]
    replay = run("repro", token)
    check("the REPRO line reproduces the failure", replay.returncode == 1, f"rc={replay.returncode} {replay.stderr[-300:]}")
    check("the first line names seed and budget", "seed 1, 5 cases per property" in first.stdout.splitlines()[1])

    second = run("gate", "--mutant", "maps_accept_mixed", "--property-cases", "5", "--report", b)
    same = without_timings(json.load(open(os.path.join(b, "report.json")))) == without_timings(report)
    check("same seed and budget give the same report", second.returncode == 1 and same)

    # Tokens name checks, not positions: a pinned case added first changes no other token.
    moved = os.path.join(work, "corpus")
    shutil.copytree(corpus, moved)
    before = run("gate", "--corpus", moved, "--mutant", "maps_accept_mixed", "--property-cases", "5", "--json")
    maps = os.path.join(moved, "pinned", "layer_maps.jsonl")
    lines = open(maps).read().splitlines()
    first_case = next(i for i, line in enumerate(lines) if line.startswith("{"))
    lines.insert(first_case, json.dumps({"pattern": "M*E|M*E", "ok": True, "num_gpt_layers": 2,
                                         "attention_to_gpt": [[1, 0], [5, 1]], "mlp_to_gpt": [[2, 0], [6, 1]],
                                         "fresh_init": [0, 4]}))
    open(maps, "w").write("\n".join(lines) + "\n")
    after = run("gate", "--corpus", moved, "--mutant", "maps_accept_mixed", "--property-cases", "5", "--json")
    tokens_before = {c["name"]: c.get("repro") for c in json.loads(before.stdout)["checks"]}
    tokens_after = {c["name"]: c.get("repro") for c in json.loads(after.stdout)["checks"]}
    check("the inserted case is a new check", len(tokens_after) == len(tokens_before) + 1)
    check("no other check's token changed", all(tokens_after.get(n) == t for n, t in tokens_before.items()),
          str([n for n, t in tokens_before.items() if tokens_after.get(n) != t][:3]))
    renamed = re.sub(r"ih2:gate/pinned-layer-maps/[^:]+", "ih2:gate/pinned-layer-maps/%27nope%27", token)
    renamed = renamed[:renamed.rindex(":crc=")]
    stale = run("repro", renamed + ":crc=%08x" % zlib.crc32(renamed.encode()))  # a well-formed token, re-signed
    check("a stale token is an error", stale.returncode == 2 and "stale token" in stale.stderr, stale.stderr)

    check("unknown mutant refused before any work",
          run("gate", "--mutant", "no_such_mutant").returncode == 2)
    # No crash, hang or vacuous pass: each is bad input with a typed message.
    for args in (["properties", "--max-size", "-1"], ["properties", "--max-size", "1e12"],
                 ["properties", "--max-size", "1000000000000"], ["properties", "--cases", "-5"],
                 ["properties", "--cases", "0"], ["properties", "--only", "no_such_property"],
                 ["gate", "--property-cases", "-1"], ["gate", "--property-cases", "0"],
                 ["gate", "--target", "megatron", "--megatron-path", work],
                 ["properties", "--mutant", "no_such_mutant"], ["repro", "prop:x:reference:rc=1"]):
        result = run(*args)
        check("bad input: " + " ".join(args), result.returncode == 2 and "ERROR: invalid_argument: " in result.stderr,
              f"rc={result.returncode} {result.stderr[-200:]}")
    check("--help goes to stdout", run("gate", "--help").stdout.startswith("usage: interop-harness gate"))
    check("-- ends the options", run("repro", "--", "--help").returncode == 2)
    # Known findings (corpus/findings/*.finding): the spec-invariant checks the reference fails as it
    # models Megatron are KNOWN FINDING, not FAILED; a different failure of a pinned check still fails;
    # a pin whose check passes is reported STALE; a pin without violation: or expect: lines is refused.
    def outcomes(result):
        return {c["name"]: c for c in json.loads(result.stdout)["checks"]}
    known = run("gate", "--property-cases", "5", "--json")
    found = [n for n, c in outcomes(known).items() if c["outcome"] == "known finding"]
    check("pinned findings are KNOWN FINDING and pass the gate",
          known.returncode == 0 and "gate/spec-invariants/gtp_linear_resume_tp2_gtp_change" in found and len(found) >= 4,
          f"rc={known.returncode} {found}")
    pins = os.path.join(work, "pins")
    shutil.copytree(corpus, pins)
    r2 = os.path.join(pins, "findings", "R2-gtp-linear-resume-tp2-gtp-change.reference.finding")
    text = open(r2).read()
    open(r2, "w").write(re.sub(r"(?m)^violation: .*$", "violation: rows_misplaced weight", text))
    differs = run("gate", "--corpus", pins, "--property-cases", "5", "--json")
    c = outcomes(differs).get("gate/spec-invariants/gtp_linear_resume_tp2_gtp_change", {})
    check("a failure other than the pinned one fails the gate",
          differs.returncode == 1 and c.get("outcome") == "failed" and "not the known finding" in c.get("detail", ""),
          f"rc={differs.returncode} {c}")
    open(r2, "w").write(text)
    # A pin naming a Megatron release (a finding of that release, fixed since) holds only for a token naming it:
    # beside the pin of every version it changes nothing where the token names no release (the reference).
    release = os.path.join(pins, "findings", "R2-release.reference.finding")
    signed = "ih2:gate/spec-invariants/gtp_linear_resume_tp2_gtp_change:megatron-version=0.0.1:target=reference"
    open(release, "w").write(re.sub(r"(?m)^token: .*$", "token: %s:crc=%08x" % (signed, zlib.crc32(signed.encode())), text)
                             .replace("violation: ", "violation: rows_misplaced weight\nviolation: ", 1))
    versioned = run("gate", "--corpus", pins, "--property-cases", "5", "--json")
    c = outcomes(versioned).get("gate/spec-invariants/gtp_linear_resume_tp2_gtp_change", {})
    check("a release's pin does not hold for another version",
          versioned.returncode == 0 and c.get("outcome") == "known finding" and "R2-release" not in c.get("known_finding", ""),
          f"rc={versioned.returncode} {c}")
    os.remove(release)
    with open(os.path.join(pins, "findings", "stale.reference.finding"), "w") as f:
        f.write("token: ih1:gate/spec-invariants/optimizer_resume_tp1_gtp_change:target=reference\n"
                "reason: a finding that no longer reproduces\nexpect: anything\n")
    stale = run("gate", "--corpus", pins, "--property-cases", "5")
    check("a pinned finding that no longer reproduces is reported STALE",
          stale.returncode == 0 and "STALE FINDING spec invariants: optimizer_resume_tp1_gtp_change" in stale.stdout,
          f"rc={stale.returncode} {stale.stdout[-400:]}")
    with open(os.path.join(pins, "findings", "stale.reference.finding"), "w") as f:
        f.write("token: ih1:gate/spec-invariants/optimizer_resume_tp1_gtp_change:target=reference\nreason: r\n")
    check("a known finding without violation: or expect: lines is refused",
          run("gate", "--corpus", pins, "--property-cases", "5").returncode == 2)

    clean = run("gate", "--require-all", "--property-cases", "5")
    check("the reference runs every check", clean.returncode == 0, clean.stdout[-500:])
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"{checks_run - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
