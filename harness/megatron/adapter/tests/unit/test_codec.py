"""The codec (megatron_adapter/codec.py, errors.py): request fields and state-dict trees, without Megatron.

Plain and malformed entries never reach a Megatron constructor, so the tree building, the path
forms and every bad-input error are tested here with a stand-in namespace; the Megatron objects
themselves are tested in the venv (tests/megatron/)."""

import types

import pytest

from megatron_adapter.codec import Codec, _decoded_payload, _join, _jsonable, _wire_payload, leaves
from megatron_adapter.errors import BadRequest, is_int, boolean, field, int_list, integer, string

FAKE_TORCH = types.SimpleNamespace(float32="f32", bfloat16="bf16", Tensor=type("Tensor", (), {}))
# Megatron's classes stand in as empty types: plain entries never instantiate them.
FAKE_M = types.SimpleNamespace(torch=FAKE_TORCH, **{name: type(name, (), {}) for name in (
    "ShardedTensor", "ShardedObject", "LocalNonpersistentObject", "ShardedTensorFactory")})
CODEC = Codec(FAKE_M)


def plain(path, value):
    return {"path": path, "entry": {"kind": "plain", "value": value}}


def values(tree):
    if isinstance(tree, dict):
        return {k: values(v) for k, v in tree.items()}
    if isinstance(tree, list):
        return [values(v) for v in tree]
    return tree.value


def test_flat_keeps_paths_verbatim():
    tree = CODEC.decode([plain("a.b", 1), plain("a.c", 2)], "flat")
    assert values(tree) == {"a.b": 1, "a.c": 2}


def test_nested_splits_paths_and_digits_stay_keys():
    tree = CODEC.decode([plain("decoder.layers.0.w", 1), plain("decoder.layers.1.w", 2)], "nested")
    assert values(tree) == {"decoder": {"layers": {"0": {"w": 1}, "1": {"w": 2}}}}


def test_list_paths_make_lists_and_encode_back_as_lists():
    entries = [plain(["opt", 0, "x"], 1), plain(["opt", 1, "x"], 2)]
    tree = CODEC.decode(entries, "nested")
    assert values(tree) == {"opt": [{"x": 1}, {"x": 2}]}
    assert CODEC.encode(tree, CODEC.path_form) == entries  # Megatron's traversal order, the request's form


@pytest.mark.parametrize("entries,structure,needle", [
    ([plain("a", 1), plain("a", 2)], "flat", "repeated path"),
    ([plain("a.b", 1), plain("a", 2)], "nested", "repeats or encloses"),
    ([plain("", 1)], "nested", "empty path"),
    ([plain([0, "a"], 1)], "nested", "cannot start with an index"),
    ([plain(5, 1)], "flat", "path must be a string"),
    ([{"path": "a", "entry": {"kind": "blob"}}], "flat", "unknown entry kind"),
    ([{"path": "a", "entry": []}], "flat", "entry must be a JSON object"),
    ([{"path": "a"}], "flat", "lacks field 'entry'"),
    ([plain("a", 1)], "tree", "structure must be"),
    ({"a": 1}, "flat", "entries must be a list"),
])
def test_bad_trees_are_bad_requests(entries, structure, needle):
    with pytest.raises(BadRequest, match=needle):
        CODEC.decode(entries, structure)


@pytest.mark.parametrize("entry,needle", [
    ({"kind": "tensor"}, "lacks field 'key'"),
    ({"kind": "tensor", "key": "w", "global_shape": [2, "x"]}, "global_shape"),
    ({"kind": "tensor", "key": "w", "global_shape": [2], "global_offset": [1 << 63]}, "global_offset"),
    ({"kind": "tensor", "key": "w", "global_shape": [2], "global_offset": [0], "local_shape": [-1]}, "local_shape"),
    ({"kind": "object", "key": 7}, "key"),
])
def test_bad_leaves_fail_before_megatron(entry, needle):
    with pytest.raises(BadRequest, match=needle):
        CODEC.leaf(entry, "entries[0]")


