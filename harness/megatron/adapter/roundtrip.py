#!/usr/bin/env python3
"""A real GPT -> hybrid checkpoint round trip through Megatron's dist_checkpointing, on CPU.

The harness (interop-harness roundtrip) writes a plan directory: plan.json, save_rank_<r>.json
(the GPT model's sharded state dict of save rank r, in the harness's flat entry JSON) and
load_rank_<r>.json (the hybrid model's, at the load layout). This script

  1. starts max(save ranks, load ranks) worker processes (this same file, --worker);
  2. save world (gloo, file store): every save rank builds REAL Megatron ShardedTensor /
     ShardedObject / ShardedTensorFactory objects from its JSON (megatron_adapter.codec.Codec), fills
     every tensor with provenance-oracle data and calls megatron.core.dist_checkpointing.save;
  3. load world (a new gloo group): every load rank builds the hybrid state dict, gives fresh
     (Mamba) entries distinct pre-load values and all others zeros, retargets it with Megatron's
     gpt_compatible_layer_maps + retarget_sharded_state_dict_to_gpt_checkpoint, calls
     dist_checkpointing.load and checks every loaded element against the oracle of the GPT key and
     global index it should have come from (derived independently of Megatron's retarget);
  4. prints one JSON summary line on stdout; progress lines {"progress": "..."} come before it.

Exit codes: 0 every check passed, 1 a check failed, 3 harness error (bad plan, a worker crashed),
4 timeout, 5 Megatron's save/load cannot run on this machine (e.g. it needs CUDA). The oracle and
the checks are described in docs/roundtrip.md.

Usage: roundtrip.py --plan DIR/plan.json [--timeout S] [--megatron-path DIR] [--no-cpu-patches]
"""

import argparse
import datetime
import json
import os
import re
import subprocess
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(1, HERE)

from megatron_adapter.roundtrip_support import (CUDA_WORDS, apply_cpu_patches, apply_mutant,  # noqa: E402
                                                apply_speed_patches, megatron_frame)

KEY_SHIFT = 40                      # oracle value = key_id << 40 | linear global index
INDEX_MASK = (1 << KEY_SHIFT) - 1
MAX_MISMATCHES = 50
EXIT_OK, EXIT_CHECK_FAILED, EXIT_HARNESS, EXIT_TIMEOUT, EXIT_CANNOT_RUN = 0, 1, 3, 4, 5
LAYER_RE = re.compile(r"decoder\.layers\.(\d+)\.")
OMITTED_SUFFIX = "output_layer._extra_state"


# ---------------------------------------------------------------------------------------------
# Shared helpers (no torch needed)

def emit(fd, obj):
    """One JSON line on the protocol fd, in a single write (atomic for lines under PIPE_BUF)."""
    os.write(fd, (json.dumps(obj) + "\n").encode())


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


class Plan:
    def __init__(self, path):
        self.dir = os.path.dirname(os.path.abspath(path))
        p = read_json(path)
        self.pattern = p["pattern"]
        self.num_gpt_layers = p["num_gpt_layers"]
        self.save_files = [os.path.join(self.dir, f) for f in p["save"]["files"]]
        self.load_files = [os.path.join(self.dir, f) for f in p["load"]["files"]]
        self.ckpt = os.path.join(self.dir, "checkpoint")
        self.results = os.path.join(self.dir, "results")

    @property
    def ranks_save(self):
        return len(self.save_files)

    @property
    def ranks_load(self):
        return len(self.load_files)


def gpt_catalogue(plan):
    """Every storage key the GPT run saves: key -> (key_id, global shape), ids from 1 in key order;
    and every ShardedObject (key, global offset) it saves."""
    shapes, objects = {}, set()
    for path in plan.save_files:
        for item in read_json(path):
            e = item["entry"]
            if e["kind"] == "tensor":
                shapes.setdefault(e["key"], tuple(e["global_shape"]))
            elif e["kind"] == "factory" and e.get("factory") == "swiglu":
                shapes.setdefault(e["tensor"]["key"], tuple(e["tensor"]["global_shape"]))
            elif e["kind"] == "object":
                objects.add((e["key"], tuple(e["global_offset"])))
    return {k: (i + 1, shapes[k]) for i, k in enumerate(sorted(shapes))}, objects


