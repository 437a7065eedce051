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
    def _world(self, p):
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
