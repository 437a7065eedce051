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


def disagrees(case):
    """Whether a printed case shows a disagreement (a known finding or a new one)."""
    return (case["case"] == "experts" and "load_error" in case) \
        or (case["case"] == "fresh" and any(r.get("copy_into_param", "ok") != "ok" for r in case["ranks"])) \
        or (case["case"] == "ordering" and any(not r["to_state_dict"]["ok"] for r in case["ranks"])) \
        or (case["case"] == "gtp1" and case["megatron_entry"]["local_shape"] != case["reference_entry"]["local_shape"])


EXPECTED_KNOWN = {"B", "C", "A"}  # G1 was the reference's, fixed in commit 6310be3


def main():
    warnings.filterwarnings("ignore")
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--megatron-path", required=True)
    ap.add_argument("--expect-known", action="store_true")
    ap.add_argument("what", nargs="?", default="all", choices=["fresh", "ordering", "experts", "gtp1", "all"])
    args = ap.parse_args()
    from megatron_adapter.megatron_import import load_megatron
    from megatron_adapter.worlds import gloo_worlds
    from megatron_adapter.ops.context import OpContext
    from megatron_adapter.registry import OPS
    M = load_megatron(args.megatron_path)
    gloo_worlds.set_megatron(M)
    ctx = OpContext(M)
    found = False
    verdicts = {"new": 0, "known": set()}

    def show(obj):
        print(json.dumps(obj), flush=True)
        if not args.expect_known:
            return
        if not disagrees(obj):
            return
        kid = known_finding(obj)
        if kid:
            verdicts["known"].add(kid)
            print(f"KNOWN {kid}: {obj['case']}", flush=True)
        else:
            verdicts["new"] += 1
            print(f"NEW disagreement: {json.dumps(obj)[:400]}", flush=True)

    if args.what in ("fresh", "all"):
        for mixer, (sections, names) in (("gdp", ([10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2], GDP_NAMES)), ("mamba", MAMBA)):
            world = gloo_worlds.get_world(1, 2)
            with tempfile.TemporaryDirectory(prefix="ih-fresh-") as tmp:
                r = world.run("fresh_retarget", {"sections": sections, "names": names, "cols": 2, "pad_for_alignment": 16,
                                                 "pattern": "M*-", "dir": os.path.join(tmp, "ckpt")})
            found |= any(x.get("copy_into_param", "ok") != "ok" for x in r)
            show({"case": "fresh", "mixer": mixer, "tp": 1, "gtp": 2, "pad_for_alignment": 16, "pattern": "M*-",
                  "ranks": r})
    if args.what in ("ordering", "all"):
        world = gloo_worlds.get_world(1, 4)
        with tempfile.TemporaryDirectory(prefix="ih-order-") as tmp:
            r = world.run("ordering", {"rows": 6, "shard_rows": 16, "cols": 2, "assume_nvrx": True,
                                       "dir": os.path.join(tmp, "ckpt")})
        found |= any(not x["to_state_dict"]["ok"] for x in r)
        show({"case": "ordering", "rows": 6, "gtp": 4, "shard_rows": 16,
              "ranks": [{k: v for k, v in x.items() if k != "serialization_load" or not v.get("ok")} | (
                  {"serialization_load": "ok"} if x["serialization_load"].get("ok") else {}) for x in r]})
    if args.what in ("experts", "all"):
        world = gloo_worlds.get_world(1, 1)
        for experts in (1, 2):
            with tempfile.TemporaryDirectory(prefix="ih-e1-") as tmp:
                r = world.run("single_expert", {"experts": experts, "pattern": "*E*E",
                                                "dir": os.path.join(tmp, "ckpt")})[0]
            found |= "load_error" in r
            show({"case": "experts", "experts": experts, "pattern": "*E*E", **r})
    if args.what in ("gtp1", "all"):
        sections, names = [1, 1, 1, 1, 1, 1], ["z", "V0", "K0", "Q", "b0", "a"]
        r = OPS["gtp_param_entry"].handler(ctx, {"key": "decoder.layers.0.mixer.in_proj.weight", "sections": sections,
                                    "names": names, "tp_size": 1, "tp_rank": 0, "gtp_size": 1, "gtp_rank": 0,
                                    "pad_for_alignment": 16, "cols": 1, "dtype": "bfloat16", "shard_storage": 1})
        e = r["entry"]
        # The reference's entry at G = 1 (gtp_weight_padding: a one-rank GTP group is not padded).
        reference = {"local_shape": [6, 1], "global_shape": [6, 1], "allow_shape_mismatch": False}
        found |= e["local_shape"] != reference["local_shape"]
        show({"case": "gtp1", "D": 6, "pad_for_alignment": 16, "megatron_entry": {k: e[k] for k in (
            "local_shape", "global_shape", "allow_shape_mismatch")}, "reference_entry": reference})
    gloo_worlds.close_all()
    if args.expect_known:
        ran = {"fresh": {"B"}, "ordering": {"C"}, "experts": {"A"}, "gtp1": set()}
        expected = EXPECTED_KNOWN if args.what == "all" else ran[args.what]
        for kid in sorted(expected - verdicts["known"]):
            print(f"GONE {kid}: the known finding no longer reproduces (docs/megatron-findings.md)", flush=True)
        print(f"triage: {verdicts['new']} new, {len(verdicts['known'])} known", flush=True)
        return 1 if verdicts["new"] else 0
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
