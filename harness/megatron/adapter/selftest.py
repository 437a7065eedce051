#!/usr/bin/env python3
"""Self-test of the Megatron adapter against the spec's worked examples.

Starts adapter.py under the Megatron venv's python, sends the requests below and compares the
replies with answers taken from ../shared/spec/megatron-interop-spec.md (section numbers given
per check). Stdlib only; runs under any python3. Exits 0 when every check passes.

Usage: selftest.py [--python PY] [--megatron-path DIR] [--all-mutants] [-v]

  --python PY          interpreter with torch + megatron-core (default: the venv made by
                       ci/install-megatron.sh, $INTEROP_MEGATRON_VENV or
                       ~/.cache/interop-harness/megatron-venv)
  --megatron-path DIR  passed on to the adapter
  --all-mutants        also run every check under every mutant (one adapter each, a few
                       minutes) and report which mutants no check kills
"""

import argparse
import json
import os
import select
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ADAPTER = os.path.join(HERE, "adapter.py")


def default_python():
    if os.environ.get("INTEROP_MEGATRON_PYTHON"):
        return os.environ["INTEROP_MEGATRON_PYTHON"]
    venv = os.environ.get("INTEROP_MEGATRON_VENV",
                          os.path.join(os.path.expanduser("~"), ".cache", "interop-harness", "megatron-venv"))
    return os.path.join(venv, "bin", "python")


