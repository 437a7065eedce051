"""Megatron's training entry points in a real round trip (scenarios whose plan says "load_path": "training",
docs/roundtrip.md "Real models").

The save world calls megatron.training.checkpointing.save_checkpoint and the load world load_checkpoint, so
Megatron's own `_maybe_setup_gpt_to_hybrid_load` and retargeting decide the load (the worker does not retarget).
Both read Megatron's global args: they are built as Megatron builds them, by `arguments.parse_args` over an
argv written from the plan's model request and `arguments.validate_args`, then `set_global_variables`.
The GPT run's args (num_layers, no hybrid pattern) are what the checkpoint's common `args` say; the hybrid
run's carry --hybrid-layer-pattern.

What cannot run on CPU is stood in for by the patch registry's "training" family (patches/table.py,
docs/megatron-patches.md), in force while the args are validated, the model saved and loaded:
  - `training_rng_state_cuda`: save_checkpoint collects the RNG states (get_rng_state calls
    torch.cuda.get_rng_state) even with --no-save-rng, which then drops them; while saving, the module's
    get_rng_state answers None, the value --no-save-rng never writes.
  - `validate_args_device_arch`: validate_args reads the GPU's architecture when TP > 1; while validating it
    answers 0, and the run sets CUDA_DEVICE_MAX_CONNECTIONS=1 as Megatron's launch scripts do.
  - `tracker_cuda_all_reduce` (family "training_load", while load_checkpoint runs): read_metadata all-reduces
    the tracker's iteration on a CUDA tensor; it is made on the CPU. The load run names no iteration: Megatron
    finds the saved one in the tracker file its save wrote, as a resumed training run does.
The run's command line and environment are in force while Megatron parses and validates them ("training_run"),
and Megatron's global args while the run saves or loads ("training_globals"), each undone after.
The local linears keep no `_extra_state` (get_extra_state is None, set_extra_state ignores it): so that the
verifier can still tell every object apart, each linear of the saved model answers the plan's string for its
object (`object_values`), and the load world records what load_checkpoint hands each chunk's load_state_dict
(`recording_loads`), which is where the loaded objects are read.
"""

import contextlib
import os

from megatron_adapter import patches


class TrainingPathError(Exception):
    """The training path cannot be set up from the plan (a harness error)."""


class WrongIteration(Exception):
    """Megatron's load_checkpoint resumed another iteration than its save_checkpoint saved."""
    _ih_kind = "megatron_error"  # roundtrip/failures.py: raised by the harness, but Megatron's answer is wrong


ITERATION = 1

# Flags a Megatron may lack (flag -> why the run passes it where the parser knows it). megatron-core 0.19.2's
# parser has no --no-save-tokenizer-assets, and its save_checkpoint writes no tokenizer assets either.
FLAGS_IF_KNOWN = {
    "--no-save-tokenizer-assets": "nothing is tokenized: the run builds no tokenizer whose assets could be saved",
}

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
        a += ["--load", directory, "--no-load-rng", "--exit-on-missing-checkpoint"]
        a += [] if optimizer else ["--no-load-optim"]
    return [str(x) for x in a]


def known_flags():
    """The option strings of Megatron's own parser (add_megatron_arguments)."""
    import argparse
    from megatron.training import arguments
    parser = arguments.add_megatron_arguments(argparse.ArgumentParser(allow_abbrev=False))
    return set(parser._option_string_actions)


def parsed_args(req, side, directory, world_size, rank):
    """Megatron's args for this run of `world_size` ranks, parsed and validated by Megatron from the argv
    written from the request (and the run's environment)."""
    from megatron.training import arguments
    run_argv = argv(req, side, directory, world_size)
    try:
        with patches.applied("training_run", model=req["model"], argv=run_argv, rank=rank, world_size=world_size):
            args = arguments.parse_args()
            with patches.applied("training"):
                arguments.validate_args(args)
    except SystemExit as exc:  # argparse refusing the argv: the harness wrote it
        raise TrainingPathError(f"Megatron's parse_args refused {' '.join(run_argv)} (exit {exc.code})")
    return args


