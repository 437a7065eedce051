#!/usr/bin/env python3
"""What the gate's reports show: a verdict line whose counts are the per-check outcomes of the JSON
report (summary.md's headline too); under a planted tiling bug, a picture of the target's own tiling
beside the reference's with its holes and overlaps marked, linked from summary.md and JUnit; and a
check that never ran shown with its reason only (no minimal case, no REPRO line), also under
--require-all. Usage: run_pytest.sh report_content_test.py --cli INTEROP_HARNESS"""
import json
import os
import re
import xml.etree.ElementTree as ElementTree

import pytest

WORDS = {"failed": "failed", "passed": "passed", "not run": "not_run", "known finding": "known_finding",
         "known findings": "known_finding", "harness error": "harness_error", "harness errors": "harness_error",
         "timeout": "timeout", "timeouts": "timeout", "stale finding": "stale", "stale findings": "stale"}


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


def gate_reports(folder, result, expect_rc):
    """Checks the verdict line against report.json and summary.md; returns (report, summary, junit)."""
    assert result.returncode == expect_rc, result.stderr[-400:]
    last = result.stdout.rstrip("\n").splitlines()[-1]
    with open(os.path.join(folder, "report.json")) as f:
        report = json.load(f)
    with open(os.path.join(folder, "summary.md")) as f:
        summary = f.read()
    junit = ElementTree.parse(os.path.join(folder, "junit.xml")).getroot()
    counts = verdict_counts(last)
    assert counts is not None, f"the verdict line carries its counts: {last!r}"
    assert counts == outcome_counts(report), f"{last!r} vs {outcome_counts(report)}"
    assert report.get("verdict_line") == last
    assert all(report["counts"].get(k.replace("_", " "), 0) == v for k, v in outcome_counts(report).items()
               if k != "stale")
    assert summary.splitlines()[0].endswith(last[last.index(" ("):]), summary.splitlines()[0]
    return report, summary, junit


def panels_of(svg):
    return dict(re.findall(r"<g class='(reference|target)-panel'>(.*?)</g>", svg, re.S))


def test_a_clean_gates_reports_agree_and_hold_no_picture(run, tmp_path):
    gate_reports(str(tmp_path), run("gate", "--property-cases", "5", "--report", str(tmp_path)), 0)
    assert not [f for f in os.listdir(tmp_path) if f.endswith(".svg")]


@pytest.fixture(scope="module")
def planted(run, tmp_path_factory):
    """A planted tiling bug: TP rank t's GTP pieces lose their t*s_j offset term."""
    folder = str(tmp_path_factory.mktemp("mutant"))
    mutant = run("gate", "--mutant", "gtp_offset_no_tp_term", "--property-cases", "5", "--report", folder)
    report, summary, junit = gate_reports(folder, mutant, 1)
    return folder, report, summary, junit, [c for c in report["checks"] if c["outcome"] == "failed" and "picture" in c]


def test_each_failing_tiling_picture_is_drawn_and_linked(planted):
    folder, report, summary, junit, pictured = planted
    assert pictured, [c["name"] for c in report["checks"] if c["outcome"] == "failed"]
    for c in pictured:
        picture = c["picture"]
        path = os.path.join(folder, picture)
        assert os.path.dirname(picture) == "" and os.path.isfile(path), picture
        with open(path) as f:
            svg = f.read()
        panels = panels_of(svg)
        assert set(panels) == {"reference", "target"} and "target: mutant:gtp_offset_no_tp_term" in svg
        assert not rects(panels.get("reference", ""), "class='(?:hole|overlap)'"), "the reference's tiling is whole"
        assert f"]({picture})" in summary
        case = [t for t in junit.iter("testcase") if t.attrib["name"] == c["title"]]
        failure = case[0].find("failure") if case else None
        assert failure is not None and picture in failure.attrib["message"] and picture in (failure.text or "")
    other = [c for c in report["checks"] if "picture" in c and c not in pictured]
    assert not other, "only failures have pictures"