def hybrid_layer_targets(pattern):
    """hybrid index -> None (fresh, 'M') or GPT layer index, from the pattern's text alone: the
    i-th '*' is GPT layer i, the i-th MLP position ('-' or 'E') is GPT layer i (spec 2.2)."""
    main = pattern.split("/", 1)[0].replace("|", "")
    out, attention, mlp = {}, 0, 0
    for h, symbol in enumerate(main):
        if symbol == "M":
            out[h] = None
        elif symbol == "*":
            out[h], attention = attention, attention + 1
        elif symbol in "-E":
            out[h], mlp = mlp, mlp + 1
    return out


def expected_source(key, targets, num_layers):
    """Where a hybrid storage key's data comes from in the GPT checkpoint, independently of
    Megatron's retarget: ("fresh", None) for output_layer._extra_state and Mamba layers, else
    ("gpt", gpt_key, layer index or None)."""
    if key.endswith(OMITTED_SUFFIX):
        return ("fresh", None, None)
    m = LAYER_RE.search(key)
    if m:
        h = int(m.group(1))
        if h not in targets:
            return ("unknown", None, None)
        if targets[h] is None:
            return ("fresh", None, None)
        return ("gpt", key[:m.start()] + "decoder.layers." + key[m.end():], targets[h])
    if "decoder.final_norm." in key:
        return ("gpt", key.replace("decoder.final_norm.", "decoder.final_layernorm.", 1), None)
    return ("gpt", key, None)


# ---------------------------------------------------------------------------------------------
# Parent: start the workers, wait with a timeout, aggregate.

