#!/usr/bin/env python3
"""What the gate's reports show: a verdict line whose counts are the per-check outcomes of the JSON
report (summary.md's headline too); under a planted tiling bug, a picture of the target's own tiling
beside the reference's with its holes and overlaps marked, linked from summary.md and JUnit; and a
check that never ran shown with its reason only (no minimal case, no REPRO line), also under
--require-all. Usage: report_content_test.py INTEROP_HARNESS"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ElementTree

cli = sys.argv[1]
failures = []
WORDS = {"failed": "failed", "passed": "passed", "not run": "not_run", "known finding": "known_finding",
         "known findings": "known_finding", "harness error": "harness_error", "harness errors": "harness_error",
         "timeout": "timeout", "timeouts": "timeout", "stale finding": "stale", "stale findings": "stale"}


def run(*args, timeout=600):
    return subprocess.run([cli, *args], capture_output=True, text=True, timeout=timeout)


def check(name, condition, detail=""):
    print(("ok   " if condition else "FAIL ") + name + ("" if condition else ": " + detail))
    if not condition:
        failures.append(name)


def verdict_counts(line):
    """{"passed": 58, "not_run": 15, ...} from "gate: PASSED (58 passed, 15 not run, ...)"."""
    match = re.fullmatch(r"gate: (PASSED|FAILED|NOTHING RAN|NO VERDICT \(\d\)) \((.*)\)", line)
    if not match:
        return None
    counts = {}
    for part in match.group(2).split(", "):
        number, word = part.split(" ", 1)
        counts[WORDS[word]] = int(number)
    return counts


def outcome_counts(report):
    """The same counts, from the JSON report's checks (zero counts left out, passed always kept)."""
    counts = {"passed": 0}
    for c in report["checks"]:
        outcome = c["outcome"].replace(" ", "_")
        counts[outcome] = counts.get(outcome, 0) + 1
        if outcome == "passed" and c.get("detail"):
            counts["stale"] = counts.get("stale", 0) + 1
    return counts


def gate_reports(name, folder, result, expect_rc):
    """Checks the verdict line against report.json and summary.md; returns (report, summary, junit)."""
    check(f"{name}: exit code", result.returncode == expect_rc, f"rc={result.returncode} {result.stderr[-400:]}")
    last = result.stdout.rstrip("\n").splitlines()[-1]
    report = json.load(open(os.path.join(folder, "report.json")))
    summary = open(os.path.join(folder, "summary.md")).read()
    junit = ElementTree.parse(os.path.join(folder, "junit.xml")).getroot()
    counts = verdict_counts(last)
    check(f"{name}: the verdict line carries its counts", counts is not None, repr(last))
    check(f"{name}: the verdict line's counts are the JSON report's outcomes",
          counts == outcome_counts(report), f"{last!r} vs {outcome_counts(report)}")
    check(f"{name}: report.json has the verdict line", report.get("verdict_line") == last,
          f"{report.get('verdict_line')!r} vs {last!r}")
    check(f"{name}: report.json's counts agree", all(report["counts"].get(k.replace("_", " "), 0) == v
                                                     for k, v in outcome_counts(report).items() if k != "stale"))
    check(f"{name}: summary.md's headline has the same counts",
          summary.splitlines()[0].endswith(last[last.index(" ("):]), summary.splitlines()[0])
    return report, summary, junit


def rects(svg, attribute_text):
    return re.findall(r"<rect x='([-\d.e+]+)' y='([-\d.e+]+)' width='[-\d.e+]+' height='([-\d.e+]+)'[^>]*"
                      + attribute_text, svg)


