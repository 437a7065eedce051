"""Megatron's training entry points in a real round trip (scenarios whose plan says "load_path": "training",
docs/roundtrip.md "Real models").

The save world calls megatron.training.checkpointing.save_checkpoint and the load world load_checkpoint, so
Megatron's own `_maybe_setup_gpt_to_hybrid_load` and retargeting decide the load (the worker does not retarget).
Both read Megatron's global args: they are built as Megatron builds them, by `arguments.parse_args` over an
argv written from the plan's model request and `arguments.validate_args`, then `set_global_variables`.
The GPT run's args (num_layers, no hybrid pattern) are what the checkpoint's common `args` say; the hybrid
run's carry --hybrid-layer-pattern.

What cannot run on CPU is stood in for, each declared in docs/megatron-patches.md ("Training entry points")
and checked like shims.py's (still needed, still matching) in `applied()`:
  - `training_rng_state_cuda`: save_checkpoint collects the RNG states (get_rng_state calls
    torch.cuda.get_rng_state) even with --no-save-rng, which then drops them; while saving, the module's
    get_rng_state answers None, the value --no-save-rng never writes.
  - `validate_args_device_arch`: validate_args reads the GPU's architecture when TP > 1; while validating it
    answers 0, and the run sets CUDA_DEVICE_MAX_CONNECTIONS=1 as Megatron's launch scripts do.
  - `tracker_cuda_all_reduce`: read_metadata all-reduces the tracker's iteration on a CUDA tensor. The load
    run names the iteration with Megatron's own --ckpt-step and reads a directory holding the saved
    iteration's folder but no tracker file (`load_view`), so read_metadata is never reached.
The local linears keep no `_extra_state` (get_extra_state is None, set_extra_state ignores it): so that the
verifier can still tell every object apart, each linear of the saved model answers the plan's string for its
object (`object_values`), and the load world records what load_checkpoint hands each chunk's load_state_dict
(`recording_loads`), which is where the loaded objects are read.
"""

import contextlib
import importlib
import inspect
import os
import sys

from megatron_adapter.real_models import shims


class TrainingPathError(Exception):
    """The training path cannot be set up from the plan (a harness error)."""


ITERATION = 1

# Flags a Megatron may lack (flag -> why the run passes it where the parser knows it). megatron-core 0.19.2's
# parser has no --no-save-tokenizer-assets, and its save_checkpoint writes no tokenizer assets either.
FLAGS_IF_KNOWN = {
    "--no-save-tokenizer-assets": "nothing is tokenized: the run builds no tokenizer whose assets could be saved",
}

# name -> (module, snippet that must still be there, why)
STANDINS = {
    "training_rng_state_cuda": (
        "megatron.training.checkpointing",
        "'cuda_rng_state': torch.cuda.get_rng_state(),",
        "save_checkpoint calls get_rng_state, which reads torch.cuda.get_rng_state, before --no-save-rng drops "
        "the result; while saving it answers None (never written)",
    ),
    "validate_args_device_arch": (
        "megatron.training.arguments",
        "and get_device_arch_version() < 10:",
        "validate_args asks the GPU's architecture (torch.cuda.get_device_properties) when TP > 1; while "
        "validating it answers 0 (pre-Blackwell), so Megatron requires CUDA_DEVICE_MAX_CONNECTIONS=1, which "
        "the run sets as Megatron's launch scripts do",
    ),
    "tracker_cuda_all_reduce": (
        "megatron.training.checkpointing",
        "iters_cuda = torch.tensor([iteration], dtype=torch.long, device='cuda')",
        "read_metadata all-reduces the tracker file's iteration as a CUDA tensor; the load run names the "
        "iteration with --ckpt-step and reads a folder without the tracker file, so it is never called",
    ),
}


def check():
    """[{"name", "needed", "why"}]; shims.ShimError when a stand-in's code is no longer in the checkout."""
    import torch
    out = []
    for name, (module_name, snippet, why) in STANDINS.items():
        try:
            source = inspect.getsource(importlib.import_module(module_name))
        except Exception as exc:  # noqa: BLE001
            raise shims.ShimError(f"stand-in {name}: cannot read {module_name}: {type(exc).__name__}: {exc}")
        if snippet not in source:
            raise shims.ShimError(f"stand-in {name}: {module_name} no longer contains {snippet!r}; re-read the "
                                  "code and update the stand-in")
        out.append({"name": name, "needed": not torch.cuda.is_available(), "why": why})
    return out