def parent(args):
    started = time.monotonic()
    proto = os.dup(1)
    os.dup2(2, 1)  # nothing torch or Megatron prints can reach the protocol channel
    sys.stdout = sys.stderr
    summary = {"ok": False, "ranks_save": 0, "ranks_load": 0, "tensors_checked": 0, "elements_checked": 0,
               "mismatches": [], "seconds": 0.0}

    def finish(code, **extra):
        summary.update(extra)
        summary["seconds"] = round(time.monotonic() - started, 2)
        emit(proto, summary)
        return code

    try:
        plan = Plan(args.plan)
    except (OSError, KeyError, ValueError) as exc:
        return finish(EXIT_HARNESS, error={"kind": "bad_plan", "message": f"{type(exc).__name__}: {exc}"})
    summary.update(ranks_save=plan.ranks_save, ranks_load=plan.ranks_load, pattern=plan.pattern)
    for d in (plan.ckpt, plan.results):
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            os.remove(os.path.join(d, name))  # a kept plan dir reused: start clean
    for name in ("store_save", "store_load"):
        if os.path.exists(os.path.join(plan.dir, name)):
            os.remove(os.path.join(plan.dir, name))
    n = max(plan.ranks_save, plan.ranks_load)
    emit(proto, {"progress": f"starting {n} worker processes (gloo on CPU; importing Megatron takes ~15 s)"})
    env = dict(os.environ)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    env.setdefault("OMP_NUM_THREADS", "1")
    workers = []
    for i in range(n):
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", str(i), "--plan", args.plan,
               "--progress-fd", str(proto), "--timeout", str(args.timeout)]
        if args.megatron_path:
            cmd += ["--megatron-path", args.megatron_path]
        if args.no_cpu_patches:
            cmd.append("--no-cpu-patches")
        if args.no_speed_patches:
            cmd.append("--no-speed-patches")
        if args.mutant:
            cmd += ["--mutant", args.mutant]
        cmd += ["--strict", args.strict]
        workers.append(subprocess.Popen(cmd, env=env, pass_fds=(proto,), stdin=subprocess.DEVNULL))
    deadline = started + args.timeout
    codes = [None] * n
    while any(c is None for c in codes):
        for i, w in enumerate(workers):
            if codes[i] is None:
                codes[i] = w.poll()
        failed = [i for i, c in enumerate(codes) if c not in (None, 0)]
        if failed and any(c is None for c in codes):
            time.sleep(2)  # let the others report their own error first, then stop them
            for i, w in enumerate(workers):
                if w.poll() is None:
                    w.kill()
                codes[i] = w.wait()
            break
        if time.monotonic() > deadline:
            for w in workers:
                if w.poll() is None:
                    w.kill()
            for w in workers:
                w.wait()
            return finish(EXIT_TIMEOUT, error={"kind": "timeout",
                                               "message": f"workers did not finish within {args.timeout} s"})
        time.sleep(0.1)

    results = []
    for i in range(n):
        path = os.path.join(plan.results, f"worker_{i}.json")
        results.append(read_json(path) if os.path.exists(path) else None)
    errors = [dict(r["error"], worker=i) for i, r in enumerate(results) if r and r.get("error")]
    for r in results:
        if not r:
            continue
        for field in ("tensors_checked", "elements_checked", "objects_checked", "fresh_checked",
                      "optimizer_mirrors_checked", "plain_checked"):
            summary[field] = summary.get(field, 0) + r.get(field, 0)
        summary["mismatches"].extend(r.get("mismatches", []))
        for field in ("cpu_patches", "speed_patches"):
            if r.get(field) is not None:
                summary[field] = r[field]
        for field in ("megatron_version", "torch_version", "save_seconds", "load_seconds"):
            if field in r:
                summary[field] = max(summary.get(field, r[field]), r[field]) if "seconds" in field else r[field]
    summary["mismatch_count"] = len(summary["mismatches"]) + sum(r.get("mismatches_dropped", 0) for r in results if r)
    summary["mismatches"] = summary["mismatches"][:MAX_MISMATCHES]
    if errors:
        cannot = [e for e in errors if e.get("cannot_run")]
        if cannot:
            return finish(EXIT_CANNOT_RUN, error=cannot[0], cannot_run=True)
        raised = [e for e in errors if e["kind"] == "megatron_error"]
        if raised and len(raised) == len(errors):
            # Megatron's save, retarget or load raised: the round trip failed (a failed check).
            summary["mismatches"] = [f"worker {e['worker']}: {e['stage']} raised {e['message'][:600]} "
                                     f"(at {e['megatron_frame']})" for e in raised] + summary["mismatches"]
            summary["mismatch_count"] += len(raised)
            return finish(EXIT_CHECK_FAILED, error=raised[0])
        return finish(EXIT_HARNESS, error=[e for e in errors if e["kind"] != "megatron_error"][0])
    missing = [i for i, r in enumerate(results) if r is None]
    if missing or any(c != 0 for c in codes):
        return finish(EXIT_HARNESS, error={"kind": "worker_failed", "message":
                                           f"worker exit codes {codes}; no result from workers {missing}"})
    requested = set()
    for r in results:
        if r:
            requested.update(r.get("gpt_keys_loaded", []))
    try:
        catalogue, gpt_objects = gpt_catalogue(plan)
        never = sorted(set(catalogue) - requested) + sorted({k for k, _ in gpt_objects} - requested)
    except (OSError, KeyError, ValueError):
        never = []
    summary["gpt_keys_loaded"] = len(requested)
    for key in never:
        summary["mismatches"].append(f"GPT key {key} was saved but no load rank read it")
    summary["mismatch_count"] += len(never)
    if summary["tensors_checked"] == 0:
        return finish(EXIT_HARNESS, error={"kind": "nothing_checked", "message": "no tensor was checked"})
    summary["ok"] = summary["mismatch_count"] == 0
    emit(proto, {"progress": f"checked {summary['tensors_checked']} tensors, {summary['elements_checked']} elements"})
    return finish(EXIT_OK if summary["ok"] else EXIT_CHECK_FAILED)


# ---------------------------------------------------------------------------------------------
# Worker

