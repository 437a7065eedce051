"""The real-model factory, the training path's command line and the integrity op against the real Megatron (ctest
labels megatron / megatron-checkout): a model dump of every rank describes one model, Megatron's parser knows the
flags the training path writes, and Megatron's access counter and DCP's plan validation find a hole and an
overlap. Tests marked `worlds` start gloo worlds (a checkout with GTP: --megatron-path)."""

import pytest

from megatron_adapter.errors import OpError
from megatron_adapter.registry import OPS
from megatron_adapter.worlds.finding_tasks import model_request


def call(ctx, op, **req):
    return OPS[op].handler(ctx, dict(req, op=op))


def dump(ctx, rank, **changes):
    req = dict(model_request("gpt", "", 2, 8, attention_heads=2), dp=1, optimizer=False, rank=rank, **changes)
    return {e["path"]: e["entry"] for e in call(ctx, "model_dump", **req)["entries"]}


@pytest.mark.worlds
def test_a_model_dump_of_every_rank_tiles_each_tp_split_tensor(gtp_ctx):
    ranks = [dump(gtp_ctx, r, tp=2, etp=2) for r in (0, 1)]
    assert set(ranks[0]) == set(ranks[1]) and "model.embedding.word_embeddings.weight" in ranks[0]
    for path in ("model.embedding.word_embeddings.weight", "model.decoder.layers.1.self_attention.linear_qkv.weight"):
        entries = [r[path] for r in ranks]
        axis = entries[0]["prepend_axis_num"]  # the GPT layer axis a layer's entries carry first
        rows = entries[0]["local_shape"][0]
        assert entries[0]["global_shape"] == entries[1]["global_shape"] and 2 * rows == entries[0]["global_shape"][axis]
        assert [e["global_offset"][axis] for e in entries] == [0, rows], path


@pytest.mark.worlds
def test_a_model_dump_of_a_rank_outside_the_world_is_refused(gtp_ctx):
    with pytest.raises(OpError) as err:
        dump(gtp_ctx, 2, tp=2, etp=2)
    assert err.value.kind == "bad_request"


def test_megatrons_parser_knows_the_flags_the_training_path_writes(M):
    pytest.importorskip("megatron.training", reason="this Megatron has no training entry points")
    from megatron_adapter.real_models import training_path
    req = dict(model_request("gpt", "", 2, 16, attention_heads=2), gated_mlp=True, optimizer=True,
               optimizer_kind="fp32")
    known = training_path.known_flags()
    for side in ("save", "load"):
        flags = [a for a in training_path.argv(req, side, "/ckpt", 1) if a.startswith("--")]
        assert [f for f in flags if f not in known] == [], side
    assert "--no-save-optim" not in training_path.argv(req, "save", "/ckpt", 1)


def _entry(key, offset, replica=0):
    return {"kind": "tensor", "key": key, "global_shape": [4, 2], "global_offset": [offset, 0], "local_shape": [2, 2],
            "axis_fragmentations": [2, 1], "replica_id": replica, "prepend_axis_num": 0}


def test_the_integrity_report_finds_a_hole_an_overlap_and_a_missing_key(ctx):
    whole = call(ctx, "integrity_report", entries=[{"rank": 0, "entry": _entry("w", 0)},
                                                  {"rank": 1, "entry": _entry("w", 2)}], reference_keys=["w"])
    assert whole == {"ok": True, "problems": []}
    got = call(ctx, "integrity_report", entries=[{"rank": 0, "entry": _entry("w", 0)},
                                                {"rank": 1, "entry": _entry("w", 0)}], reference_keys=["w", "v"])
    kinds = {(p["kind"], p["key"]) for p in got["problems"]}
    assert not got["ok"] and {("hole", "w"), ("overlap", "w"), ("missing_key", "v")} <= kinds
    assert len(kinds) == len(got["problems"]), "one problem per kind and key"


def test_select_segment_asks_megatron_in_one_process_and_gives_torch_back(ctx):
    import torch
    before = (torch.distributed.is_initialized, torch.distributed.get_rank)
    got = call(ctx, "select_segment", pattern="M*-M*-|*-|M*-|*-", pp_rank=1, pp_size=2, vp_stage=0)
    assert got == {"layers": "*-", "offset": 6}
    assert (torch.distributed.is_initialized, torch.distributed.get_rank) == before


@pytest.mark.worlds
def test_a_worlds_workers_hold_the_gtp_flags_and_report_them(gtp_ctx):
    gtp_ctx.worlds.get(1, 2).run("ping", {})
    [world] = [w for w in call(gtp_ctx, "gtp_worlds")["worlds"] if (w["tp"], w["gtp"]) == (1, 2)]
    assert {p["name"] for p in world["patches"]} >= {"gtp_api.HAVE_GTP", "gated_delta_product.HAVE_GTP"}
    assert all(p["applied"] for p in world["patches"] if p["name"].startswith("gtp_api"))
