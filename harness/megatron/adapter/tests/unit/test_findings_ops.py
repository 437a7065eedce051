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