def argv(req, side, directory, world_size):
    """Megatron's command line of the run of `world_size` ranks that builds `req`: the GPT run that saves to
    `directory`, or the hybrid run that loads from it."""
    a = ["--tensor-model-parallel-size", req["tp"], "--pipeline-model-parallel-size", req["pp"],
         "--hidden-size", req["hidden"], "--num-attention-heads", req["num_attention_heads"],
         "--group-query-attention", "--num-query-groups", req["num_query_groups"],
         "--kv-channels", req["kv_channels"], "--ffn-hidden-size", req["ffn_hidden"],
         "--normalization", "LayerNorm" if req["norm"] == "layer" else "RMSNorm",
         "--seq-length", 64, "--max-position-embeddings", 64, "--micro-batch-size", 1,
         # one micro-batch per DP x GTP rank: validate_args requires the global batch to divide by both
         "--global-batch-size", world_size // (int(req["tp"]) * int(req["pp"])),
         "--vocab-size", req["vocab"], "--use-cpu-initialization", "--ckpt-format", "torch_dist"]
    if req["gated_mlp"]:
        a.append("--swiglu")
    if not req["add_bias"]:
        a.append("--disable-bias-linear")
    if not req["tied_embeddings"]:
        a.append("--untie-embeddings-and-output-weights")
    if int(req["gtp"]) != 1:  # Megatron's user-facing GTP size: every weight's shards over TP x GTP
        a += ["--tensor-parallel-num-weight-shards", int(req["tp"]) * int(req["gtp"])]
    if int(req["num_experts"]):  # the factory's MoE layer (SequentialMLP, top-1 router, pre-softmax)
        a += ["--num-experts", req["num_experts"], "--moe-ffn-hidden-size", req["moe_ffn_hidden"],
              "--moe-router-topk", 1, "--moe-router-pre-softmax", "--expert-model-parallel-size", req["ep"],
              "--expert-tensor-parallel-size", req["etp"]]
    elif int(req["ep"]) != 1:
        raise TrainingPathError("the training path's EP > 1 needs experts")
    if req["model"] == "gpt":
        a += ["--num-layers", req["layers"], "--position-embedding-type", "rope"]
    else:
        a += ["--hybrid-layer-pattern", req["pattern"], "--position-embedding-type", "none",
              "--mamba-num-heads", req["mamba_heads"], "--mamba-head-dim", req["mamba_head_dim"],
              "--mamba-num-groups", req["mamba_groups"], "--mamba-state-dim", req["mamba_state"]]
    # With the request's optimizer (FP32Optimizer: neither --bf16 nor --use-distributed-optimizer) both runs
    # keep optimizer state: the save writes it and the load retargets and loads it (its GPT -> hybrid setup).
    optimizer = bool(req.get("optimizer"))
    if optimizer and req.get("optimizer_kind") != "fp32":
        raise TrainingPathError("the training path runs the FP32Optimizer (optimizer_kind fp32) only")
    if side == "save":
        a += ["--save", directory, "--save-interval", ITERATION, "--no-save-rng"] + ([] if optimizer else ["--no-save-optim"])
        a += [flag for flag in FLAGS_IF_KNOWN if flag in known_flags()]
    else:
        a += ["--load", directory, "--no-load-rng", "--ckpt-step", ITERATION, "--exit-on-missing-checkpoint"]
        a += [] if optimizer else ["--no-load-optim"]
    return [str(x) for x in a]


def known_flags():
    """The option strings of Megatron's own parser (add_megatron_arguments)."""
    import argparse
    from megatron.training import arguments
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return set(parser._option_string_actions)


