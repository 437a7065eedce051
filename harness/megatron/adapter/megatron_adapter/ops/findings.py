"""Adapter ops behind the gate's spec-invariant checks that reproduce Megatron's findings
(harness/gate/gate_invariants.cc, docs/megatron-findings.md). Each runs Megatron's own code in a
gloo world (gloo_worlds.py) and answers facts; the C++ check judges them against the spec.

  gtp_fresh_retarget  finding B: a fresh GDP/Mamba layer's in_proj under GTP retargeted to a GPT
                      checkpoint; what a load hands back in place of the parameter, per rank (Mamba:
                      a real GPTModel saved, a real HybridModel retargeted, loaded and load_state_dict;
                      GDP: the stand-in mixer, until the real-model factory builds GDP layers)
  load_orderings      finding C: serialization.load and MCoreTensorAwareStateDict.to_state_dict of
                      one tree with all-padding GTP ranks, after a real save, per rank
  single_expert_load  finding A: a real GPTModel with E experts saved, a real HybridModel's own state
                      dict retargeted, loaded for real and taken by load_state_dict (one rank)

Findings R1, R2 (optimizer state across a GTP or TP change) are ops/gtp.py's optimizer_resume op.
"""

import os
import shutil
import tempfile

from megatron_adapter.errors import BadRequest, Unsupported, field, integer, str_list_field, string
from megatron_adapter.worlds import gloo_worlds


def _task_error(exc):
    return exc.op_error()


def gtp_fresh_retarget(ctx, req):
    sections = field(req, "sections")  # TP-local sections
    names = str_list_field(req, "names")
    if not isinstance(sections, list) or len(sections) != len(names) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sections):
        raise BadRequest("sections must be positive integers, one per name")
    if sum(sections) > 100_000:
        raise BadRequest("in_proj larger than 100,000 rows is beyond this op")
    tp, gtp = integer(req, "tp", minimum=1), integer(req, "gtp", minimum=1)
    # Checked here, not found out by the world's task: a checkout without retargeting cannot run
    # this op at all, which is not Megatron failing on it.
    ctx.need("interop.retarget_sharded_state_dict_to_gpt_checkpoint", "GPT->Hybrid retargeting of a fresh in_proj")
    ctx.need("interop.gpt_compatible_layer_maps", "GPT->Hybrid retargeting of a fresh in_proj")
    cols = integer(req, "cols", minimum=1)
    if cols > 64:
        raise BadRequest("cols must be at most 64")
    world = ctx.gtp.world({"tp_size": tp, "gtp_size": gtp})
    ckpt = tempfile.mkdtemp(prefix="ih-fresh-")
    payload = {"sections": sections, "names": names, "cols": cols, "dir": os.path.join(ckpt, "ckpt"),
               "pad_for_alignment": integer(req, "pad_for_alignment", minimum=0), "pattern": string(req, "pattern")}
    try:
        ranks = world.run("fresh_retarget", payload)
    except gloo_worlds.WorldTaskError as exc:
        raise _task_error(exc)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    return {"ranks": [dict(r, tp=world.coords(i)[1], gtp=world.coords(i)[2]) for i, r in enumerate(ranks)]}


def load_orderings(ctx, req):
    rows, G = integer(req, "rows", minimum=1), integer(req, "gtp_size", minimum=1)
    R, cols = integer(req, "shard_rows", minimum=1), integer(req, "cols", minimum=1)
    if G > 8 or R * G < rows or R > 4096:
        raise BadRequest("need gtp_size <= 8, shard_rows * gtp_size >= rows, shard_rows <= 4096")
    try:
        import megatron.core.dist_checkpointing.tensor_aware_state_dict  # noqa: F401
    except ImportError as exc:
        raise Unsupported(f"MCoreTensorAwareStateDict (to_state_dict) is not in this Megatron: {exc}")
    world = ctx.gtp.world({"tp_size": 1, "gtp_size": G})
    ckpt = tempfile.mkdtemp(prefix="ih-orderings-")
    try:
        # to_state_dict's nvidia_resiliency_ext guard is lifted by the worlds' patches
        # (patches/table.py, docs/megatron-patches.md); without it to_state_dict answers ImportError.
        out = world.run("ordering", {"rows": rows, "shard_rows": R, "cols": cols, "dir": os.path.join(ckpt, "ckpt")})
    except gloo_worlds.WorldTaskError as exc:
        raise _task_error(exc)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
    ranks = []
    for r in out:
        rank = {}
        for order in ("serialization_load", "to_state_dict"):
            x = r[order]
            rank[order] = ({"ok": True, "rows": [None if c is None else list(c) for c in x["rows"]], "keys": x["keys"]}
                           if x.get("ok") else {"ok": False, "error": x["error"], "frame": x.get("frame")})
        ranks.append(rank)
    return {"ranks": ranks}


def single_expert_load(ctx, req):
    experts = integer(req, "experts", minimum=1)
    if experts > 64:
        raise BadRequest("experts must be at most 64")
    if getattr(ctx.M, "interop", None) is None:
        raise Unsupported("gpt_checkpoint_interop (GPT->Hybrid retargeting) is not in this Megatron")
    # The worlds apply the GTP patches at start-up, so a Megatron without GTP has none (unsupported).
    world = ctx.gtp.world({"tp_size": 1, "gtp_size": 1})
    ckpt = tempfile.mkdtemp(prefix="ih-experts-")
    try:
        return world.run("single_expert", {"experts": experts, "pattern": string(req, "pattern"),
                                           "dir": os.path.join(ckpt, "ckpt")})[0]
    except gloo_worlds.WorldTaskError as exc:
        raise _task_error(exc)
    finally:
        shutil.rmtree(ckpt, ignore_errors=True)