@contextlib.contextmanager
def global_args(req, side, directory, world_size, rank):
    """Megatron's global variables set from this run's args as its training start does (no tokenizer: nothing
    is tokenized) while in force; unset after."""
    with patches.applied("training_globals", args=parsed_args(req, side, directory, world_size, rank)) as held:
        yield held


def chunk_list(chunks):
    """The model list the training entry points take, in chunk order ("model" or "model0", "model1", ...)."""
    return [chunks[name] for name in sorted(chunks)]


@contextlib.contextmanager
def object_values(chunks, strings):
    """Each linear of the chunks answers get_extra_state with the plan's string for its object path
    ("<chunk>.<module path>._extra_state"); undone on exit. An object the plan leaves as None carries Megatron's
    own value: untouched."""
    undo = []
    try:
        for path, value in strings.items():
            if value is None:
                continue
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


def save(chunks, optimizer, strings, older=None):
    """save_checkpoint of the chunks and their optimizer (or None) at iteration 1 (no scheduler or RNG state);
    `older` (the plan's "saved_by_older_megatron"): the checkpoint as an older Megatron-LM wrote it, its args
    without `older["args"]` and its optimizer's param groups without `older["param_group_fields"]`."""
    from megatron.training.checkpointing import save_checkpoint
    from megatron.training.global_vars import get_args
    older = older or {}
    groups = optimizer.param_groups if optimizer is not None else []
    with patches.applied("training"), object_values(chunks, strings), \
            fields_without([vars(get_args())], older.get("args", ())), \
            fields_without(groups, older.get("param_group_fields", ())):
        save_checkpoint(ITERATION, chunk_list(chunks), optimizer, None, 0)


@contextlib.contextmanager
def fields_without(dicts, names):
    """While saving, each of `dicts` (Megatron's global args' fields, the optimizer's param groups) lacks `names`,
    the run's own values put back after: what an older Megatron-LM wrote (a Megatron that predates a field has
    none to take away). The GPT run that saves reads none of them."""
    held = [{n: d.pop(n) for n in names if n in d} for d in dicts]
    try:
        yield
    finally:
        for d, fields in zip(dicts, held):
            d.update(fields)


def param_groups_after_load(optimizer):
    """{"after_load_checkpoint/optimizer.param_groups.<i>.<field>": "json:<value>"} of the live optimizer's param
    groups (all but their params), for the verifier: what load_checkpoint left the resumed run with."""
    import json
    return {f"{AFTER_LOAD_CHECKPOINT}optimizer.param_groups.{i}.{field}": "json:" + json.dumps(value, default=repr)
            for i, group in enumerate(optimizer.param_groups) for field, value in group.items() if field != "params"}


AFTER_LOAD_CHECKPOINT = "after_load_checkpoint/"  # the verifier's kAfterLoadCheckpoint (verifier/verify_main.cc)


def load(chunks, optimizer):
    """load_checkpoint into the chunks (strict) and their optimizer (or None); returns {chunk name: the state
    dict each chunk loaded}."""
    from megatron.training.checkpointing import load_checkpoint
    with patches.applied("training", "training_load"), recording_loads(chunks, optimizer) as seen:
        iteration, _ = load_checkpoint(chunk_list(chunks), optimizer, None, strict=True)
    if iteration != ITERATION:  # Megatron read the tracker file its own save wrote: its answer, not the harness's
        raise WrongIteration(f"load_checkpoint answered iteration {iteration} from the tracker file; "
                             f"save_checkpoint saved iteration {ITERATION}")
    missing = set(chunks) - set(seen) | ({"optimizer"} - set(seen) if optimizer is not None else set())
    if missing:
        raise TrainingPathError(f"load_checkpoint loaded nothing into chunk(s) {sorted(missing)}")
    return seen
