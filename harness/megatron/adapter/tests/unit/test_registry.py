"""The ops registry (megatron_adapter/registry.py) and the server's dispatch (server.py), without Megatron."""

import inspect
import json
import os
import re
import types

import pytest

from megatron_adapter import registry, server
from megatron_adapter.registry import OPS, REQUIREMENTS

NAMESPACE = {"interop", "alloc", "validation", "ssm_utils", "gdp", "gtp", "mlp"}  # megatron_import's optional modules
DOCS = os.path.join(os.path.dirname(__file__), *[os.pardir] * 5, "docs", "adapter-protocol.md")


def test_every_op_has_a_handler_of_ctx_and_req():
    for name, op in OPS.items():
        assert list(inspect.signature(op.handler).parameters) == ["ctx", "req"], name
        assert op.handler.__module__.startswith("megatron_adapter.ops."), name


def test_needs_name_the_megatron_namespace():
    for name, op in OPS.items():
        assert op.needs is None or all(p.partition(".")[0] in NAMESPACE for p in op.needs), name


def test_hello_lists_the_declared_ops_in_table_order():
    assert list(REQUIREMENTS) == [n for n, op in OPS.items() if op.needs is not None]
    assert list(REQUIREMENTS)[:2] == ["pattern_maps", "parse_pattern"]


def test_no_op_shadows_the_servers_own():
    assert not set(OPS) & set(server.ALWAYS)


def test_every_op_is_documented():
    with open(DOCS, encoding="utf-8") as f:
        text = f.read()
    for name in OPS:
        assert re.search(rf"(^### .*\b{name}\b|`{name}`)", text, re.M), f"{name} not in docs/adapter-protocol.md"


class FakeModule(types.SimpleNamespace):
    __name__ = "fake"


def fake_server(monkeypatch, modules, broken=None):
    """A greeted Server over a stand-in Megatron namespace holding `modules` (`broken`: {module: why} of the ones
    whose import Megatron's own code failed)."""
    M = types.SimpleNamespace(broken_imports=broken or {}, import_errors={"gtp": "cannot import gtp: ImportError: no"},
                              megatron_version="x", find_gtp_split_factory=lambda: None, candidate={},
                              **{**{m: None for m in NAMESPACE}, **modules})
    monkeypatch.setattr(server, "load_megatron", lambda path: M)
    s = server.Server(None)
    s.greeted = True
    return s


def test_dispatch_goes_through_the_table(monkeypatch):
    s = fake_server(monkeypatch, {"alloc": FakeModule(parse_hybrid_pattern=1)})
    seen = []
    monkeypatch.setitem(OPS, "parse_pattern", registry.Op(lambda ctx, req: seen.append((ctx, req)) or {"x": 1},
                                                          OPS["parse_pattern"].needs))
    reply = s.reply(json.dumps({"op": "parse_pattern", "pattern": "M", "id": 9}))
    assert reply == {"ok": True, "result": {"x": 1}, "id": 9}
    assert seen[0][0] is s.ctx and seen[0][1]["pattern"] == "M"


def test_missing_needs_answer_unsupported_before_the_handler(monkeypatch):
    s = fake_server(monkeypatch, {})
    monkeypatch.setitem(OPS, "gtp_padding", registry.Op(lambda ctx, req: pytest.fail("handler ran"),
                                                        OPS["gtp_padding"].needs))
    reply = s.reply(json.dumps({"op": "gtp_padding"}))
    assert reply["ok"] is False and reply["unsupported"] is True
    assert "gtp.gtp_remat_shard_dim0" in reply["error"]["message"] and "ImportError: no" in reply["error"]["message"]
    assert "gtp_padding" in s.unsupported_reasons() and "gtp_padding" not in s.supports()


def test_an_op_needing_a_module_megatron_broke_at_import_fails_as_megatrons(monkeypatch):
    why = "cannot import gtp: NameError: name 'X' is not defined (at megatron/core/gtp.py:3 in <module>)"
    s = fake_server(monkeypatch, {}, broken={"gtp": why})
    monkeypatch.setitem(OPS, "gtp_padding", registry.Op(lambda ctx, req: pytest.fail("handler ran"),
                                                        OPS["gtp_padding"].needs))
    reply = s.reply(json.dumps({"op": "gtp_padding"}))
    assert reply["ok"] is False and not reply.get("unsupported")
    assert reply["error"]["kind"] == "megatron_error" and why in reply["error"]["message"]
    assert reply["error"]["message"].startswith("Megatron does not import: gtp_padding needs ")
    assert "gtp_padding" in s.supports() and "gtp_padding" not in s.unsupported_reasons()


def test_supports_follows_needs(monkeypatch):
    s = fake_server(monkeypatch, {"alloc": FakeModule(parse_hybrid_pattern=1, get_hybrid_layer_counts=1)})
    assert s.supports() == server.ALWAYS + ["parse_pattern", "layer_counts"]


@pytest.mark.parametrize("line,kind", [
    ("not json", "bad_request"), ("[1]", "bad_request"), ('{"x": 1}', "bad_request"),
    ('{"op": "no_such_op"}', "bad_request"),
])
def test_bad_requests(monkeypatch, line, kind):
    assert fake_server(monkeypatch, {}).reply(line)["error"]["kind"] == kind


def test_hello_first_and_without_megatron(monkeypatch):
    def fail(path):
        raise ImportError("No module named 'torch'")
    monkeypatch.setattr(server, "load_megatron", fail)
    s = server.Server(None)
    assert s.reply('{"op": "parse_pattern"}')["error"]["kind"] == "bad_request"  # hello comes first
    assert s.reply('{"op": "hello", "protocol": 2}')["error"]["kind"] == "protocol_mismatch"
    reply = s.reply('{"op": "hello", "protocol": 1}')
    assert reply["error"] == {"kind": "megatron_import", "message": "ImportError: No module named 'torch'"}


def test_a_handler_crash_is_internal_not_a_death(monkeypatch):
    s = fake_server(monkeypatch, {})
    monkeypatch.setitem(OPS, "gtp_worlds", registry.Op(lambda ctx, req: 1 / 0, None))
    assert s.reply('{"op": "gtp_worlds"}')["error"] == {"kind": "internal", "message": "ZeroDivisionError: division by zero"}
