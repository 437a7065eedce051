"""The finding ops refuse, as unsupported, a checkout that lacks what they run (never a
megatron_error found out by a world task), without Megatron."""

import types

import pytest

from megatron_adapter.errors import OpError
from megatron_adapter.ops import findings
from megatron_adapter.ops.context import OpContext

REQ = {"sections": [4, 2], "names": ["z", "x"], "tp": 2, "gtp": 2, "cols": 2, "pad_for_alignment": 16,
       "pattern": "G-"}


class _NoWorld:
    def world(self, p):
        raise AssertionError("a world was started for a checkout that cannot run the op")


def test_fresh_retarget_without_retargeting_is_unsupported():
    ctx = OpContext(types.SimpleNamespace(interop=None, import_errors={"interop": "no gpt_checkpoint_interop"}))
    ctx._gtp = _NoWorld()
    with pytest.raises(OpError) as err:
        findings.gtp_fresh_retarget(ctx, REQ)
    assert err.value.kind == "unsupported" and "no gpt_checkpoint_interop" in err.value.message


def _raise_here():
    raise ValueError("raised by the adapter")


def test_an_exception_raised_in_the_adapter_is_the_harness_s():
    """A task that fails in the adapter's own code (an adapter file's path contains "/megatron/"
    too) names no Megatron frame and becomes harness_error; one raised elsewhere stays Megatron's."""
    from megatron_adapter.worlds import gloo_worlds, worker_context
    try:
        _raise_here()
    except ValueError as exc:
        raised = exc
    assert worker_context.raised_in_harness(raised) and worker_context.megatron_frame(raised.__traceback__) is None
    try:
        exec(compile("raise RuntimeError('raised by Megatron')", "/x/megatron/core/utils.py", "exec"))
    except RuntimeError as exc:
        raised = exc
    assert not worker_context.raised_in_harness(raised)
    assert worker_context.megatron_frame(raised.__traceback__) == "core/utils.py:1 in <module>"
    # gloo's transport failing under a group Megatron creates is the world's failure, not Megatron's
    try:
        exec(compile("raise RuntimeError('Gloo connectFullMesh failed with [pair.cc:561] Connection closed by peer')",
                     "/x/megatron/core/parallel_state.py", "exec"))
    except RuntimeError as exc:
        raised = exc
    assert worker_context.raised_in_harness(raised)
    harness = gloo_worlds.WorldTaskError(0, "ValueError", "boom", None, in_harness=True).op_error()
    megatron = gloo_worlds.WorldTaskError(0, "RuntimeError", "boom", "core/utils.py:1 in f").op_error()
    assert harness.kind == "harness_error" and "adapter's own code" in harness.message
    assert megatron.kind == "megatron_error" and megatron.extra["megatron_frame"] == "core/utils.py:1 in f"


def test_a_megatron_error_names_the_patches_not_applicable_to_the_checkout():
    from megatron_adapter.worlds import gloo_worlds
    err = gloo_worlds.WorldTaskError(0, "AssertionError", "boom", "core/ssm/gated_delta_product.py:971 in f",
                                     not_applicable=["gated_delta_product.HAVE_GTP"]).op_error()
    assert err.kind == "megatron_error" and "not applicable to this checkout" in err.message
    assert "gated_delta_product.HAVE_GTP" in err.message


def _world_failing(messages):
    """A World without processes whose task answers fail with `messages` in turn (then succeed), and
    which counts its restarts."""
    from megatron_adapter.worlds import gloo_worlds
    world = object.__new__(gloo_worlds.World)
    world.tp = world.gtp = world.dp = 1
    world.starts, world._start_args = 0, {}
    answers = list(messages)

    def run_once(task, payload, timeout):
        if answers:
            raise gloo_worlds.WorldTaskError(1, "RuntimeError", answers.pop(0), "core/parallel_state.py:1 in f")
        return ["answer"]

    def start(**kwargs):
        world.starts += 1

    world._run_once, world.close, world.__init__ = run_once, (lambda: None), start
    return world


def test_a_world_whose_gloo_transport_failed_is_started_afresh_once():
    """Gloo's transport failing under a task (a peer gone) restarts the world and runs the task once
    more; a second failure, or any other error, is reported as it is."""
    from megatron_adapter.worlds import gloo_worlds
    transport = "Gloo connectFullMesh failed with [pair.cc:561] Connection closed by peer [127.0.0.1]:7822"
    world = _world_failing([transport])
    assert gloo_worlds.World.run(world, "election", {}) == ["answer"] and world.starts == 1
    twice = _world_failing([transport, transport])
    with pytest.raises(gloo_worlds.WorldTaskError) as err:
        gloo_worlds.World.run(twice, "election", {})
    assert "connectFullMesh" in err.value.message and twice.starts == 1
    megatron = _world_failing(["AssertionError raised by Megatron"])
    with pytest.raises(gloo_worlds.WorldTaskError):
        gloo_worlds.World.run(megatron, "election", {})
    assert megatron.starts == 0
