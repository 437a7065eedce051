"""The ops' request reading and answer building (ops/), without Megatron: a GTP factory's fields, load_state's
row codes and request tree, integrity's one problem per kind and key, model_dump's refusals and its answers kept
on the op context."""

import types

import pytest

from megatron_adapter.errors import BadRequest, OpError
from megatron_adapter.ops import gtp_world_cases as cases
from megatron_adapter.ops import integrity, load_state, model_dump
from megatron_adapter.ops.context import OpContext

GTP = {"key": "decoder.layers.0.mixer.in_proj.weight", "sections": [2, 2], "names": ["z", "x"], "tp_size": 2,
       "tp_rank": 1, "gtp_size": 2, "gtp_rank": 0, "pad_for_alignment": 16, "cols": 2}


def test_a_gtp_factorys_fields_are_checked():
    p = cases.gtp_params(GTP)
    assert (p["design"], p["dtype"], p["tp_rank"]) == ("gather", "float32", 1)
    assert cases.design({"design": "shard_split"}) == "shard-split"
    for bad, needle in ((dict(GTP, key="w"), "in_proj.weight"), (dict(GTP, sections=[2]), "one per name"),
                        (dict(GTP, tp_rank=2), "out of range"), (dict(GTP, design="split"), "design must be")):
        with pytest.raises(BadRequest, match=needle):
            cases.gtp_params(bad)
    with pytest.raises(OpError) as err:
        cases.gtp_params(dict(GTP, tp_size=8, gtp_size=8))
    assert err.value.kind == "unsupported"


def test_mamba_is_named_by_its_mixer_or_its_layout():
    assert cases.is_mamba({"mixer": "mamba"}) and cases.is_mamba({"names": ["z", "x", "B", "C", "dt"]})
    assert not cases.is_mamba({"names": ["z", "V0"]})


def test_without_the_candidate_or_the_prs_factory_the_shard_split_design_says_why():
    M = types.SimpleNamespace(candidate={}, gdp=None, ssm_utils=None, gtp=None)
    assert "not in this Megatron" in cases.shard_split_reason(M)
    assert cases.shard_split_reason(types.SimpleNamespace(candidate={"applied": True})) is None


def test_stored_rows_become_codes_and_come_back_as_blocks():
    rows = load_state._StoredRows()
    codes = rows.codes([[500, 3, 2], [0, 0, 1], [7, 0, 1]], "chunks[0]")
    from megatron_adapter.worlds.worker_context import decode_rows
    assert rows.blocks(decode_rows(codes)) == [[500, 3, 2], [0, 0, 1], [7, 0, 1]]
    assert rows.tree(["dict", [["w", ["tensor", [2, 2], decode_rows(codes[:2])]], ["v", ["value", 1]]]]) == \
        ["dict", [["w", ["tensor", [2, 2], [[500, 3, 2]]]], ["v", ["value", 1]]]]
    with pytest.raises(OpError, match="a row no stored chunk holds"):
        rows.blocks([(42, 0)])
    with pytest.raises(BadRequest, match="a block is"):
        rows.codes([[1, 2]], "chunks[1]")


def test_a_box_stored_by_two_writers_is_stored_once():
    chunk = {"key": "w", "global_shape": [2, 2], "global_offset": [0, 0], "local_shape": [2, 2],
             "data": {"blocks": [[500, 0, 2]]}}
    chunks = load_state._stored_chunks({"chunks": [chunk, dict(chunk, data={"blocks": [[600, 0, 2]]})]},
                                       load_state._StoredRows())
    assert len(chunks) == 1 and len(chunks[0]["codes"]) == 2


def test_a_request_trees_gtp_factories_share_one_layout_and_one_rank():
    ctx = types.SimpleNamespace(M=types.SimpleNamespace(candidate={}))
    leaf = lambda **g: ["leaf", {"kind": "factory", "gtp": dict(GTP, **g)}]  # noqa: E731
    request = load_state._Request(ctx, ["dict", [["a", leaf()], ["b", ["leaf", {"kind": "local", "value": 1}]]]])
    assert request.tree[1][0] == ["a", ["leaf", {"kind": "factory", "factory_id": 0}]]
    assert request.asked_rank() == (1, 0) and request.world_layout()["gtp_size"] == 2
    with pytest.raises(BadRequest, match="share one \\(T, G\\) layout"):
        load_state._Request(ctx, ["list", [leaf(), leaf(tp_size=1, tp_rank=0)]])
    with pytest.raises(BadRequest, match="one \\(t, g\\) rank"):
        load_state._Request(ctx, ["list", [leaf(), leaf(tp_rank=0)]]).asked_rank()
    with pytest.raises(BadRequest, match="a request node is"):
        load_state._Request(ctx, ["tuple", []])
    with pytest.raises(OpError) as err:
        load_state._Request(ctx, ["leaf", {"kind": "factory", "factory": "swiglu"}])
    assert err.value.kind == "unsupported"


def test_integrity_keeps_one_problem_per_kind_and_key():
    problems = integrity._Problems()
    problems.add("hole", "w", "Megatron's access counter", [1, 0, 1])
    problems.add("hole", "w", "DCP: the same hole", [])
    problems.add("overlap", "w", "twice", [2])
    assert problems.rows == [{"kind": "hole", "key": "w", "message": "w: Megatron's access counter", "ranks": [0, 1]},
                             {"kind": "overlap", "key": "w", "message": "w: twice", "ranks": [2]}]


MODEL = {f: 1 for f in model_dump._FIELDS} | {"model": "gpt", "rank": 0, "optimizer": False}


class _Pool:
    """The op context's worlds, as model_dump sees them: one world whose task answers every rank."""

    def __init__(self, answers):
        self.answers, self.runs = answers, 0

    def get(self, tp, gtp, dp):
        pool = self

        class World:
            def run(self, task, req):
                pool.runs += 1
                return pool.answers
        return World()


def test_model_dump_refuses_a_bad_request_before_any_world():
    ctx = OpContext(types.SimpleNamespace())
    for req, needle in (({"model": "gpt"}, "model_dump lacks"), (dict(MODEL, mixer="x"), "mixer must be"),
                        (dict(MODEL, rank=1), "outside the world"), (dict(MODEL, optimizer_kind="x"), "optimizer_kind")):
        with pytest.raises(BadRequest, match=needle):
            model_dump.model_dump(ctx, req)
    with pytest.raises(OpError) as err:
        model_dump.model_dump(ctx, dict(MODEL, tp=16))
    assert err.value.kind == "unsupported"


def test_model_dump_keeps_every_ranks_answer_on_the_op_context():
    ctx = OpContext(types.SimpleNamespace())
    ctx.worlds = _Pool([{"entries": ["rank 0"]}, {"unsupported": "no"}])
    req = dict(MODEL, tp=2)
    assert model_dump.model_dump(ctx, req) == {"entries": ["rank 0"]}
    with pytest.raises(OpError) as err:
        model_dump.model_dump(ctx, dict(req, rank=1))
    assert err.value.kind == "unsupported" and ctx.worlds.runs == 1  # the second rank's answer was kept
    model_dump.model_dump(ctx, dict(req, hidden=2))
    assert ctx.worlds.runs == 2 and len(ctx.model_dumps) == 1  # only the last configuration is kept