class Adapter:
    def __init__(self, python, megatron_path=None, mutant=None):
        cmd = [python, ADAPTER]
        if megatron_path:
            cmd += ["--megatron-path", megatron_path]
        if mutant:
            cmd += ["--mutant", mutant]
        self.stderr = open(os.devnull, "w")
        self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.stderr, text=True, bufsize=1)

    def raw(self, line, timeout=30.0):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"no reply within {timeout}s to {line[:80]!r}")
        reply = self.proc.stdout.readline()
        if not reply:
            raise EOFError(f"adapter exited (rc={self.proc.poll()}) on {line[:80]!r}")
        return json.loads(reply)

    def send(self, request, timeout=30.0):
        return self.raw(json.dumps(request), timeout)

    def close(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001
            self.proc.kill()
        self.stderr.close()


# ---- request builders -------------------------------------------------------------------------

def tensor(key, local, glob, off, frag, replica=0, prepend=0, **extra):
    e = {"kind": "tensor", "key": key, "global_shape": glob, "global_offset": off, "local_shape": local,
         "axis_fragmentations": frag, "replica_id": replica, "prepend_axis_num": prepend}
    e.update(extra)
    return e


def obj(key, shape, off, replica=0):
    return {"kind": "object", "key": key, "global_shape": shape, "global_offset": off, "replica_id": replica}


def flat(*entries):
    """[{"path", "entry"}] with path = the entry's key (Megatron's flat model dict)."""
    return [{"path": e["key"] if "key" in e else f"p{i}", "entry": e} for i, e in enumerate(entries)]


def maps_ok(pattern, att, mlp, fresh, n):
    return {"pattern": pattern, "ok": True, "num_gpt_layers": n, "attention_to_gpt": att,
            "mlp_to_gpt": mlp, "fresh_init": fresh}


GDP_NAMES = ["z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"]


def _chunks_43(t):
    """Spec 4.3: M=3, d_inner_l=2, group_state_l=1, nheads_l=1, T=2, C=4."""
    out = []
    for name, s in zip(GDP_NAMES, [2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1]):
        out.append({"key": "decoder.layers.0.mixer.in_proj.weight." + name, "global_shape": [2 * s, 4],
                    "global_offset": [t * s, 0], "local_shape": [s, 4], "axis_fragmentations": [2, 1],
                    "replica_id": 0, "prepend_axis_num": 0})
    return out


# ---- checks: (name, request, expected), one group per spec section ------------------------------

class Table(list):
    """(name, request, expected) rows; expected: {"result": R} exact result, {"kind": K} error kind,
    {"pred": fn(reply) -> bool}."""

    def res(self, name, req, result):
        self.append((name, req, {"result": result}))

    def err(self, name, req, kind):
        self.append((name, req, {"kind": kind}))


def pmap(C, name, pattern, expected):
    C.res(name, {"op": "pattern_maps", "pattern": pattern}, expected)


def perr(C, name, pattern, kind):
    C.res(name, {"op": "pattern_maps", "pattern": pattern}, {"pattern": pattern, "ok": False, "error": {"kind": kind}})


def layer_map_checks(supports):
    """2.2 layer maps and the 1.3 pattern errors they report."""
    C = Table()
    pmap(C, "2.2 M*-M*-", "M*-M*-", maps_ok("M*-M*-", [[1, 0], [4, 1]], [[2, 0], [5, 1]], [0, 3], 2))
    pmap(C, "2.2 M*-|M*- (pipes ignored)", "M*-|M*-", maps_ok("M*-|M*-", [[1, 0], [4, 1]], [[2, 0], [5, 1]], [0, 3], 2))
    pmap(C, "2.2 **--", "**--", maps_ok("**--", [[0, 0], [1, 1]], [[2, 0], [3, 1]], [], 2))
    pmap(C, "2.2 M*-M*-*-M*-*-", "M*-M*-*-M*-*-",
         maps_ok("M*-M*-*-M*-*-", [[1, 0], [4, 1], [6, 2], [9, 3], [11, 4]],
                 [[2, 0], [5, 1], [7, 2], [10, 3], [12, 4]], [0, 3, 8], 5))
    pmap(C, "2.2 *E*E (MoE pairing)", "*E*E", maps_ok("*E*E", [[0, 0], [2, 1]], [[1, 0], [3, 1]], [], 2))
    pmap(C, "2.2 trailing / is depth 0", "M*-/", maps_ok("M*-/", [[1, 0]], [[2, 0]], [0], 1))
    perr(C, "2.2 M*-M*E mixed (before counts)", "M*-M*E", "mixed_mlp_kinds")
    perr(C, "2.2 M**- unbalanced", "M**-", "unbalanced_attention_mlp")
    perr(C, "2.2 MMMM unbalanced (zero)", "MMMM", "unbalanced_attention_mlp")
    perr(C, "2.2 MD- untranslatable", "MD-", "untranslatable_layer_types")
    perr(C, "2.2 M*-/MM MTP present", "M*-/MM", "mtp_present")
    perr(C, "2.2 /MM/MM caught by MTP check", "/MM/MM", "mtp_present")
    perr(C, "2.2 empty", "", "empty_pattern")
    perr(C, "2.2 lone pipe", "|", "empty_pattern")
    perr(C, "2.2 null pattern", None, "empty_pattern")
    perr(C, "1.3 M*X* invalid symbol", "M*X*", "invalid_symbol")
    perr(C, "1.3 MD* attention+MLA/DSA", "MD*", "attention_with_mla_dsa")
    perr(C, "1.3 M*//MM not identical", "M*//MM", "mtp_not_identical")
    return C


def parse_checks(supports):
    """1.3 parse."""
    C = Table()

    def parse(name, pattern, main, mtp, depth):
        C.res(name, {"op": "parse_pattern", "pattern": pattern}, {"main": main, "mtp": mtp, "depth": depth})
    parse("1.3 M*M*/MM/MM", "M*M*/MM/MM", "M*M*", "MM", 2)
    parse("1.3 /MM/MM", "/MM/MM", None, "MM", 2)
    parse("1.3 M*M*//", "M*M*//", "M*M*", None, 0)
    parse("1.3 empty", "", "", None, 0)
    parse("1.3 M*/D checked separately", "M*/D", "M*", "D", 1)
    C.err("1.3 M*M*/MM/Ma identical-check first", {"op": "parse_pattern", "pattern": "M*M*/MM/Ma"}, "mtp_not_identical")
    C.err("1.3 M*M*/Ma/Ma invalid MTP symbol", {"op": "parse_pattern", "pattern": "M*M*/Ma/Ma"}, "invalid_symbol")
    C.err("1.3 pipe inside MTP", {"op": "parse_pattern", "pattern": "M*M*/M|M/M|M"}, "invalid_symbol")
    return C


def count_checks(supports):
    """1.4 counts."""
    C = Table()
    C.res("1.4 total M-M-|M-M*-", {"op": "total_layer_count", "pattern": "M-M-|M-M*-"}, {"count": 9})
    C.res("1.4 total ||M", {"op": "total_layer_count", "pattern": "||M"}, {"count": 1})
    C.res("1.4 segments ||M", {"op": "segment_count", "pattern": "||M"}, {"count": 3})
    C.res("1.4 segments M-M-|M-M*-/MM/MM", {"op": "segment_count", "pattern": "M-M-|M-M*-/MM/MM"}, {"count": 2})
    C.res("1.4 layer counts", {"op": "layer_counts", "pattern": "M-M-|M-M*-/MM/MM"},
        {"counts": {"*": 1, "D": 0, "G": 0, "M": 8, "+": 0, "-": 4, "E": 0},
         "order": ["*", "D", "G", "M", "+", "-", "E"]})
    return C


def segment_checks(supports):
    """1.6 segment selection."""
    C = Table()
    four = "M*-M*-|*-|M*-|*-"
    for (r, vp), (layers, off) in {(0, 0): ("M*-M*-", 0), (1, 0): ("*-", 6), (0, 1): ("M*-", 8),
                                    (1, 1): ("*-", 11)}.items():
        C.res(f"1.6 table rank {r} vp {vp}", {"op": "select_segment", "pattern": four, "pp_rank": r,
                                            "pp_size": 2, "vp_stage": vp}, {"layers": layers, "offset": off})
    C.res("1.6 legacy hazard rank 1", {"op": "select_segment", "pattern": "MMMM", "pp_rank": 1, "pp_size": 2,
                                     "vp_stage": None, "first": 1, "last": 1}, {"layers": "M", "offset": 3})
    C.err("1.6 pipes with first", {"op": "select_segment", "pattern": "M*|M*", "pp_rank": 0, "pp_size": 2,
                                 "first": 1}, "pipe_with_first_last")
    C.err("1.6 VPP without pipes", {"op": "select_segment", "pattern": "M*M*", "pp_rank": 0, "pp_size": 2,
                                  "vp_stage": 0}, "vpp_without_pipes")
    C.err("1.6 legacy not divisible", {"op": "select_segment", "pattern": "M*M*M", "pp_rank": 0, "pp_size": 2},
        "layers_not_divisible_by_pp")
    C.err("1.6 segments not divisible", {"op": "select_segment", "pattern": "M|M|M", "pp_rank": 0, "pp_size": 2},
        "segments_not_divisible_by_pp")
    C.err("1.6 segment out of range", {"op": "select_segment", "pattern": "M|M", "pp_rank": 0, "pp_size": 1,
                                     "vp_stage": 2}, "segment_out_of_range")
    return C


def retarget_checks(supports):
    """2.4-2.6 retarget; 2.3 a gated fc1 (swiglu factory) built after retargeting."""
    C = Table()
    qkv1 = tensor("decoder.layers.1.self_attention.linear_qkv.weight", [4], [4], [0], [1])
    C.res("2.5 ST gains the layer axis (M*-)", {"op": "retarget", "pattern": "M*-", "entries": flat(qkv1)},
        {"entries": [{"path": qkv1["key"], "entry": tensor("decoder.layers.self_attention.linear_qkv.weight",
                                                           [4], [1, 4], [0, 0], [1, 1], prepend=1)}]})
    so5 = obj("decoder.layers.5.mlp.linear_fc2._extra_state", [1], [0], [0, 1, 0])
    C.res("2.5 SO placeholder replaced (M*-M*-)", {"op": "retarget", "pattern": "M*-M*-", "entries": flat(so5)},
        {"entries": [{"path": so5["key"], "entry": obj("decoder.layers.mlp.linear_fc2._extra_state", [2], [1],
                                                       [0, 1, 0])}]})
    so_e = obj("decoder.layers.3.mlp.experts.linear_fc1._extra_state", [8], [3])
    C.res("2.5 SO expert axis prepended (*E*E)", {"op": "retarget", "pattern": "*E*E", "entries": flat(so_e)},
        {"entries": [{"path": so_e["key"], "entry": obj("decoder.layers.mlp.experts.linear_fc1._extra_state",
                                                        [2, 8], [1, 3])}]})
    opt = tensor("optimizer.state.exp_avg.decoder.layers.1.self_attention.linear_qkv.weight", [4], [8], [4], [2],
                 replica=[0, 0, 1])
    fresh = tensor("decoder.layers.0.mixer.A_log", [4], [4], [0], [1])
    norm = tensor("optimizer.state.fp32_param.decoder.final_norm.weight", [4], [4], [0], [1])
    emb = tensor("embedding.word_embeddings.weight", [8, 4], [16, 4], [8, 0], [2, 1], allow_shape_mismatch=True)
    out_es = obj("output_layer._extra_state", [1], [0])
    out_opt = obj("optimizer.state.exp_avg.output_layer._extra_state", [1], [0])
    out_w = tensor("output_layer.weight", [8, 4], [16, 4], [0, 0], [2, 1])
    C.res("2.4/2.6 optimizer prefix, fresh, final norm, embedding, omitted key (suffix)",
        {"op": "retarget", "pattern": "M*-", "entries": flat(opt, fresh, norm, emb, out_es, out_opt, out_w)},
        {"entries": [
            {"path": opt["key"], "entry": tensor("optimizer.state.exp_avg.decoder.layers.self_attention.linear_qkv.weight",
                                                 [4], [1, 8], [0, 4], [1, 2], replica=[0, 0, 1], prepend=1)},
            {"path": fresh["key"], "entry": {"kind": "local"}},
            {"path": norm["key"], "entry": dict(norm, key="optimizer.state.fp32_param.decoder.final_layernorm.weight")},
            {"path": emb["key"], "entry": emb},
            {"path": out_es["key"], "entry": {"kind": "local"}},
            {"path": out_opt["key"], "entry": {"kind": "local"}},
            {"path": out_w["key"], "entry": out_w}]})
    C.err("2.4 unknown hybrid layer", {"op": "retarget", "pattern": "M*-", "entries": flat(
        tensor("decoder.layers.7.mlp.linear_fc1.weight", [4], [4], [0], [1]))}, "unknown_hybrid_layer")
    C.err("2.5 uneven ST cannot be prepended", {"op": "retarget", "pattern": "M*-", "entries": flat(
        tensor("decoder.layers.1.mlp.linear_fc1.weight", [3], [7], [4], None))}, "uneven_prepend")
    C.err("3.1 construction checks offsets", {"op": "retarget", "pattern": "M*-", "entries": flat(
        tensor("decoder.layers.1.mlp.linear_fc1.weight", [4], [8], [3], [2]))}, "metadata_integrity")
    # 2.3 gated fc1 (swiglu factory) built after retargeting hybrid layer 5 (GPT 1 of 2), t = 1 of 2.
    fc1 = tensor("decoder.layers.5.mlp.linear_fc1.weight", [1024, 256], [2048, 256], [1024, 0], [2, 1],
                 replica=[0, 0, 0])
    piece = lambda row: tensor("decoder.layers.mlp.linear_fc1.weight", [512, 256], [2, 2048, 256], [1, row, 0],
                               [2, 4, 1], replica=[0, 0, 0], prepend=1)
    C.res("2.3/2.5 swiglu factory pieces get the layer axis",
        {"op": "retarget", "pattern": "M*-M*-", "entries": [{"path": fc1["key"], "entry": {
            "kind": "factory", "factory": "swiglu", "tensor": fc1}}]},
        {"entries": [{"path": fc1["key"], "entry": {"kind": "factory", "key": "decoder.layers.mlp.linear_fc1.weight",
                                                    "built": [{"path": "0", "entry": piece(512)},
                                                              {"path": "1", "entry": piece(1536)}]}}]})
    return C


def fsdp_checks(supports):
    """2.7 FSDP."""
    C = Table()
    ck = ["optimizer.state.module.module.decoder.layers.0.self_attention.linear_qkv.weight"]
    C.res("2.7 FSDP key: renumber and recover module. prefix",
        {"op": "fsdp_key", "pattern": "M*-", "checkpoint_keys": ck,
         "key": "module.module.module.decoder.layers.1.self_attention.linear_qkv.weight"},
        {"key": "module.module.decoder.layers.0.self_attention.linear_qkv.weight"})
    C.res("2.7 FSDP key: fresh layer omitted", {"op": "fsdp_key", "pattern": "M*-", "checkpoint_keys": None,
                                              "key": "decoder.layers.0.mixer.A_log"}, {"key": None})
    C.res("2.7 FSDP tree with prefix",
        {"op": "fsdp_retarget", "pattern": "M*-", "prefix": "optimizer.state", "checkpoint_keys": ck,
         "tree": {"module.module.module.decoder.layers.1.self_attention.linear_qkv.weight": 1,
                  "module.module.module.decoder.layers.0.mixer.A_log": 2,
                  "module.module.module.decoder.layers.2.mlp.linear_fc1.weight": 3, "groups": {"x": [1]}}},
        {"tree": {"module.module.decoder.layers.0.self_attention.linear_qkv.weight": 1, "groups": {"x": [1]}}})
    C.res("2.7 FSDP key: two distinct captures leave the key unchanged",
        {"op": "fsdp_key", "pattern": "M*-", "key": "decoder.layers.1.self_attention.linear_proj.weight",
         "checkpoint_keys": ["model.module.decoder.layers.0.self_attention.linear_proj.weight",
                             "model.module.module.decoder.layers.0.self_attention.linear_proj.weight"]},
        {"key": "decoder.layers.0.self_attention.linear_proj.weight"})
    C.err("2.7 FSDP unknown layer", {"op": "fsdp_key", "pattern": "M*-", "key": "decoder.layers.9.mlp.w"},
        "unknown_hybrid_layer")
    return C


def split_checks(supports):
    """4.3 split factory; 4.4 GTP padding (4.8, 4.9, 4.10)."""
    C = Table()
    for t in (0, 1):
        C.res(f"4.3 split chunks t={t}", {"op": "split_chunks", "key": "decoder.layers.0.mixer.in_proj.weight",
                                        "local_rows": 16, "cols": 4, "tp_rank": t, "tp_size": 2,
                                        "sections": [2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1], "names": GDP_NAMES},
            {"chunks": _chunks_43(t)})
    C.err("4.3 sections must cover", {"op": "split_chunks", "key": "k", "local_rows": 16, "cols": 4, "tp_rank": 0,
                                    "tp_size": 2, "sections": [2, 2], "names": ["a", "b"]}, "split_sections_mismatch")

    # 4.4 GTP padding (4.8, 4.9, 4.10)
    for rows, g, p, r, pad in ((61760, 64, 32, 992, 1728), (60, 2, 16, 32, 4), (2064, 2, 32, 1056, 48),
                               (61760, 64, 16, 976, 704), (1, 64, 32, 32, 2047)):
        C.res(f"4.4 GTP rows D={rows} G={g} p={p}", {"op": "gtp_padding", "rows": rows, "gtp_size": g,
                                                    "pad_for_alignment": p}, {"shard_rows": r, "pad_length": pad})
    C.err("4.4 p=0 needs divisible rows", {"op": "gtp_padding", "rows": 61, "gtp_size": 2, "pad_for_alignment": 0},
        "gtp_not_divisible")
    return C


def integrity_checks(supports):
    """3.7 integrity: the 2.3 qkv weight, GPT format, T = 2, L = 2 (4 entries on 2 ranks)."""
    C = Table()
    qkv = lambda layer, t, replica=(0, 0, 0): tensor("decoder.layers.self_attention.linear_qkv.weight", [384, 256],
                                                     [2, 768, 256], [layer, 384 * t, 0], [2, 2, 1],
                                                     replica=list(replica), prepend=1)
    good = [{"rank": t, "entry": qkv(layer, t)} for layer in (0, 1) for t in (0, 1)]
    C.append(("3.7 integrity accepts a full tiling", {"op": "integrity", "entries": good},
              {"pred": lambda rep: rep["result"]["ok"] is True and rep["result"]["problems"] == []}))
    C.append(("3.7 integrity reports a hole", {"op": "integrity", "entries": good[:3]},
              {"pred": lambda rep: rep["result"]["ok"] is False and "Invalid access pattern" in rep["result"]["problems"][0]}))
    C.append(("3.7 integrity reports a duplicate writer",
              {"op": "integrity", "entries": good + [{"rank": 2, "entry": qkv(1, 1)}]},
              {"pred": lambda rep: rep["result"]["ok"] is False and rep["result"]["details"][0]["kind"] == "access"}))
    mixed = [{"rank": 0, "entry": tensor("w", [2, 2], [4, 2], [0, 0], [2, 1])},
             {"rank": 1, "entry": tensor("w", [2, 2], [4, 2], [2, 0], None)}]
    C.append(("3.7 regular+irregular grid is an assertion", {"op": "integrity", "entries": mixed},
              {"pred": lambda rep: rep["result"]["ok"] is False and rep["result"]["details"][0]["kind"] == "assertion"}))
    objs = [{"rank": 0, "entry": obj("e", [2], [0])}, {"rank": 1, "entry": obj("e", [2], [0])}]
    C.append(("3.7 duplicate ShardedObject", {"op": "integrity", "entries": objs},
              {"pred": lambda rep: any("Duplicate ShardedObject keys" in p for p in rep["result"]["problems"])}))
    return C


def gdp_checks(supports):
    """4.2/4.9/4.10 GDP layout and its private split factory (Megatron versions that have GDP)."""
    C = Table()
    if "gdp_layout" in supports:
        C.res("4.9 GDP in_proj layout (10, 3, 2, 3)", {"op": "gdp_layout", "d_inner_local": 10, "group_state_local": 3,
                                                     "nheads_local": 2, "householder": 3},
            {"sections": [10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2], "names": GDP_NAMES})
        C.res("4.10 GDP in_proj layout (256, 256, 4, 3), D = 2064",
            {"op": "gdp_layout", "d_inner_local": 256, "group_state_local": 256, "nheads_local": 4, "householder": 3},
            {"sections": [256] * 8 + [4] * 4, "names": GDP_NAMES})
        C.res("4.2 GDP conv layout", {"op": "gdp_layout", "which": "conv", "d_inner_local": 10,
                                    "group_state_local": 3, "householder": 3},
            {"sections": [10, 10, 10, 3, 3, 3, 3], "names": ["V0", "V1", "V2", "K0", "K1", "K2", "Q"]})
        C.res("4.3 GDP private split factory = ssm one", {"op": "split_chunks", "factory": "gdp",
                                                        "key": "decoder.layers.0.mixer.in_proj.weight",
                                                        "local_rows": 16, "cols": 4, "tp_rank": 1, "tp_size": 2,
                                                        "sections": [2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, 1],
                                                        "names": GDP_NAMES}, {"chunks": _chunks_43(1)})
    else:
        C.append(("gdp_layout unsupported without gated_delta_product",
                  {"op": "gdp_layout", "d_inner_local": 10, "group_state_local": 3, "nheads_local": 2,
                   "householder": 3}, {"pred": lambda rep: rep.get("unsupported") is True}))
    return C


def gtp_checks(supports):
    """GTP through real gloo worlds (gloo_worlds.py): the GDP mixer's gather design, spec 4.4/4.5."""
    C = Table()
    if "gtp_pieces" in supports:
        gtp = {"key": "decoder.layers.0.mixer.in_proj.weight", "sections": [10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2],
               "names": GDP_NAMES, "tp_size": 2, "gtp_size": 2, "pad_for_alignment": 16, "cols": 2,
               "dtype": "bfloat16", "gather_storage": 100, "shard_storage": 7}
        C.append(("gtp patches: every patch still needed and still matching the checkout", {"op": "gtp_patches"},
                  {"pred": lambda rep: rep["ok"] and rep["result"]["patches"]
                   and all(p["needed"] for p in rep["result"]["patches"])}))
        C.append(("gtp patches: without them the GDP gather branch is skipped and Megatron asserts",
                  {"op": "gtp_unpatched_save", **gtp, "tp_rank": 0, "gtp_rank": 0},
                  {"pred": lambda rep: rep["ok"] and rep["result"]["failed"] is True}))

        def pieces_ok(rep):
            pieces = rep["result"]["pieces"]
            return (len(pieces) == 12 and all(p["replica_id"] == [0, 0, 1] for p in pieces)
                    and pieces[0]["global_offset"] == [10, 0] and pieces[0]["global_shape"] == [20, 2]
                    and pieces[0]["data"]["blocks"] == [[100, 0, 10]] and pieces[-1]["data"]["blocks"] == [[100, 58, 2]]
                    and pieces[-1]["global_offset"] == [2, 0] and pieces[-1]["key"].endswith(".a"))
        C.append(("4.5 gather: rank (t=1, g=1) builds all 12 TP-local chunks of the gathered (60, C), replica (0,0,1)",
                  {"op": "gtp_pieces", "design": "gather", **gtp, "tp_rank": 1, "gtp_rank": 1},
                  {"pred": pieces_ok}))
        C.append(("4.5 gather merge: g=1 gets rows [32, 60) then 4 zero pad rows",
                  {"op": "gtp_merge", "design": "gather", **gtp, "tp_rank": 1, "gtp_rank": 1,
                   "loaded": [{"shape": [50, 2], "blocks": [[7, 0, 50]]}, {"shape": [10, 2], "blocks": [[8, 0, 10]]}]},
                  {"result": {"shape": [32, 2], "dtype": "bfloat16", "blocks": [[7, 32, 18], [8, 0, 10], [0, 0, 4]]}}))

        # load_state of a GTP gather factory (Megatron builds, loads and merges it in the T=1, G=2 world)
        starts = [sum(gtp["sections"][:i]) for i in range(len(gtp["sections"]))]
        ckpt_chunks = [{"key": gtp["key"] + "." + n, "global_shape": [sec, 2], "global_offset": [0, 0],
                        "local_shape": [sec, 2], "prepend_axis_num": 0,
                        "data": {"shape": [sec, 2], "dtype": "float32", "blocks": [[500, st, sec]]}}
                       for n, sec, st in zip(GDP_NAMES, gtp["sections"], starts)]
        load_factory = dict(gtp, design="gather", tp_size=1, tp_rank=0, gtp_rank=1, dtype="float32")
        for order in ("serialization_load", "to_state_dict"):
            C.append((f"load_state {order}: a G=2 gather factory over a T=1 save: g=1 gets rows [32, 60), 4 zero "
                      "rows; the LNP and the common value come back",
                      {"op": "load_state", "order": order, "chunks": ckpt_chunks, "objects": [],
                       "common": {"iteration": 7},
                       "request": ["dict", [["w", ["leaf", {"kind": "factory", "key": gtp["key"],
                                                            "gtp": load_factory}]],
                                            ["local", ["leaf", {"kind": "local", "value": 5}]]]]},
                      {"result": {"tree": ["dict", [["iteration", ["value", 7]], ["local", ["local", 5]],
                                                    ["w", ["tensor", [32, 2], [[500, 32, 28], [0, 0, 4]]]]]]}}))

        def entry_ok(rep):
            e = rep["result"]["entry"]
            return (e["global_shape"] == [128, 2] and e["global_offset"] == [96, 0] and e["local_shape"] == [32, 2]
                    and e["replica_id"] == [0, 0, 0] and e["allow_shape_mismatch"] is True
                    and e["data"]["blocks"] == [[7, 0, 32]] and len(rep["result"]["ranks"]) == 4)
        C.append(("4.4 GTP parameter entry: composite offset (t*G+g)*R, padded global, writer (0,0,0), a view",
                  {"op": "gtp_param_entry", **gtp, "tp_rank": 1, "gtp_rank": 1}, {"pred": entry_ok}))
        C.append(("3.8 serialization.load with all-padding GTP ranks (LNP in the factory's build): zeros, keys kept",
                  {"op": "gtp_all_padding_load", "rows": 6, "gtp_size": 4, "shard_rows": 16, "cols": 2},
                  {"pred": lambda rep: rep["ok"] and all(r["ok"] for r in rep["result"]["ranks"])
                   and rep["result"]["ranks"][0]["rows"][5] == [0, 5] and rep["result"]["ranks"][0]["rows"][6] is None
                   and all(x is None for x in rep["result"]["ranks"][3]["rows"])}))
        C.append(("shard-split design: 'not in this Megatron' unless the PR's factory is there",
                  {"op": "gtp_pieces", "design": "shard-split", **gtp, "tp_rank": 0, "gtp_rank": 0},
                  {"pred": lambda rep: (rep.get("unsupported") is True and "not in this Megatron" in rep["error"]["message"])
                   or "gtp_split" in supports}))
    else:
        C.append(("gtp_pieces unsupported without GDP/GTP", {"op": "gtp_pieces", "design": "gather", "key": "x.in_proj.weight",
                                                            "sections": [2], "names": ["z"], "tp_size": 1, "tp_rank": 0,
                                                            "gtp_size": 1, "gtp_rank": 0, "pad_for_alignment": 0, "cols": 1},
                  {"pred": lambda rep: rep.get("unsupported") is True}))
    return C


def protocol_checks(supports):
    """the protocol."""
    C = Table()
    C.append(("protocol: bad JSON", "{not json", {"kind": "bad_request"}))
    C.err("protocol: missing field", {"op": "pattern_maps"}, "bad_request")
    C.err("protocol: unknown op", {"op": "no_such_op"}, "bad_request")
    C.err("protocol: wrong field type", {"op": "select_segment", "pattern": "M", "pp_rank": "0", "pp_size": 1},
        "bad_request")
    C.append(("protocol: id echoed", {"op": "segment_count", "pattern": "M", "id": "abc"},
              {"pred": lambda rep: rep.get("id") == "abc" and rep["ok"] is True}))
    C.append(("gtp_split unsupported or answered", {"op": "gtp_split", "key": "k", "shard_rows": 32, "cols": 2,
                                                    "tp_rank": 0, "tp_size": 2, "gtp_rank": 1, "gtp_size": 2,
                                                    "sections": [10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2],
                                                    "names": GDP_NAMES},
              {"pred": lambda rep: rep.get("unsupported") is True or rep["ok"] is True}))
    return C


# The checks by spec section, in the order they run; each group gets the ops this Megatron supports.
GROUPS = (layer_map_checks, parse_checks, count_checks, segment_checks, retarget_checks, fsdp_checks, split_checks,
          integrity_checks, gdp_checks, gtp_checks, protocol_checks)


def checks(supports=()):
    return [row for group in GROUPS for row in group(supports)]


def judge(expect, reply):
    if "result" in expect:
        if not reply.get("ok"):
            return False
        want, got = expect["result"], reply.get("result")
        if isinstance(want, dict) and want.get("ok") is False and isinstance(got, dict):
            return got.get("ok") is False and got.get("error", {}).get("kind") == want["error"]["kind"] \
                and got.get("pattern") == want["pattern"]
        return want == got
    if "kind" in expect:
        return reply.get("ok") is False and reply.get("error", {}).get("kind") == expect["kind"]
    try:
        return bool(expect["pred"](reply))
    except Exception:  # noqa: BLE001
        return False


def run_checks(adapter, verbose, supports, quiet=False):
    failures = []
    C = checks(supports)
    for name, req, expect in C:
        try:
            reply = adapter.raw(req) if isinstance(req, str) else adapter.send(req)
        except (TimeoutError, EOFError, ValueError) as exc:
            failures.append(name)
            if not quiet:
                print(f"FAIL {name}: {exc}")
            return failures, len(C)
        ok = judge(expect, reply)
        if not ok:
            failures.append(name)
        if not quiet and (verbose or not ok):
            print(f"{'ok  ' if ok else 'FAIL'} {name}")
            if not ok:
                print(f"     request:  {json.dumps(req) if not isinstance(req, str) else req}")
                print(f"     expected: {json.dumps(expect, default=lambda f: '<predicate>')}")
                print(f"     got:      {json.dumps(reply)}")
    return failures, len(C)


def hello(adapter):
    rep = adapter.send({"op": "hello", "protocol": 1}, timeout=180)
    if not rep.get("ok"):
        raise RuntimeError(f"hello failed: {rep}")
    return rep


def main():
    ap = argparse.ArgumentParser(description="Megatron adapter self-test")
    ap.add_argument("--python", default=default_python())
    ap.add_argument("--megatron-path", default=None)
    ap.add_argument("--all-mutants", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    if not os.path.exists(args.python):
        print(f"selftest: {args.python} not found; run ci/install-megatron.sh first", file=sys.stderr)
        return 2
    start = time.time()
    adapter = Adapter(args.python, args.megatron_path)
    try:
        info = hello(adapter)
        print(f"megatron-core {info['megatron_version']} (torch {info['torch_version']}) from {info['megatron_path']}"
              f" revision {info.get('megatron_revision')}")
        print("supports: " + " ".join(info["supports"]))
        supports = info["supports"]
        failures, total = run_checks(adapter, args.verbose, supports)
        # mutants: list, apply one in this process, one per process
        lst = adapter.send({"op": "mutants"})
        n_mutants = len(lst.get("result", {}).get("mutants", []))
        extra = [("mutants listed (>= 8)", n_mutants >= 8)]
        applied = adapter.send({"op": "mutate", "name": "maps_accept_mixed"})
        mixed = adapter.send({"op": "pattern_maps", "pattern": "M*-M*E"})
        again = adapter.send({"op": "mutate", "name": "fresh_init_empty"})
        extra += [("mutate applies a mutant", applied.get("ok") is True and mixed["result"]["ok"] is True),
                  ("one mutant per process", again.get("error", {}).get("kind") == "already_mutated")]
        for name, ok in extra:
            total += 1
            if not ok:
                failures.append(name)
                print(f"FAIL {name}")
            elif args.verbose:
                print(f"ok   {name}")
    finally:
        adapter.close()
    bad = Adapter(args.python, "/nonexistent-megatron-checkout")
    try:
        rep = bad.send({"op": "hello", "protocol": 1}, timeout=180)
        ok = rep.get("ok") is False and "megatron/core" in rep.get("error", {}).get("message", "")
    finally:
        bad.close()
    total += 1
    if not ok:
        failures.append("a --megatron-path without megatron/core is refused")
        print(f"FAIL a --megatron-path without megatron/core is refused: {rep}")
    elif args.verbose:
        print("ok   a --megatron-path without megatron/core is refused")
    if args.all_mutants:
        from concurrent.futures import ThreadPoolExecutor
        names = [m["name"] for m in lst["result"]["mutants"]]

        def one(name):
            mut = Adapter(args.python, args.megatron_path, mutant=name)
            try:
                hello(mut)
                return run_checks(mut, False, supports, quiet=True)[0]
            finally:
                mut.close()

        survivors = []
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            for name, killed_by in zip(names, pool.map(one, names)):
                print(f"mutant {name}: {'killed by ' + str(len(killed_by)) + ' checks' if killed_by else 'SURVIVED'}")
                if not killed_by:
                    survivors.append(name)
        total += 1
        if survivors:
            failures.append("every mutant killed")
            print("mutants no check kills: " + ", ".join(survivors))
    print(f"selftest: {time.time() - start:.1f}s")
    print(f"{total - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