class Oracle:
    def __init__(self, torch, catalogue, hybrid_ids):
        self.torch = torch
        self.catalogue = catalogue          # GPT key -> (id, global shape)
        self.by_id = {v[0]: (k, v[1]) for k, v in catalogue.items()}
        self.hybrid_ids = hybrid_ids        # hybrid fresh key -> id (negative values)

    @staticmethod
    def strides(shape):
        out, s = [], 1
        for d in reversed(shape):
            out.append(s)
            s *= d
        return list(reversed(out))

    def block(self, key_id, gshape, goffset, local_shape, prepend, row_map=None):
        """Oracle values of the local block: element x sits at global index
        (goffset[:prepend], goffset[prepend:] + x). row_map, when given, replaces the global
        index of local row r on axis `prepend` (the SwiGLU W/V interleave)."""
        torch = self.torch
        st = self.strides(gshape)
        value = torch.full(tuple(local_shape), key_id << KEY_SHIFT, dtype=torch.int64)
        for a in range(prepend):
            value += goffset[a] * st[a]
        for j, n in enumerate(local_shape):
            a = prepend + j
            idx = torch.arange(n, dtype=torch.int64) + goffset[a]
            if j == 0 and row_map is not None:
                idx = row_map
            shape = [1] * len(local_shape)
            shape[j] = n
            value += (idx * st[a]).reshape(shape)
        return value

    def describe(self, v):
        if v == 0:
            return "0 (never written: the pre-load value of a loaded entry)"
        if v < 0:
            return f"{v} (a fresh entry's pre-load value)"
        key_id, index = v >> KEY_SHIFT, v & INDEX_MASK
        if key_id not in self.by_id:
            return f"{v} (no oracle value)"
        key, shape = self.by_id[key_id]
        return f"{key}{list(self.unravel(index, shape))}"

    @staticmethod
    def unravel(index, shape):
        out = []
        for d in reversed(shape):
            out.append(index % d)
            index //= d
        return tuple(reversed(out))