work = tempfile.mkdtemp(prefix="ih-report-content-")
try:
    clean_dir, mutant_dir, required_dir = (os.path.join(work, d) for d in ("clean", "mutant", "required"))
    clean = run("gate", "--property-cases", "5", "--report", clean_dir)
    gate_reports("clean gate", clean_dir, clean, 0)
    check("clean gate: no picture without a failure", not [f for f in os.listdir(clean_dir) if f.endswith(".svg")])

    # A planted tiling bug: TP rank t's GTP pieces lose their t*s_j offset term.
    mutant = run("gate", "--mutant", "gtp_offset_no_tp_term", "--property-cases", "5", "--report", mutant_dir)
    report, summary, junit = gate_reports("gtp_offset_no_tp_term", mutant_dir, mutant, 1)
    pictured = [c for c in report["checks"] if c["outcome"] == "failed" and "picture" in c]
    check("the failing tiling check has a picture", len(pictured) > 0,
          str([c["name"] for c in report["checks"] if c["outcome"] == "failed"]))
    for c in pictured:
        picture = c["picture"]
        path = os.path.join(mutant_dir, picture)
        check(f"{picture}: a file in the report folder", os.path.dirname(picture) == "" and os.path.isfile(path))
        svg = open(path).read() if os.path.isfile(path) else ""
        panels = dict(re.findall(r"<g class='(reference|target)-panel'>(.*?)</g>", svg, re.S))
        check(f"{picture}: draws the reference beside the target",
              set(panels) == {"reference", "target"} and "target: mutant:gtp_offset_no_tp_term" in svg)
        check(f"{picture}: the reference's tiling has no hole and no overlap",
              not rects(panels.get("reference", ""), "class='(?:hole|overlap)'"))
        check(f"{picture}: linked from summary.md", f"]({picture})" in summary)
        case = [t for t in junit.iter("testcase") if t.attrib["name"] == c["title"]]
        failure = case[0].find("failure") if case else None
        check(f"{picture}: linked from the JUnit failure message",
              failure is not None and picture in failure.attrib["message"] and picture in (failure.text or ""))
    # The failing tiling check: the mutant's pieces, not the reference's, with its holes and overlaps.
    tiling = [c for c in pictured if c["title"] == "gtp_pieces_tile_chunks"]
    check("the tiling check gtp_pieces_tile_chunks fails with a picture", len(tiling) == 1)
    svg = open(os.path.join(mutant_dir, tiling[0]["picture"])).read() if tiling else ""
    panels = dict(re.findall(r"<g class='(reference|target)-panel'>(.*?)</g>", svg, re.S))
    target_panel, reference_panel = panels.get("target", ""), panels.get("reference", "")
    holes, overlaps = rects(target_panel, "class='hole'"), rects(target_panel, "class='overlap'")
    check("tiling picture: the target's holes and overlaps are marked", holes and overlaps,
          f"{len(holes)} holes {len(overlaps)} overlaps")
    check("tiling picture: its legend lists them", "hole: " in svg and "overlap: " in svg)
    shift = float(re.search(r"<rect x='([\d.]+)'", target_panel).group(1)) - float(
        re.search(r"<rect x='([\d.]+)'", reference_panel).group(1)) if target_panel and reference_panel else 0
    pieces = lambda panel, dx: sorted((round(float(x) - dx, 3), y, h) for x, y, h in rects(panel, "fill-opacity='0.8'"))
    check("tiling picture: the target's pieces are drawn where the target puts them, not where the reference does",
          pieces(reference_panel, 0) and pieces(target_panel, shift) and
          pieces(reference_panel, 0) != pieces(target_panel, shift))
    other = [c for c in report["checks"] if "picture" in c and c not in pictured]
    check("only failures have pictures", not other, str(other))

    # Checks that never ran: a Megatron checkout with none of the functions the checks call (only
    # the modules the adapter cannot start without), so every check is NOT RUN there.
    empty = os.path.join(work, "empty-megatron")
    for module, text in {"__init__.py": "", "core/__init__.py": "__version__ = '0.0.0+empty'\n",
                         "core/dist_checkpointing/__init__.py": "",
                         "core/dist_checkpointing/core.py": "class CheckpointingException(Exception):\n    pass\n",
                         "core/dist_checkpointing/dict_utils.py": "def nested_values(x):\n    return []\n",
                         "core/dist_checkpointing/mapping.py": "".join(
                             f"class {name}:\n    pass\n" for name in ("ShardedBase", "ShardedTensor", "ShardedObject",
                                                                     "ShardedTensorFactory", "LocalNonpersistentObject"))
                         }.items():
        os.makedirs(os.path.dirname(os.path.join(empty, "megatron", module)), exist_ok=True)
        open(os.path.join(empty, "megatron", module), "w").write(text)
    target = ("--target", "megatron", "--megatron-path", empty, "--property-cases", "1")
    not_run_dir = os.path.join(work, "not-run")
    not_run = run("gate", *target, "--report", not_run_dir)
    if not_run.returncode == 3 and "install-megatron.sh" in not_run.stderr:
        print("SKIP the NOT RUN checks: no Megatron venv here (bash ci/install-megatron.sh)\n" + not_run.stderr[-300:])
        sys.exit(1 if failures else 0)
    report, _, _ = gate_reports("nothing runs", not_run_dir, not_run, 5)
    check("nothing runs: every check NOT RUN", all(c["outcome"] == "not run" for c in report["checks"]),
          str([c["name"] for c in report["checks"] if c["outcome"] != "not run"][:5]))
    check("nothing runs: no REPRO line", "REPRO:" not in not_run.stdout)

    # The same checks, made failures by --require-all: still their reason only.
    required = run("gate", *target, "--require-all", "--report", required_dir)
    report, summary, junit = gate_reports("--require-all", required_dir, required, 1)
    never_ran = [c for c in report["checks"] if c.get("detail", "").startswith("--require-all: did not run")]
    check("--require-all: the checks that never ran fail", len(never_ran) == len(report["checks"]) > 0,
          f"{len(never_ran)} of {len(report['checks'])}")
    check("--require-all: no REPRO line at all", "REPRO:" not in required.stdout)
    for c in never_ran:
        where = c["group"] + ": " + c["title"]
        check(f"never ran, no repro in JSON: {where}", "repro" not in c and "minimal_case" not in c, str(c))
        failed_block = required.stdout.split("FAILED " + where + "\n", 1)[-1].split("\n")
        check(f"never ran, reason only on the console: {where}",
              not failed_block[1].lstrip().startswith("minimal case"), failed_block[1])
        check(f"never ran, no REPRO line: {where}", f"REPRO: interop-harness repro ih1:{c['name']}:" not in required.stdout
              and c["name"] + ":" not in "".join(line for line in required.stdout.splitlines()
                                                 if line.startswith("REPRO: ")))
        case = [t for t in junit.iter("testcase") if t.attrib["name"] == c["title"]]
        text = case[0].find("failure").text if case and case[0].find("failure") is not None else ""
        check(f"never ran, no REPRO in JUnit: {where}", "REPRO" not in text and "minimal case" not in text, text)
        check(f"never ran, no repro in summary.md: {where}",
              all("interop-harness repro" not in line for line in summary.splitlines() if c["title"] in line))
finally:
    shutil.rmtree(work, ignore_errors=True)

print(f"{len(failures)} failed" if failures else "all report-content checks passed")
sys.exit(1 if failures else 0)