def megatron_args(req, side, directory, world_size, rank):
    """Megatron's args for this run, parsed and validated by Megatron, and Megatron's global variables set
    from them as its training start does (set_global_variables, no tokenizer: nothing is tokenized);
    an earlier scenario's are unset first."""
    from megatron.training import arguments, global_vars
    env = {"RANK": str(rank), "WORLD_SIZE": str(world_size), "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    saved_argv, saved_env = sys.argv, {name: os.environ.get(name) for name in env}
    sys.argv = ["pretrain_" + req["model"]] + argv(req, side, directory, world_size)
    os.environ.update(env)
    try:
        args = arguments.parse_args()
        with applied():
            arguments.validate_args(args)
    except SystemExit as exc:  # argparse refusing the argv: the harness wrote it
        raise TrainingPathError(f"Megatron's parse_args refused {' '.join(sys.argv[1:])} (exit {exc.code})")
    finally:
        sys.argv = saved_argv
        for name, value in saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    global_vars.unset_global_variables()
    global_vars.set_global_variables(args, build_tokenizer=False)
    return args


def chunk_list(chunks):
    """The model list the training entry points take, in chunk order ("model" or "model0", "model1", ...)."""
    return [chunks[name] for name in sorted(chunks)]


@contextlib.contextmanager
def applied():
    """The needed stand-ins in force (checked first); undone on exit."""
    needed = {s["name"] for s in check() if s["needed"]}
    from megatron.training import arguments, checkpointing
    undo = []

    def patch(obj, attr, value):
        undo.append((obj, attr, getattr(obj, attr)))
        setattr(obj, attr, value)
    if "training_rng_state_cuda" in needed:
        patch(checkpointing, "get_rng_state", lambda *args, **kwargs: None)
    if "validate_args_device_arch" in needed:
        patch(arguments, "get_device_arch_version", lambda: 0)
    try:
        yield
    finally:
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


@contextlib.contextmanager
def object_values(chunks, strings):
    """Each linear of the chunks answers get_extra_state with the plan's string for its object path
    ("<chunk>.<module path>._extra_state"); undone on exit."""
    undo = []
    try:
        for path, value in strings.items():
            name, _, key = path.partition(".")
            if name not in chunks or not key.endswith("._extra_state"):
                raise TrainingPathError(f"the plan's object {path} is no linear's _extra_state of a chunk")
            try:
                module = chunks[name].get_submodule(key[:-len("._extra_state")])
            except AttributeError as exc:
                raise TrainingPathError(f"the plan's object {path}: {exc}")
            undo.append(module)
            module.get_extra_state = (lambda v: lambda: v)(value)
        yield
    finally:
        for module in undo:
            del module.get_extra_state


@contextlib.contextmanager
def recording_loads(chunks, optimizer=None):
    """{chunk name: the state dict load_checkpoint handed the chunk's load_state_dict, "optimizer": the one it
    handed the optimizer's}, filled while in force; their own load_state_dict run unchanged."""
    seen = {}
    undo = []
    loaders = dict(chunks, **({"optimizer": optimizer} if optimizer is not None else {}))
    for name, model in loaders.items():
        original = model.load_state_dict

        def record(state_dict, *args, _name=name, _original=original, **kwargs):
            # A copy of the top level: the optimizer's load_state_dict pops and reorders entries.
            seen[_name] = dict(state_dict) if isinstance(state_dict, dict) else state_dict
            return _original(state_dict, *args, **kwargs)
        model.load_state_dict = record
        undo.append(model)
    try:
        yield seen
    finally:
        for model in undo:
            del model.load_state_dict


def iteration_dir(directory):
    from megatron.training.checkpointing import get_checkpoint_name
    return get_checkpoint_name(directory, ITERATION, return_base_dir=True)


def save(chunks, optimizer, strings):
    """save_checkpoint of the chunks and their optimizer (or None) at iteration 1 (no scheduler or RNG state)."""
    from megatron.training.checkpointing import save_checkpoint
    with applied(), object_values(chunks, strings):
        save_checkpoint(ITERATION, chunk_list(chunks), optimizer, None, 0)


def load_view(save_dir, view_dir):
    """A folder holding the saved iteration's folder (a link) and no tracker file (`tracker_cuda_all_reduce`)."""
    os.makedirs(view_dir, exist_ok=True)
    target = iteration_dir(save_dir)
    link = os.path.join(view_dir, os.path.basename(target))
    try:
        os.symlink(os.path.abspath(target), link)
    except FileExistsError:  # another rank of the world made it
        if os.path.realpath(link) != os.path.realpath(target):
            raise TrainingPathError(f"{link} exists and is not a link to {target}")
    return view_dir


def load(chunks, optimizer):
    """load_checkpoint into the chunks (strict) and their optimizer (or None); returns {chunk name: the state
    dict each chunk loaded}."""
    from megatron.training.checkpointing import load_checkpoint
    with applied(), recording_loads(chunks, optimizer) as seen:
        iteration, _ = load_checkpoint(chunk_list(chunks), optimizer, None, strict=True)
    if iteration != ITERATION:
        raise TrainingPathError(f"load_checkpoint answered iteration {iteration}, the save wrote {ITERATION}")
    missing = set(chunks) - set(seen) | ({"optimizer"} - set(seen) if optimizer is not None else set())
    if missing:
        raise TrainingPathError(f"load_checkpoint loaded nothing into chunk(s) {sorted(missing)}")
    return seen
