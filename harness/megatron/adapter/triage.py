#!/usr/bin/env python3
"""Reproduces the Megatron findings of docs/megatron-findings.md on real Megatron code (CPU, gloo).

Usage (under the Megatron venv's python):
  triage.py --megatron-path DIR [fresh|ordering|experts|gtp1|all]

  fresh      a fresh GDP/Mamba in_proj under GTP retargeted to a GPT checkpoint (finding b)
  ordering   serialization.load vs MCoreTensorAwareStateDict.to_state_dict with all-padding ranks (c)
  experts    one expert (E = 1): the _extra_state object key a GPT save writes vs what a retargeted
             hybrid load asks for (a); E = 2 beside it as the control
  gtp1       GTP size 1: what Megatron builds vs the reference's entry (G1, resolved: the reference
             now treats G = 1 as plain TP, so this case agrees)
Prints one JSON object per case; exits 1 when any case shows the finding, 0 when none does. R1 and R2
(optimizer state across a GTP or TP change) are the gate's spec-invariants checks optimizer_resume_* and
gtp_linear_resume_*: Megatron's own optimizer saves and loads, the harness judges every loaded row.

  --expect-known  (for CI, ctest label megatron-checkout) exit 0 when every case either holds or
                  fails exactly as a known finding of docs/megatron-findings.md (KNOWN lines); a new
                  disagreement exits 1 (NEW lines); a known finding that no longer reproduces is
                  printed as GONE (its entry can go) and exits 0.
"""

import argparse
import json
import os
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(1, HERE)

GDP_NAMES = ["z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"]
MAMBA = ([4, 4, 2, 2, 1], ["z", "x", "B", "C", "dt"])


def known_finding(case):
    """The docs/megatron-findings.md id a failing case matches, else None."""
    # B: every rank's load hands back another shape than the parameter's and it does not go in (the stand-in
    # mixer's copy_ and the real model's load_state_dict word that refusal differently).
    if case["case"] == "fresh" and all(r.get("copy_into_param", "ok") != "ok" and r.get("loaded_shape") != r.get("param_shape")
                                       for r in case["ranks"]):
        return "B"
    if case["case"] == "ordering" and all("Different dict keys" in r["to_state_dict"].get("error", "")
                                          for r in case["ranks"][1:]):
        return "C"
    if case["case"] == "experts" and case["experts"] == 1 and "Missing key" in case.get("load_error", ""):
        return "A"
    if case["case"] == "gtp1" and case["megatron_entry"]["local_shape"] != case["reference_entry"]["local_shape"]:
        return "G1"
    return None


EXPECTED_KNOWN = {"B", "C", "A"}  # G1 was the reference's, fixed in commit 6310be3


def failing(obj):
    """Whether a case shows a disagreement (a finding, known or new)."""
    case = obj["case"]
    if case == "experts":
        return "load_error" in obj
    if case == "fresh":
        return any(r.get("copy_into_param", "ok") != "ok" for r in obj["ranks"])
    if case == "ordering":
        return any(not r["to_state_dict"]["ok"] for r in obj["ranks"])
    return obj["megatron_entry"]["local_shape"] != obj["reference_entry"]["local_shape"]  # gtp1


def fresh_cases(ctx):
    for mixer, (sections, names) in (("gdp", ([10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2], GDP_NAMES)), ("mamba", MAMBA)):
        world = ctx.worlds.get(1, 2)
        with tempfile.TemporaryDirectory(prefix="ih-fresh-") as tmp:
            r = world.run("fresh_retarget", {"sections": sections, "names": names, "cols": 2, "pad_for_alignment": 16,
                                             "pattern": "M*-", "dir": os.path.join(tmp, "ckpt")})
        yield {"case": "fresh", "mixer": mixer, "tp": 1, "gtp": 2, "pad_for_alignment": 16, "pattern": "M*-",
               "ranks": r}