def test_the_tiling_picture_shows_the_targets_own_pieces_with_its_holes_and_overlaps(planted):
    folder, pictured = planted[0], planted[4]
    tiling = [c for c in pictured if c["title"] == "gtp_pieces_tile_chunks"]
    assert len(tiling) == 1
    with open(os.path.join(folder, tiling[0]["picture"])) as f:
        svg = f.read()
    panels = panels_of(svg)
    target_panel, reference_panel = panels.get("target", ""), panels.get("reference", "")
    holes, overlaps = rects(target_panel, "class='hole'"), rects(target_panel, "class='overlap'")
    assert holes and overlaps and "hole: " in svg and "overlap: " in svg
    shift = float(re.search(r"<rect x='([\d.]+)'", target_panel).group(1)) - float(
        re.search(r"<rect x='([\d.]+)'", reference_panel).group(1))
    pieces = lambda panel, dx: sorted((round(float(x) - dx, 3), y, h)  # noqa: E731
                                      for x, y, h in rects(panel, "fill-opacity='0.8'"))
    assert pieces(reference_panel, 0) and pieces(target_panel, shift)
    assert pieces(reference_panel, 0) != pieces(target_panel, shift), "drawn where the target puts them"


@pytest.fixture(scope="module")
def nothing_runs(run, tmp_path_factory):
    """A Megatron checkout with none of the functions the checks call (only the modules the adapter cannot start
    without), so every check is NOT RUN there: the gate's flags against it."""
    empty = tmp_path_factory.mktemp("empty-megatron")
    for module, text in {"__init__.py": "", "core/__init__.py": "__version__ = '0.0.0+empty'\n",
                         "core/dist_checkpointing/__init__.py": "",
                         "core/dist_checkpointing/core.py": "class CheckpointingException(Exception):\n    pass\n",
                         "core/dist_checkpointing/dict_utils.py": "def nested_values(x):\n    return []\n",
                         "core/dist_checkpointing/mapping.py": "".join(
                             f"class {name}:\n    pass\n" for name in ("ShardedBase", "ShardedTensor", "ShardedObject",
                                                                     "ShardedTensorFactory", "LocalNonpersistentObject"))
                         }.items():
        path = empty / "megatron" / module
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    target = ("--target", "megatron", "--megatron-path", str(empty), "--property-cases", "1")
    folder = str(tmp_path_factory.mktemp("not-run"))
    result = run("gate", *target, "--report", folder)
    if result.returncode == 3 and "install-megatron.sh" in result.stderr:
        pytest.skip("no Megatron venv here (bash ci/install-megatron.sh): " + result.stderr[-300:])
    return target, result, folder


def test_a_check_that_never_ran_is_not_run_without_repro(nothing_runs):
    _, result, folder = nothing_runs
    report, _, _ = gate_reports(folder, result, 5)
    assert all(c["outcome"] == "not run" for c in report["checks"]), \
        [c["name"] for c in report["checks"] if c["outcome"] != "not run"][:5]
    assert "REPRO:" not in result.stdout


def test_under_require_all_a_check_that_never_ran_fails_with_its_reason_only(run, nothing_runs, tmp_path):
    required = run("gate", *nothing_runs[0], "--require-all", "--report", str(tmp_path))
    report, summary, junit = gate_reports(str(tmp_path), required, 1)
    never_ran = [c for c in report["checks"] if c.get("detail", "").startswith("--require-all: did not run")]
    assert len(never_ran) == len(report["checks"]) > 0
    assert "REPRO:" not in required.stdout
    repro_lines = "".join(line for line in required.stdout.splitlines() if line.startswith("REPRO: "))
    for c in never_ran:
        where = c["group"] + ": " + c["title"]
        assert "repro" not in c and "minimal_case" not in c, str(c)
        failed_block = required.stdout.split("FAILED " + where + "\n", 1)[-1].split("\n")
        assert not failed_block[1].lstrip().startswith("minimal case"), failed_block[1]
        assert c["name"] + ":" not in repro_lines
        case = [t for t in junit.iter("testcase") if t.attrib["name"] == c["title"]]
        text = case[0].find("failure").text if case and case[0].find("failure") is not None else ""
        assert "REPRO" not in text and "minimal case" not in text, text
        assert all("interop-harness repro" not in line for line in summary.splitlines() if c["title"] in line)


def rects(svg, attribute_text):
    return re.findall(r"<rect x='([-\d.e+]+)' y='([-\d.e+]+)' width='[-\d.e+]+' height='([-\d.e+]+)'[^>]*"
                      + attribute_text, svg)
