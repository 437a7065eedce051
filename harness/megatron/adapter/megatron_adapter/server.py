"""Megatron adapter: answers the interop harness's questions with Megatron-LM's own code.

JSON lines on stdin/stdout, one request per line, one reply per line (flushed); diagnostics
on stderr only. The protocol and every op are described in docs/adapter-protocol.md.

Usage: adapter.py [--megatron-path DIR] [--mutant NAME] [--candidate shard-split] [--fix to_state_dict_order]

  --megatron-path DIR  put DIR first on sys.path before importing megatron.core (a Megatron-LM
                       checkout instead of the installed megatron-core)
  --mutant NAME        apply one mutant (mutants.py) before serving, like the "mutate" op
  --candidate NAME     apply a candidate design (candidates/): "shard-split" is the harness's own
                       candidate of the pending GTP shard-split save (not Megatron's code), applied
                       only when the checkout has no factory of its own
  --fix NAME           apply a declared optional fix of Megatron's code (the patch table's family "fix")
"""

import argparse
import contextlib
import json
import os
import select
import sys

from megatron_adapter import coverage_run, mutants, patches
from megatron_adapter.errors import BadRequest, OpError, Unsupported
from megatron_adapter.megatron_import import (load_megatron, log, raised_by_megatron, require_importable,
                                              where_raised)
from megatron_adapter.ops.context import OpContext
from megatron_adapter.registry import OPS, REQUIREMENTS

PROTOCOL = 1

# Worlds left idle this long are closed (they start again on the next op that needs them): an idle
# world's ranks keep gloo threads that wake every 10 ms, and a gate leaves its adapter idle for minutes
# while its real round trips run in worlds of their own.
IDLE_CLOSE_S = 60.0


def request_lines(fd, idle_s, on_idle):
    """The lines read from fd (bytes, newline kept; the last may lack one); on_idle() runs once whenever
    no byte has come for idle_s seconds."""
    pending = bytearray()
    idle_called = False
    while True:
        newline = pending.find(b"\n")
        if newline >= 0:
            line = bytes(pending[: newline + 1])
            del pending[: newline + 1]
            yield line
            continue
        ready, _, _ = select.select([fd], [], [], None if idle_called else idle_s)
        if not ready:
            on_idle()
            idle_called = True
            continue
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            if pending:
                yield bytes(pending)
            return
        pending += chunk
        idle_called = False


