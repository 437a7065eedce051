"""A few ops against the real Megatron, in the venv (ctest label megatron): the error kinds Megatron's
own failures get, through the registry as the server dispatches them. Tests marked `worlds` run
Megatron's checkpoint code in gloo worlds and need a checkout with GTP (--megatron-path)."""

import pytest

from megatron_adapter.errors import OpError
from megatron_adapter.registry import OPS
from megatron_adapter.roundtrip.plan import fill


def call(ctx, op, **req):
    return OPS[op].handler(ctx, dict(req, op=op))


def kind_of_failure(ctx, op, **req):
    with pytest.raises(OpError) as err:
        call(ctx, op, **req)
    return err.value.kind


def test_pattern_maps(ctx):
    got = call(ctx, "pattern_maps", pattern="M*M-")
    assert got["ok"] and got["num_gpt_layers"] == 1 and got["attention_to_gpt"] == [[1, 0]]


@pytest.mark.parametrize("op,req,kind", [
    ("layer_counts", {"pattern": "MQ"}, "invalid_symbol"),            # Megatron's ValueError text
    ("parse_pattern", {"pattern": "M*//MM"}, "mtp_not_identical"),
    ("type_maps", {"layers": "MQ"}, "invalid_symbol"),                # Megatron's KeyError, by type
])
def test_megatron_failures_get_their_kinds(ctx, op, req, kind):
    assert kind_of_failure(ctx, op, **req) == kind


def test_fill_encodes_with_the_plans_key_shift(ctx):
    torch = ctx.M.torch
    # one segment: rows [0, 2) of key 5, global shape (4, 3), offset (1, 0), no prepended axis
    t = fill(torch, [2, 3], [[0, 2, 5, [4, 3], [1, 0], 0]], "cpu", 40)
    assert t.tolist() == [[(5 << 40) + 3 * r + c for c in range(3)] for r in (1, 2)]
    assert fill(torch, [2, 3], [[0, 2, 5, [4, 3], [1, 0], 0]], "cpu", 20)[0, 0] == (5 << 20) + 3


KEY = "decoder.layers.0.mixer.in_proj.weight"
STORED = [{"key": "w", "global_shape": [8, 2], "global_offset": [0, 0], "local_shape": [8, 2], "prepend_axis_num": 0,
           "data": {"shape": [8, 2], "dtype": "float32", "blocks": [[500, 0, 8]]}}]


def tensor_leaf(key, rows):
    return ["leaf", {"kind": "tensor", "key": key, "global_shape": [rows, 2], "global_offset": [0, 0],
                     "local_shape": [rows, 2], "axis_fragmentations": [1, 1], "replica_id": 0,
                     "prepend_axis_num": 0}]


@pytest.mark.worlds
@pytest.mark.parametrize("order", ["serialization_load", "to_state_dict"])
def test_load_state_reads_back_what_was_stored(gtp_ctx, order):
    got = call(gtp_ctx, "load_state", order=order, chunks=STORED, objects=[], common={},
               request=["dict", [["w", tensor_leaf("w", 8)]]])
    assert got["tree"] == ["dict", [["w", ["tensor", [8, 2], [[500, 0, 8]]]]]]


@pytest.mark.worlds
@pytest.mark.parametrize("key,rows,kind", [
    ("w", 6, "global_shape_mismatch"),   # CheckpointingException from _validate_global_shapes
    ("v", 8, "load_not_covered"),        # a key the checkpoint lacks
])
def test_load_refusals_get_their_kinds(gtp_ctx, key, rows, kind):
    assert kind_of_failure(gtp_ctx, "load_state", order="serialization_load", chunks=STORED, objects=[], common={},
                           request=["dict", [[key, tensor_leaf(key, rows)]]]) == kind


@pytest.mark.worlds
def test_an_election_without_a_replica_group_is_gtp_replica_group_unknown(gtp_ctx):
    world = {"tp": 1, "gtp": 2, "cp": 1, "dp": 1, "etp": 1, "ep": 1, "egtp": 1}
    assert kind_of_failure(gtp_ctx, "gtp_param_entry", key=KEY, rows=8, cols=2, pad_for_alignment=0,
                           election={"world": world, "globals": None, "caller": False, "expert": False,
                                     "global_rank": 0}) == "gtp_replica_group_unknown"


