"""Error classification (megatron_adapter/error_kinds.py): Megatron's messages and typed failures to kinds."""

import traceback

import pytest

from megatron_adapter.error_kinds import (ELECTION_FAILURE_KINDS, LOAD_FAILURE_KINDS, _VALUE_ERROR_KINDS, classify,
                                          exception_facts, kind_of)
from megatron_adapter.errors import OpError


@pytest.mark.parametrize("needle,kind", _VALUE_ERROR_KINDS)
def test_every_value_error_text_has_its_kind(needle, kind):
    err = classify(ValueError(f"prefix {needle} suffix"))
    assert (err.kind, err.extra.get("exception_type")) == (kind, "ValueError")


def test_out_of_range_segment_is_not_taken_for_the_divisibility_rule():
    # Megatron's out-of-range text also mentions "pipe-delimited segments": the table's order decides.
    err = classify(ValueError("Pipeline segment index 3 is out of range for 2 pipe-delimited segments"))
    assert err.kind == "segment_out_of_range"


def test_a_text_only_counts_for_value_error():
    assert classify(RuntimeError("is not a valid layer symbol")).kind == "unknown"


def test_type_kinds_given_by_the_op():
    assert classify(AssertionError("x"), {AssertionError: "split_assertion"}).kind == "split_assertion"
    assert classify(KeyError("x"), {LookupError: "invalid_symbol"}).kind == "invalid_symbol"  # by base class


def test_unknown_carries_type_and_message():
    err = classify(TypeError("bad thing"))
    assert err.kind == "unknown" and err.message == "TypeError: bad thing"


def test_an_op_error_passes_through():
    original = OpError("too_large", "m")
    assert classify(original) is original


# Stand-ins named like the real raisers: kind_of reads type names and the raising function's name.
class CheckpointingException(Exception):
    pass


class CheckpointException(BaseException):
    """Like torch DCP's: each rank's failure as (exception, StackSummary)."""

    def __init__(self, failures):
        super().__init__("wrapped")
        self.failures = failures


class MissingKey(KeyError):
    pass


def _validate_global_shapes():
    raise CheckpointingException("Global shape mismatch for loaded (4, 2) and expected (6, 2)")


def create_default_local_load_plan():
    raise RuntimeError("Missing key in checkpoint state_dict: w.")


def gtp_replica_rank():
    raise RuntimeError("GTP distributed checkpointing needs the gtp_remat-excluded DP x CP group")


def somewhere_else():
    raise RuntimeError("Missing key in checkpoint state_dict: w.")  # same text, another raiser


def facts_of(fn, wrap=False):
    try:
        fn()
    except BaseException as exc:  # noqa: BLE001
        if not wrap:
            return exception_facts(exc)
        inner = (exc, traceback.extract_tb(exc.__traceback__))
        try:
            raise CheckpointException({1: inner})
        except CheckpointException as outer:
            return exception_facts(outer)


def test_facts_name_every_base_and_the_raising_function():
    facts = facts_of(lambda: (_ for _ in ()).throw(MissingKey("k")))
    assert facts[0]["types"][:3] == ["MissingKey", "KeyError", "LookupError"]
    assert facts_of(_validate_global_shapes)[0]["raised_in"] == "_validate_global_shapes"


def test_facts_list_the_failures_dcp_wraps():
    facts = facts_of(create_default_local_load_plan, wrap=True)
    assert facts[0]["types"][0] == "CheckpointException"
    assert facts[1] == {"types": ["RuntimeError", "Exception", "BaseException", "object"],
                        "raised_in": "create_default_local_load_plan"}


@pytest.mark.parametrize("fn,wrap,kind", [
    (_validate_global_shapes, False, "global_shape_mismatch"),
    (_validate_global_shapes, True, "global_shape_mismatch"),
    (create_default_local_load_plan, True, "load_not_covered"),
    (lambda: (_ for _ in ()).throw(MissingKey("k")), True, "load_not_covered"),
    (somewhere_else, True, None),  # the message alone decides nothing
    (gtp_replica_rank, False, None),
])
def test_load_failure_kinds(fn, wrap, kind):
    assert kind_of(facts_of(fn, wrap), LOAD_FAILURE_KINDS) == kind


def test_election_failure_kind_needs_the_raiser():
    assert kind_of(facts_of(gtp_replica_rank), ELECTION_FAILURE_KINDS) == "gtp_replica_group_unknown"
    assert kind_of(facts_of(somewhere_else), ELECTION_FAILURE_KINDS) is None
    assert kind_of(None, ELECTION_FAILURE_KINDS) is None  # a reply without facts


def _traceback_of(call):
    try:
        call()
    except Exception as exc:  # noqa: BLE001
        return exc.__traceback__
    raise AssertionError("the call did not raise")


def test_a_failure_in_the_harness_own_code_never_left_it():
    # A harness call with the wrong arguments (a TypeError raised at the call, in this adapter's code).
    from megatron_adapter.roundtrip import failures as rt
    tb = _traceback_of(lambda: rt.megatron_frame())
    assert rt.never_left_the_harness(tb)
    assert rt.megatron_frame(tb) is None  # the adapter's own files are not Megatron's, though under megatron/


def test_a_traceback_carried_in_the_message_names_where_megatron_raised():
    # DCP reraises a rank's failure as a CheckpointException: its own traceback ends in Megatron's load call,
    # the rank's is text in its message, and the deepest Megatron frame there is where Megatron refused.
    from megatron_adapter.roundtrip import failures as rt
    tb = _traceback_of(lambda: rt.megatron_frame())
    carried = ('CheckpointException ranks:dict_keys([0]) Traceback (most recent call last): (RANK 0) '
               'File "/venv/torch/distributed/checkpoint/utils.py", line 194, in reduce_scatter local_data = ... '
               'File "/src/megatron/core/dist_checkpointing/strategies/torch.py", line 546, in create_local_plan ... '
               'File "/src/megatron/core/dist_checkpointing/strategies/torch.py", line 517, in _validate_global_shapes '
               'raise CheckpointingException(_msg)')
    assert rt.megatron_frame(tb, carried) == "megatron/core/dist_checkpointing/strategies/torch.py:517 in _validate_global_shapes"
    assert rt.megatron_frame(tb, "no traceback here") is None


def test_a_failure_inside_other_code_left_the_harness():
    import json
    from megatron_adapter.roundtrip import failures as rt
    tb = _traceback_of(lambda: json.loads("{"))  # raised inside the standard library, as inside Megatron
    assert not rt.never_left_the_harness(tb)


def test_mutants_stand_in_for_megatron():
    import os
    from megatron_adapter.roundtrip import failures as rt
    from megatron_adapter.mutants import retarget
    assert not rt.harness_own(retarget.__file__)
    assert not rt.harness_own(os.path.join(os.path.dirname(retarget.__file__), os.pardir, os.pardir, "candidates",
                                           "shard_split.py"))
    assert rt.harness_own(rt.__file__)