def _protect_stdout():
    """Keeps the protocol channel clean: replies go to a private duplicate of fd 1, and fd 1
    itself (Python prints, C++ writes from torch) is pointed at stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


ALWAYS = ["hello", "mutants", "mutate"]


def _has(M, path):
    """Whether the namespace has `path`, or has its module only broken (Megatron's code raised importing it: the
    op is served, and fails, rather than answered unsupported)."""
    mod_name, _, attr = path.partition(".")
    if mod_name in M.broken_imports:
        return True
    mod = getattr(M, mod_name, None)
    return mod is not None and (not attr or hasattr(mod, attr))


CANDIDATES = ("shard-split",)


class Server:
    def __init__(self, megatron_path, candidate=None, fixes=()):
        self.M = None
        self.load_error = None
        self.load_error_kind = None
        self.greeted = False
        self.mutant = None
        self.fixes = []
        self.held = contextlib.ExitStack()  # what stays applied while the server serves (its fixes)
        self.ctx = None
        try:
            self.M = load_megatron(megatron_path)
            if candidate is not None:
                from candidates import shard_split
                self.M.candidate = shard_split.install(self.M)
                log("candidate:", self.M.candidate)
            if fixes:
                applied = self.held.enter_context(patches.applied("fix", only=fixes))
                self.fixes = [{"name": row["name"], "what": row["why"]} for row in applied.rows]
        except Exception as exc:  # noqa: BLE001 - reported to the harness in every reply
            self.load_error = f"{type(exc).__name__}: {exc}"
            # Megatron's own module raising at import is Megatron's failure; anything else is the environment's.
            self.load_error_kind = "megatron_error" if raised_by_megatron(exc) else "megatron_import"
            if self.load_error_kind == "megatron_error":
                self.load_error += f" (at {where_raised(exc)})"
            log("cannot import megatron.core:", self.load_error)
        if self.M is not None:
            self.ctx = OpContext(self.M)

    def close_worlds(self):
        """Every world the op context started (they start again on the next op that needs them)."""
        if self.ctx is not None:
            self.ctx.worlds.close_all()

    def supports(self):
        out = list(ALWAYS)
        for op, needs in REQUIREMENTS.items():
            if op == "gtp_split":
                if self.M.find_gtp_split_factory() is not None:
                    out.append(op)
            elif all(_has(self.M, p) for p in needs):
                out.append(op)
        return out

    def unsupported_reasons(self):
        """{op: why} for every REQUIREMENTS op this Megatron cannot serve."""
        out = {}
        have = set(self.supports())
        for op, needs in REQUIREMENTS.items():
            if op in have:
                continue
            if op == "gtp_split":
                import candidates
                out[op] = candidates.not_in_checkout_reason()
                continue
            missing = [p for p in needs if not _has(self.M, p)]
            reasons = [self.M.import_errors.get(p.split(".")[0], f"{p} missing") for p in missing]
            out[op] = f"needs {', '.join(missing)}: {'; '.join(reasons)}"
        return out

    def apply_mutant(self, name):
        if self.mutant is not None:
            raise OpError("already_mutated", f"mutant {self.mutant!r} already applied; one mutant per process")
        if name not in mutants.MUTANTS:
            raise OpError("unknown_mutant", f"no mutant {name!r}; see the mutants op")
        mutants.apply(name, self.M)
        self.mutant = name
        log("applied mutant", name)

    def handle(self, line):
        try:
            req = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"not valid JSON: {exc}")
        if not isinstance(req, dict):
            raise BadRequest("a request must be a JSON object")
        op = req.get("op")
        if not isinstance(op, str):
            raise BadRequest("request lacks a string field \"op\"")
        if isinstance(req.get("coverage_context"), str):  # the gate check this request serves (coverage_run)
            coverage_run.switch(req["coverage_context"])
        if op == "hello":
            if req.get("protocol") != PROTOCOL:
                raise OpError("protocol_mismatch", f"this adapter speaks protocol {PROTOCOL}")
            if self.M is None:
                raise OpError(self.load_error_kind, self.load_error)
            self.greeted = True
            return {"protocol": PROTOCOL, "megatron_version": self.M.megatron_version,
                    "torch_version": self.M.torch.__version__, "megatron_path": self.M.megatron_path,
                    "megatron_revision": self.M.megatron_revision,
                    "unsupported": self.unsupported_reasons(),
                    "supports": self.supports(), "mutant": self.mutant,
                    "candidate": self.M.candidate or None, "fixes": self.fixes,
                    "import_errors": self.M.import_errors}, True
        if not self.greeted:
            raise BadRequest("the first request must be {\"op\":\"hello\",\"protocol\":1}")
        if op == "mutants":
            return {"mutants": mutants.describe(self.M), "applied": self.mutant}, False
        if op == "mutate":
            name = req.get("name")
            if not isinstance(name, str):
                raise BadRequest("mutate needs a string field \"name\"")
            self.apply_mutant(name)
            return {"applied": name}, False
        entry = OPS.get(op)
        if entry is None:
            raise BadRequest(f"unknown op {op!r}")
        if op in REQUIREMENTS and op != "gtp_split" and op not in self.supports():
            missing = [p for p in REQUIREMENTS[op] if not _has(self.M, p)]
            reasons = [self.M.import_errors.get(p.split(".")[0], f"{p} missing") for p in missing]
            raise Unsupported(f"{op} needs {', '.join(missing) or 'a function'} not in megatron-core "
                              f"{self.M.megatron_version}: {'; '.join(reasons) or 'not present'}")
        require_importable(self.M, {p.split(".")[0] for p in REQUIREMENTS.get(op, ())}, op)
        return entry.handler(self.ctx, req), False

    def reply(self, line):
        req_id = None
        try:
            parsed = json.loads(line)
            if isinstance(parsed, dict):
                req_id = parsed.get("id")
        except Exception:  # noqa: BLE001
            pass
        try:
            result, flat = self.handle(line)
            out = {"ok": True, **result} if flat else {"ok": True, "result": result}
        except OpError as err:
            out = {"ok": False, "error": err.to_json()}
            if err.kind == "unsupported":
                out["unsupported"] = True
        except Exception as exc:  # noqa: BLE001 - never die on a request
            import traceback
            traceback.print_exc(file=sys.stderr)
            out = {"ok": False, "error": {"kind": "internal", "message": f"{type(exc).__name__}: {exc}"}}
        if req_id is not None:
            out["id"] = req_id
        return out


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--megatron-path", default=None)
    parser.add_argument("--mutant", default=None)
    parser.add_argument("--candidate", default=None, choices=CANDIDATES)
    parser.add_argument("--fix", action="append", default=[])
    args = parser.parse_args(argv)
    proto = _protect_stdout()
    server = Server(args.megatron_path, args.candidate, args.fix)
    startup_error = None
    if args.mutant:
        try:
            if server.M is None:
                raise RuntimeError("megatron.core did not import")
            server.apply_mutant(args.mutant)
        except Exception as exc:  # noqa: BLE001
            startup_error = str(exc)
            log("--mutant failed:", startup_error)
    for raw in request_lines(sys.stdin.fileno(), IDLE_CLOSE_S, server.close_worlds):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            out = {"ok": False, "error": {"kind": "bad_request", "message": f"not UTF-8: {exc}"}}
        else:
            if startup_error is not None:
                out = {"ok": False, "error": {"kind": "mutant_failed", "message": startup_error}}
            else:
                out = server.reply(line)
        try:
            text = json.dumps(out, allow_nan=False)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"ok": False, "error": {"kind": "internal",
                                                      "message": f"reply not serializable: {exc}"}})
        try:
            proto.write(text + "\n")
            proto.flush()
        except BrokenPipeError:
            break
    try:
        server.close_worlds()
    except Exception:  # noqa: BLE001
        pass
    server.held.close()
    coverage_run.save()  # after the worlds: their workers saved their own files as they ended
    return 0


if __name__ == "__main__":
    sys.exit(main())