GDP_SECTIONS = [20, 20, 20, 20, 6, 6, 6, 6, 4, 4, 4, 4]
GDP_NAMES = ["z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"]


def resume(ctx, module, save, load):
    side = lambda tp, gtp, pad: {"tp": tp, "gtp": gtp, "pad_for_alignment": pad}  # noqa: E731
    return call(ctx, "optimizer_resume", module=module, sections=GDP_SECTIONS, names=GDP_NAMES, cols=2,
                save=side(*save), load=side(*load))


@pytest.mark.worlds
def test_optimizer_resume_says_which_saved_row_each_loaded_row_holds(gtp_ctx):
    # At TP 1 on both sides the saved row of TP-local row x is row x of TP rank 0; rows past D = 120 are padding.
    got = resume(gtp_ctx, "gdp_in_proj", (1, 2, 16), (1, 4, 16))
    assert got["saved_keys"] == got["requested_keys"] == ["optimizer.state.exp_avg.decoder.layers.0.mixer.in_proj.weight"]
    assert sorted((r["tp"], r["gtp"]) for r in got["ranks"]) == [(0, g) for g in range(4)]
    for r in got["ranks"]:
        want = [[0, r["first_row"] + j] if r["first_row"] + j < 120 else None for j in range(len(r["exp_avg"]))]
        assert r["first_row"] == r["gtp"] * 32 and r["weight"] == r["exp_avg"] == want


@pytest.mark.worlds
def test_optimizer_resume_reports_the_keys_megatron_asks_for(gtp_ctx):
    # R1: the GTP save's per-shard exp_avg key against the GTP-1 run's split keys (a Megatron KeyError)
    got = resume(gtp_ctx, "gdp_in_proj", (1, 2, 16), (1, 1, 16))
    assert "KeyError" in got["load_error"] and "ranks" not in got
    assert len(got["requested_keys"]) == 12 and got["saved_keys"] != got["requested_keys"]


@pytest.mark.worlds
def test_optimizer_resume_reports_a_plain_linears_rows_as_loaded(gtp_ctx):
    # R2: a plain GTP linear at TP 2 across GTP 2 -> 4 loads TP rank 1's rows into TP rank 0's pad rows
    # (TP-local rows 64..127, GTP ranks 2 and 3) and zeros on TP rank 1, weight and exp_avg alike, silently
    got = resume(gtp_ctx, "linear", (2, 2, 32), (2, 4, 32))
    rank = {(r["tp"], r["gtp"]): r for r in got["ranks"]}
    for tensor in ("weight", "exp_avg"):
        assert rank[(0, 2)][tensor][:2] == [[1, 0], [1, 1]]
        assert all(row is None for g in range(4) for row in rank[(1, g)][tensor])


def test_the_segment_mutant_plants_its_bug_for_any_group_object(ctx):
    # A real model's build hands Megatron a ProcessGroup, which cannot be made again with another rank:
    # the mutant must select the wrong segment through that very object (it raised TypeError there once).
    from megatron_adapter import patches
    from megatron_adapter.mutants.sharding import segment_rank_major
    from megatron_adapter.patches.stand_ins import FakeGroup
    torch = ctx.M.torch
    select = ctx.need("alloc.select_pipeline_segment", "pipeline segment selection")

    class OpaqueGroup:  # takes no (rank, size), as torch's ProcessGroup does not
        pass

    pp, groups = OpaqueGroup(), {"tp_group": FakeGroup(0, 1), "dp_cp_group": FakeGroup(0, 1)}
    with patches.applied("one_process_ranks"):
        td = torch.distributed
        fake_rank, fake_size = td.get_rank, td.get_world_size
        td.get_rank = lambda group=None: 1 if group is pp else fake_rank(group)
        td.get_world_size = lambda group=None: 2 if group is pp else fake_size(group)
        # Four segments over PP 2 (VPP 2): PP rank 1, VP stage 0 owns segment vp*PP + pp = 1; the bug
        # reads segment pp*VPP + vp = 2.
        assert select("M|*|-|E", pp, 0, **groups) == (["*"], 1)
        assert segment_rank_major(select, ctx.M)("M|*|-|E", pp, 0, **groups) == (["-"], 2)
        assert td.get_rank(pp) == 1  # the mutant answers another rank for its one call only