def ordering_cases(ctx):
    # to_state_dict's nvidia_resiliency_ext guard: the worlds' declared tensor_aware_state_dict.HAVE_NVRX patch
    world = ctx.worlds.get(1, 4)
    with tempfile.TemporaryDirectory(prefix="ih-order-") as tmp:
        r = world.run("ordering", {"rows": 6, "shard_rows": 16, "cols": 2, "dir": os.path.join(tmp, "ckpt")})
    yield {"case": "ordering", "rows": 6, "gtp": 4, "shard_rows": 16,
           "ranks": [{k: v for k, v in x.items() if k != "serialization_load" or not v.get("ok")} | (
               {"serialization_load": "ok"} if x["serialization_load"].get("ok") else {}) for x in r]}


def expert_cases(ctx):
    world = ctx.worlds.get(1, 1)
    for experts in (1, 2):
        with tempfile.TemporaryDirectory(prefix="ih-e1-") as tmp:
            r = world.run("single_expert", {"experts": experts, "pattern": "*E*E", "dir": os.path.join(tmp, "ckpt")})[0]
        yield {"case": "experts", "experts": experts, "pattern": "*E*E", **r}


def gtp1_cases(ctx):
    from megatron_adapter.registry import OPS
    sections, names = [1, 1, 1, 1, 1, 1], ["z", "V0", "K0", "Q", "b0", "a"]
    r = OPS["gtp_param_entry"].handler(ctx, {"key": "decoder.layers.0.mixer.in_proj.weight", "sections": sections,
                                             "names": names, "tp_size": 1, "tp_rank": 0, "gtp_size": 1, "gtp_rank": 0,
                                             "pad_for_alignment": 16, "cols": 1, "dtype": "bfloat16",
                                             "shard_storage": 1})
    e = r["entry"]
    # The reference's entry at G = 1 (gtp_weight_padding: a one-rank GTP group is not padded).
    reference = {"local_shape": [6, 1], "global_shape": [6, 1], "allow_shape_mismatch": False}
    yield {"case": "gtp1", "D": 6, "pad_for_alignment": 16, "megatron_entry": {k: e[k] for k in (
        "local_shape", "global_shape", "allow_shape_mismatch")}, "reference_entry": reference}


# What each case runs, and the known findings it reproduces (--expect-known).
CASES = {"fresh": (fresh_cases, {"B"}),
         "ordering": (ordering_cases, {"C"}), "experts": (expert_cases, {"A"}), "gtp1": (gtp1_cases, set())}


def judge(obj, known):
    """Prints a failing case as KNOWN (its finding added to `known`) or NEW; True when it is new."""
    if not failing(obj):
        return False
    kid = known_finding(obj)
    if kid:
        known.add(kid)
        print(f"KNOWN {kid}: {obj['case']}", flush=True)
        return False
    print(f"NEW disagreement: {json.dumps(obj)[:400]}", flush=True)
    return True


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megatron-path", required=True)
    ap.add_argument("--expect-known", action="store_true")
    ap.add_argument("what", nargs="?", default="all", choices=list(CASES) + ["all"])
    args = ap.parse_args()
    from megatron_adapter.megatron_import import load_megatron
    from megatron_adapter.ops.context import OpContext
    ctx = OpContext(load_megatron(args.megatron_path))
    found, new, known = False, 0, set()
    try:
        for what, (cases, _) in CASES.items():
            if args.what not in (what, "all"):
                continue
            for obj in cases(ctx):
                found |= failing(obj)
                print(json.dumps(obj), flush=True)
                new += args.expect_known and judge(obj, known)
    finally:
        ctx.worlds.close_all()
    if not args.expect_known:
        return 1 if found else 0
    expected = EXPECTED_KNOWN if args.what == "all" else CASES[args.what][1]
    for kid in sorted(expected - known):
        print(f"GONE {kid}: the known finding no longer reproduces (docs/megatron-findings.md)", flush=True)
    print(f"triage: {new} new, {len(known)} known", flush=True)
    return 1 if new else 0


if __name__ == "__main__":
    sys.exit(main())
