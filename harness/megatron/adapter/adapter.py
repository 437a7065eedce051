#!/usr/bin/env python3
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
  --fix NAME           apply a declared optional fix of Megatron's code (megatron_patches.FIXES)
"""

import argparse
import json
import os
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)

PROTOCOL = 1


def log(*args):
    print("megatron-adapter:", *args, file=sys.stderr, flush=True)


def _protect_stdout():
    """Keeps the protocol channel clean: replies go to a private duplicate of fd 1, and fd 1
    itself (Python prints, C++ writes from torch) is pointed at stderr."""
    proto = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return proto


def load_megatron(megatron_path):
    """Imports Megatron; returns a namespace of modules and helpers, or raises ImportError.
    Optional modules that fail to import are recorded in import_errors (their ops answer
    "unsupported")."""
    if megatron_path:
        root = os.path.abspath(megatron_path)
        if not os.path.isfile(os.path.join(root, "megatron", "core", "__init__.py")):
            raise ImportError(f"--megatron-path {megatron_path}: no megatron/core/__init__.py there "
                              "(give the root of a Megatron-LM checkout)")
        sys.path.insert(0, root)
        if not os.path.exists(os.path.join(root, ".git")):
            # Megatron's package_info appends `git rev-parse` of whatever repository encloses it: for
            # a snapshot extracted under this project's build/ that is the harness's own commit.
            os.environ.setdefault("NO_VCS_VERSION", "1")
    import importlib

    import torch

    M = types.SimpleNamespace(torch=torch, import_errors={})
    import megatron.core  # noqa: F401 - the fatal one
    M.megatron_version = _megatron_version()
    M.megatron_path = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(megatron.core.__file__))))
    if megatron_path and os.path.realpath(M.megatron_path) != os.path.realpath(megatron_path):
        raise ImportError(f"megatron.core was imported from {M.megatron_path}, not from --megatron-path "
                          f"{megatron_path} (an earlier import shadows it)")
    M.megatron_revision = _megatron_revision(M.megatron_path)
    from megatron.core.dist_checkpointing import core, dict_utils, mapping

    M.mapping, M.dict_utils = mapping, dict_utils
    M.ShardedTensor, M.ShardedObject = mapping.ShardedTensor, mapping.ShardedObject
    M.ShardedBase, M.ShardedTensorFactory = mapping.ShardedBase, mapping.ShardedTensorFactory
    M.LocalNonpersistentObject = mapping.LocalNonpersistentObject
    M.CheckpointingException = core.CheckpointingException
    M.nested_values = dict_utils.nested_values
    optional = {
        "interop": "megatron.core.dist_checkpointing.gpt_checkpoint_interop",
        "alloc": "megatron.core.models.hybrid.hybrid_layer_allocation",
        "validation": "megatron.core.dist_checkpointing.validation",
        "ssm_utils": "megatron.core.ssm.utils",
        "gdp": "megatron.core.ssm.gated_delta_product",
        "gtp": "megatron.core.tensor_parallel.generalized_tensor_parallelism",
        "mlp": "megatron.core.transformer.mlp",
    }
    for name, module in optional.items():
        try:
            setattr(M, name, importlib.import_module(module))
        except Exception as exc:  # noqa: BLE001 - a missing optional module means "unsupported"
            setattr(M, name, None)
            M.import_errors[name] = f"cannot import {module}: {type(exc).__name__}: {exc}"
            log(M.import_errors[name])

    from adapter_ops import classify

    def call_split_factory(fn, orig, sections, names, dim):
        try:
            return fn(orig, sections, names, dim)
        except Exception as exc:  # noqa: BLE001
            raise classify(exc, {AssertionError: "split_assertion", TypeError: "split_type_error"})

    def swiglu_factory(orig, offsets):
        if M.mlp is None or not hasattr(M.mlp, "apply_swiglu_sharded_factory"):
            from adapter_errors import Unsupported
            raise Unsupported("apply_swiglu_sharded_factory is not available: "
                              + M.import_errors.get("mlp", "missing"))
        try:
            return M.mlp.apply_swiglu_sharded_factory(orig, offsets)
        except Exception as exc:  # noqa: BLE001
            raise classify(exc, {AssertionError: "swiglu_assertion"})

    def find_gtp_split_factory():
        """The checkout's own shard-split factory, else the candidate's when it is applied."""
        import candidates
        own = candidates.find_real_gtp_split_factory(M)
        if own is not None or not M.candidate.get("applied"):
            return own
        import functools
        from candidates import shard_split
        return functools.partial(shard_split.gtp_split_tensor_factory, M)

    M.candidate = {}  # the candidate's install report (Server.__init__), {} without --candidate

    M.call_split_factory = call_split_factory
    M.swiglu_factory = swiglu_factory
    M.find_gtp_split_factory = find_gtp_split_factory
    return M


def _megatron_revision(root):
    """The checkout's git revision, else a hex revision in its folder name (snapshots are named
    megatron-lm-<rev>), else None."""
    import re
    import subprocess
    if os.path.exists(os.path.join(root, ".git")):
        try:
            out = subprocess.run(["git", "-C", root, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
            if out.returncode == 0 and out.stdout.strip():
                return out.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    m = re.search(r"-([0-9a-f]{7,40})$", os.path.basename(os.path.normpath(root)))
    return m.group(1) if m else None


def _megatron_version():
    try:
        from megatron.core import package_info
        return package_info.__version__
    except Exception:  # noqa: BLE001
        import megatron.core
        return getattr(megatron.core, "__version__", "unknown")


# op name -> attribute paths (on the Megatron namespace) it needs; hello's "supports".
REQUIREMENTS = {
    "pattern_maps": ["interop.gpt_compatible_layer_maps"],
    "parse_pattern": ["alloc.parse_hybrid_pattern"],
    "layer_counts": ["alloc.get_hybrid_layer_counts"],
    "total_layer_count": ["alloc.get_hybrid_total_layer_count"],
    "segment_count": ["alloc.get_hybrid_total_pipeline_segment_count"],
    "type_maps": ["alloc.get_layer_maps_from_layer_type_list"],
    "select_segment": ["alloc.select_pipeline_segment"],
    "retarget": ["interop.gpt_compatible_layer_maps", "interop.retarget_sharded_state_dict_to_gpt_checkpoint"],
    "fsdp_key": ["interop.gpt_compatible_layer_maps", "interop._retarget_explicit_key_to_gpt_checkpoint"],
    "fsdp_retarget": ["interop.gpt_compatible_layer_maps", "interop.retarget_fsdp_state_dict_to_gpt_checkpoint"],
    "split_chunks": ["ssm_utils._split_tensor_factory"],
    "gdp_layout": ["gdp._get_in_proj_checkpoint_split_layout"],
    "gtp_padding": ["gtp.gtp_remat_shard_dim0", "gtp.GTP_CONFIG"],
    "gtp_split": [],  # probed by name, see find_gtp_split_factory
    # Real GTP worlds (gtp_world.py): the GDP mixer and GTP's own init and writer election.
    # Only what the worlds cannot do without: a checkout from before a GTP fix must still be judged
    # (its bug is a finding), never reported unsupported for lacking the fix's helpers.
    "gtp_pieces": ["gdp.GatedDeltaProductMixer", "gtp.wrap_module_params_gtp", "gtp.GTP_CONFIG"],
    "gtp_merge": ["gdp.GatedDeltaProductMixer", "gtp.wrap_module_params_gtp", "gtp.GTP_CONFIG"],
    "gtp_param_entry": ["gdp.GatedDeltaProductMixer", "gtp.wrap_module_params_gtp", "gtp.GTP_CONFIG"],
    "load_state": ["gtp.GTP_CONFIG"],  # the worlds run on GTP-era Megatron (gtp_world.py)
    "integrity_report": ["validation._validate_sharding_for_key", "validation._compute_shards_access",
                         "validation._validate_objects_for_key"],
    "integrity": ["validation.validate_sharding_integrity", "validation._validate_sharding_for_key",
                  "validation._validate_objects_for_key"],
}
ALWAYS = ["hello", "mutants", "mutate"]


def _has(M, path):
    mod_name, _, attr = path.partition(".")
    mod = getattr(M, mod_name, None)
    return mod is not None and (not attr or hasattr(mod, attr))


CANDIDATES = ("shard-split",)


class Server:
    def __init__(self, megatron_path, candidate=None, fixes=()):
        self.M = None
        self.load_error = None
        self.greeted = False
        self.mutant = None
        self.fixes = []
        try:
            self.M = load_megatron(megatron_path)
            if candidate is not None:
                from candidates import shard_split
                self.M.candidate = shard_split.install(self.M)
                log("candidate:", self.M.candidate)
            if fixes:
                import megatron_patches
                self.fixes = megatron_patches.apply_fixes(fixes)
        except Exception as exc:  # noqa: BLE001 - reported to the harness in every reply
            self.load_error = f"{type(exc).__name__}: {exc}"
            log("cannot import megatron.core:", self.load_error)
        if self.M is not None:
            from adapter_ops import Ops
            self.ops = Ops(self.M)

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
        import mutants
        from adapter_errors import OpError
        if self.mutant is not None:
            raise OpError("already_mutated", f"mutant {self.mutant!r} already applied; one mutant per process")
        if name not in mutants.MUTANTS:
            raise OpError("unknown_mutant", f"no mutant {name!r}; see the mutants op")
        mutants.apply(name, self.M)
        self.mutant = name
        log("applied mutant", name)

    def handle(self, line):
        from adapter_errors import BadRequest, OpError, Unsupported
        try:
            req = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise BadRequest(f"not valid JSON: {exc}")
        if not isinstance(req, dict):
            raise BadRequest("a request must be a JSON object")
        op = req.get("op")
        if not isinstance(op, str):
            raise BadRequest("request lacks a string field \"op\"")
        if op == "hello":
            if req.get("protocol") != PROTOCOL:
                raise OpError("protocol_mismatch", f"this adapter speaks protocol {PROTOCOL}")
            if self.M is None:
                raise OpError("megatron_import", self.load_error)
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
            import mutants
            return {"mutants": mutants.describe(self.M), "applied": self.mutant}, False
        if op == "mutate":
            name = req.get("name")
            if not isinstance(name, str):
                raise BadRequest("mutate needs a string field \"name\"")
            self.apply_mutant(name)
            return {"applied": name}, False
        method = getattr(self.ops, "op_" + op, None)
        if method is None:
            raise BadRequest(f"unknown op {op!r}")
        if op in REQUIREMENTS and op != "gtp_split" and op not in self.supports():
            missing = [p for p in REQUIREMENTS[op] if not _has(self.M, p)]
            reasons = [self.M.import_errors.get(p.split(".")[0], f"{p} missing") for p in missing]
            raise Unsupported(f"{op} needs {', '.join(missing) or 'a function'} not in megatron-core "
                              f"{self.M.megatron_version}: {'; '.join(reasons) or 'not present'}")
        return method(req), False

    def reply(self, line):
        from adapter_errors import OpError
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
    for raw in sys.stdin.buffer:
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
        import gtp_world
        gtp_world.close_all()
    except Exception:  # noqa: BLE001
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