def swiglu_rows(torch, orig):
    """Global rows (on the TP axis) of the local rows of a SwiGLU fc1 tensor: the first half is
    W of TP rank t, the second half V; the global tensor is [W of all ranks | V of all ranks]
    (spec 2.3). orig is the factory's original tensor entry."""
    p = orig["prepend_axis_num"]
    n = orig["local_shape"][0]
    total = orig["global_shape"][p]
    t = orig["global_offset"][p] // n
    r = torch.arange(n, dtype=torch.int64)
    half = n // 2
    return (r // half) * (total // 2) + t * half + (r % half)


def worker(args):
    result = {"worker": args.worker, "tensors_checked": 0, "elements_checked": 0, "objects_checked": 0,
              "fresh_checked": 0, "optimizer_mirrors_checked": 0, "plain_checked": 0, "mismatches": []}
    plan = Plan(args.plan)
    out_path = os.path.join(plan.results, f"worker_{args.worker}.json")
    progress = args.progress_fd
    stage = "import"
    try:
        from megatron_adapter.megatron_import import load_megatron
        from megatron_adapter.codec import Codec
        M = load_megatron(args.megatron_path)
        torch = M.torch
        import torch.distributed as dist
        from megatron.core import dist_checkpointing
        result["megatron_version"] = M.megatron_version
        result["torch_version"] = torch.__version__
        if M.interop is None or M.mlp is None:
            raise RuntimeError("this Megatron lacks " + ("gpt_checkpoint_interop" if M.interop is None else "transformer.mlp")
                               + ": " + json.dumps(M.import_errors))
        result["cpu_patches"] = [] if args.no_cpu_patches else apply_cpu_patches(torch, M)
        if not args.no_speed_patches:
            from megatron.core.dist_checkpointing.strategies import filesystem_async
            result["speed_patches"] = apply_speed_patches(filesystem_async)
        codec = Codec(M)
        catalogue, gpt_objects = gpt_catalogue(plan)
        oracle = Oracle(torch, catalogue, {})
        oracle.hybrid_targets = hybrid_layer_targets(plan.pattern)
        oracle.num_layers = plan.num_gpt_layers
        timeout = datetime.timedelta(seconds=max(10, args.timeout))

        if args.worker < plan.ranks_save:
            stage = "save"
            dist.init_process_group("gloo", init_method="file://" + os.path.join(plan.dir, "store_save"),
                                    rank=args.worker, world_size=plan.ranks_save, timeout=timeout)
            sd = build_gpt(plan.save_files[args.worker], codec, M, oracle)
            t0 = time.monotonic()
            stage = "save: dist_checkpointing.save"
            dist_checkpointing.save(sd, plan.ckpt)
            dist.barrier()
            result["save_seconds"] = round(time.monotonic() - t0, 2)
            if args.worker == 0:
                emit(progress, {"progress": f"saved the GPT checkpoint from {plan.ranks_save} ranks "
                                            f"({result['save_seconds']} s): {len(os.listdir(plan.ckpt))} files"})
            dist.destroy_process_group()

        if args.worker < plan.ranks_load:
            stage = "load"
            if args.mutant:  # the loading run's Megatron is the mutated one
                apply_mutant(args.mutant, M)
                result["mutant"] = args.mutant
            dist.init_process_group("gloo", init_method="file://" + os.path.join(plan.dir, "store_load"),
                                    rank=args.worker, world_size=plan.ranks_load, timeout=timeout)
            entries = read_json(plan.load_files[args.worker])
            sd, pre = build_hybrid(entries, codec, M, oracle)
            stage = "load: retarget"
            maps = M.interop.gpt_compatible_layer_maps(plan.pattern)
            M.interop.retarget_sharded_state_dict_to_gpt_checkpoint(sd, maps)
            t0 = time.monotonic()
            stage = "load: dist_checkpointing.load"
            loaded = dist_checkpointing.load(sd, plan.ckpt, strict=args.strict)
            result["load_seconds"] = round(time.monotonic() - t0, 2)
            stage = "check"
            check(entries, loaded, pre, plan, oracle, gpt_objects, result)
            dist.barrier()
            if args.worker == 0:
                emit(progress, {"progress": f"loaded into the hybrid model on {plan.ranks_load} ranks "
                                            f"({result['load_seconds']} s)"})
            dist.destroy_process_group()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - DCP's CheckpointException is a BaseException
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        if len(lines) > 1 and "Traceback" in str(exc):
            lines = [lines[0], "...", lines[-1]]  # DCP wraps the rank's traceback into its text
        text = f"{type(exc).__name__}: " + " ".join(" ".join(lines).split())
        tb = traceback.format_exc()
        print(tb, file=sys.stderr, flush=True)
        in_megatron = stage.startswith(("save: ", "load: "))
        cannot = in_megatron and any(w in text.lower() for w in CUDA_WORDS)
        result["error"] = {"kind": "cannot_run" if cannot else ("megatron_error" if in_megatron else "harness_error"),
                           "stage": stage, "message": text[:2000], "megatron_frame": megatron_frame(exc.__traceback__),
                           "cannot_run": cannot}
    with open(out_path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(result, f)
    os.replace(out_path + ".tmp", out_path)
    return EXIT_OK if "error" not in result else EXIT_HARNESS


def _set_dtype(entry):
    e = dict(entry)
    e["dtype"] = "int64"  # the oracle's dtype: every value exact
    return e


def build_gpt(path, codec, M, oracle):
    """The GPT rank's state dict with oracle data in every tensor and object."""
    torch = M.torch
    sd = {}
    for i, item in enumerate(read_json(path)):
        e, where = item["entry"], f"{os.path.basename(path)}[{i}]"
        kind = e["kind"]
        if kind == "tensor":
            st = codec.tensor(_set_dtype(e), where)
            key_id, gshape = oracle.catalogue[st.key]
            st.data = oracle.block(key_id, gshape, st.global_offset, st.local_shape, st.prepend_axis_num)
            sd[item["path"]] = st
        elif kind == "factory":
            f = dict(e, tensor=_set_dtype(e["tensor"]))
            factory = codec.factory(f, where)
            orig = f["tensor"]
            key_id, gshape = oracle.catalogue[orig["key"]]
            factory.data = oracle.block(key_id, gshape, orig["global_offset"], orig["local_shape"],
                                        orig["prepend_axis_num"], row_map=swiglu_rows(torch, orig))
            sd[item["path"]] = factory
        elif kind == "object":
            so = codec.leaf(e, where)
            so.data = ["oracle-object", so.key, list(so.global_offset)]
            sd[item["path"]] = so
        elif kind == "plain":
            sd[item["path"]] = e.get("value")
        elif kind == "local":
            sd[item["path"]] = M.LocalNonpersistentObject(e.get("value"))
    return sd


def build_hybrid(entries, codec, M, oracle):
    """The hybrid rank's state dict: loaded entries hold zeros, fresh entries (Mamba layers,
    output_layer._extra_state) distinct negative values. Returns (sd, {path: pre-load value})."""
    torch = M.torch
    sd, pre = {}, {}
    for i, item in enumerate(entries):
        e, path, where = item["entry"], item["path"], f"load entry {i}"
        kind = e["kind"]
        if kind in ("tensor", "factory"):
            meta = e if kind == "tensor" else e["tensor"]
            src = expected_source(meta["key"], oracle.hybrid_targets, oracle.num_layers)
            shape = tuple(meta["local_shape"])
            if src[0] == "fresh":
                fid = oracle.hybrid_ids.setdefault(meta["key"], len(oracle.hybrid_ids) + 1)
                data = -oracle.block(fid, tuple(meta["global_shape"]), meta["global_offset"], shape,
                                     meta["prepend_axis_num"]) - 1
            else:
                data = torch.zeros(shape, dtype=torch.int64)
            if kind == "tensor":
                obj = codec.tensor(_set_dtype(e), where)
            else:
                obj = codec.factory(dict(e, tensor=_set_dtype(e["tensor"])), where)
            obj.data = data
            pre[path] = data.clone()
            sd[path] = obj
        elif kind == "object":
            so = codec.leaf(e, where)
            so.data = ["hybrid-preload", so.key, list(so.global_offset)]
            pre[path] = list(so.data)
            sd[path] = so
        elif kind == "plain":
            sd[path] = e.get("value")
        elif kind == "local":
            sd[path] = M.LocalNonpersistentObject(e.get("value"))
    return sd, pre


def check(entries, loaded, pre, plan, oracle, gpt_objects, result):
    """Every loaded entry against what it should hold (docs/roundtrip.md)."""
    torch = oracle.torch
    mism = result["mismatches"]
    expected_of = {}  # path -> (gpt key, expected tensor) for the optimizer mirror check
    loaded_keys = set()

    def miss(text):
        text = " ".join(text.split())
        if len(text) > 600:
            text = text[:600] + " ..."
        if len(mism) < MAX_MISMATCHES:
            mism.append(f"rank {result['worker']}: {text}")
        else:
            result["mismatches_dropped"] = result.get("mismatches_dropped", 0) + 1

    for item in entries:
        e, path = item["entry"], item["path"]
        kind = e["kind"]
        if kind in ("plain", "local"):
            continue
        if path not in loaded:
            miss(f"{path}: missing from the loaded state dict")
            continue
        got = loaded[path]
        meta = e["tensor"] if kind == "factory" else e
        src = expected_source(meta["key"], oracle.hybrid_targets, oracle.num_layers)
        if src[0] == "unknown":
            miss(f"{path}: hybrid key {meta['key']} names a layer outside the pattern")
            continue
        if kind == "object":
            result["objects_checked"] += 1
            if src[0] == "fresh":
                if got != pre[path]:
                    miss(f"{path}: fresh object {meta['key']} was replaced by {got!r}")
                continue
            offset = list(meta["global_offset"])
            if src[2] is not None:
                offset = [src[2]] if (meta["global_shape"] == [1] and offset == [0]) else [src[2]] + offset
            want = ["oracle-object", src[1], offset]
            loaded_keys.add(src[1])
            if (src[1], tuple(offset)) not in gpt_objects:
                miss(f"{path}: object {src[1]} at {offset} was never saved by the GPT run")
            elif got != want:
                miss(f"{path}: object {meta['key']} should be GPT's {src[1]} at {offset}, got {got!r}")
            continue
        if not isinstance(got, torch.Tensor):
            miss(f"{path}: loaded value is {type(got).__name__}, not a tensor")
            continue
        result["tensors_checked"] += 1
        result["elements_checked"] += got.numel()
        if src[0] == "fresh":
            result["fresh_checked"] += 1
            if got.dtype != pre[path].dtype or got.shape != pre[path].shape or not torch.equal(got, pre[path]):
                miss(f"{path}: fresh entry {meta['key']} changed by the load")
            continue
        gpt_key, layer = src[1], src[2]
        if gpt_key not in oracle.catalogue:
            miss(f"{path}: GPT key {gpt_key} (from hybrid {meta['key']}) is not in the checkpoint")
            continue
        key_id, gshape = oracle.catalogue[gpt_key]
        loaded_keys.add(gpt_key)
        offset = list(meta["global_offset"])
        prepend = meta["prepend_axis_num"]
        if layer is not None:
            offset, prepend = [layer] + offset, prepend + 1
        rows = None
        if kind == "factory":
            lm = dict(meta, global_offset=offset, prepend_axis_num=prepend)
            lm["global_shape"] = list(gshape)
            rows = swiglu_rows(torch, lm)
        want = oracle.block(key_id, gshape, offset, tuple(meta["local_shape"]), prepend, row_map=rows)
        expected_of[path] = (gpt_key, want)
        if got.shape != want.shape:
            miss(f"{path}: loaded shape {list(got.shape)}, expected {list(want.shape)}")
            continue
        bad = (got.to(torch.int64) != want).nonzero()
        if len(bad):
            x = tuple(int(v) for v in bad[0])
            g = oracle.unravel(int(want[x]) & INDEX_MASK, gshape)
            miss(f"{path}: {len(bad)} of {want.numel()} elements misplaced; first: {gpt_key}{list(g)} "
                 f"(local {list(x)}) holds {oracle.describe(int(got[x]))}")

    # Optimizer entries mirror their parameters: same global indices, state key for param key.
    by_key = {}
    for item in entries:
        meta = item["entry"].get("tensor", item["entry"])
        if "key" in meta:
            by_key[meta["key"]] = item["path"]
    for item in entries:
        meta = item["entry"].get("tensor", item["entry"])
        m = re.match(r"optimizer\.state\.([^.]+)\.(.*)", meta.get("key", ""))
        if not m or item["entry"]["kind"] == "object":
            continue
        param_path = by_key.get(m.group(2))
        if param_path is None:
            miss(f"{item['path']}: optimizer entry without a parameter {m.group(2)}")
            continue
        opt, par = loaded.get(item["path"]), loaded.get(param_path)
        if item["path"] not in expected_of or param_path not in expected_of:
            continue  # fresh (checked untouched above) or already reported
        result["optimizer_mirrors_checked"] += 1
        (ok_key, _), (pk_key, _) = expected_of[item["path"]], expected_of[param_path]
        if ok_key != "optimizer.state." + m.group(1) + "." + pk_key:
            miss(f"{item['path']}: optimizer state maps to {ok_key}, its parameter to {pk_key}")
            continue
        if not torch.equal(opt & INDEX_MASK, par & INDEX_MASK):
            miss(f"{item['path']}: optimizer state does not mirror {param_path} element by element")

    result["gpt_keys_loaded"] = sorted(loaded_keys)

    # Common (plain) values come back from the checkpoint's common state.
    saved_plain = {}
    for item in read_json(plan.save_files[0]):
        if item["entry"]["kind"] == "plain":
            saved_plain[item["path"]] = item["entry"].get("value")
    for item in entries:
        if item["entry"]["kind"] == "plain" and item["path"] in saved_plain:
            result["plain_checked"] += 1
            if loaded.get(item["path"]) != saved_plain[item["path"]]:
                miss(f"{item['path']}: common value {loaded.get(item['path'])!r}, saved {saved_plain[item['path']]!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--megatron-path")
    ap.add_argument("--no-cpu-patches", action="store_true",
                    help="run Megatron unpatched (shows what stops it on a CPU-only machine)")
    ap.add_argument("--no-speed-patches", action="store_true",
                    help="keep Megatron's multiprocessing.Manager results queue (slower on few cores)")
    ap.add_argument("--strict", default="assume_ok_unexpected",
                    help="dist_checkpointing.load strict mode (others fail on torch 2.15: docs/roundtrip.md)")
    ap.add_argument("--mutant", help="apply one adapter-side Megatron mutant (mutants.py) in every worker")
    ap.add_argument("--worker", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--progress-fd", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker is None:
        return parent(args)
    os.dup2(2, 1)  # the worker's own stdout is diagnostics only
    sys.stdout = sys.stderr
    code = worker(args)
    # The result file is written; skip interpreter teardown (gloo and torch atexit work take
    # seconds and can hang on a dead peer).
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