def test_dtype_names():
    assert CODEC.dtype("bfloat16", "e") == "bf16"
    with pytest.raises(BadRequest, match="unknown dtype"):
        CODEC.dtype("float64", "e")  # a known name this torch lacks
    with pytest.raises(BadRequest, match="unknown dtype"):
        CODEC.dtype("complex32", "e")


def test_replica_ids():
    assert Codec.replica(3, "e") == 3 and Codec.replica([0, 1], "e") == (0, 1)
    assert Codec.replica_json((0, 1)) == [0, 1] and Codec.replica_json(2) == 2
    with pytest.raises(BadRequest, match="replica_id"):
        Codec.replica("0", "e")


def test_path_forms_and_jsonable():
    assert _join(("a", 0, "b"), "list") == ["a", 0, "b"] and _join(("a", 0, "b"), "nested") == "a.0.b"
    assert _jsonable({1: (2, [3]), "o": object}) == {"1": [2, [3]], "o": repr(object)}


def test_object_data_is_the_harness_identity_or_megatrons_own_value():
    # The identity and tensor data the codec decoded travel back as they came; anything else is the value
    # Megatron's own object carries (a DistributedOptimizer's common state), sent as {"value": ...}.
    assert _wire_payload(None) is None
    assert _wire_payload({"object": 3}) == {"object": 3}
    tensor_data = {"shape": [2], "dtype": "float32", "blocks": [[1, 0, 2]]}
    assert _wire_payload(tensor_data) == tensor_data
    assert _wire_payload({"param_groups": [{"lr": 1e-4, "betas": (0.9, 0.999)}]}) == \
        {"value": {"param_groups": [{"lr": 1e-4, "betas": [0.9, 0.999]}]}}
    assert _wire_payload({"object": "a"}) == {"value": {"object": "a"}}
    assert _wire_payload("oracle-object|k|0") == {"value": "oracle-object|k|0"}
    # Decoding gives Megatron's object the value itself, so a second pass sends back what the first did.
    for wire in ({"object": 3}, tensor_data, {"value": {"param_groups": []}}, {"value": {"value": 1}}, None):
        assert _wire_payload(_decoded_payload(wire)) == wire
    assert _decoded_payload({"value": [1, 2]}) == [1, 2]


def test_leaves_keep_a_whole_path_as_one_leaf():
    loaded = {"model": {"w": 1}, "optimizer": {"optimizer": {"param_groups": [{"lr": 2}]}, "step": 3}}
    assert dict(leaves(loaded)) == {"model.w": 1, "optimizer.optimizer.param_groups.0.lr": 2, "optimizer.step": 3}
    whole = dict(leaves(loaded, whole=frozenset({"optimizer.optimizer"})))
    assert whole == {"model.w": 1, "optimizer.optimizer": {"param_groups": [{"lr": 2}]}, "optimizer.step": 3}


def test_request_fields():
    assert is_int(5) and not is_int(True) and not is_int(1 << 63) and is_int(-(1 << 63))
    assert integer({"n": 4}, "n", minimum=1) == 4
    with pytest.raises(BadRequest, match="n"):
        integer({"n": 0}, "n", minimum=1)
    with pytest.raises(BadRequest):
        integer({"n": True}, "n")
    assert integer({"n": None}, "n", nullable=True) is None
    assert int_list([1, 2], "x") == [1, 2]
    with pytest.raises(BadRequest):
        int_list([1, 2.5], "x")
    assert boolean({}, "b", False) is False
    with pytest.raises(BadRequest):
        boolean({"b": 1}, "b", False)
    with pytest.raises(BadRequest, match="must be a JSON object"):
        field([], "x")
    assert string({"s": None}, "s", nullable=True) is None
    with pytest.raises(BadRequest):
        string({"s": 3}, "s")
