"""What the round-trip worlds engine (roundtrip_world.py) needs around Megatron's
dist_checkpointing: the CPU patches, the round trip's mutants, and how a failure is told
apart (docs/roundtrip.md)."""

import os
import re
import traceback

# A save or load that fails for want of a GPU (cannot_run, not a finding): torch raises a bare
# RuntimeError or AssertionError for it from many places (torch.cuda, NCCL, device placement), with
# no type of its own, so the words of its message are what tells it from Megatron's own failures.
CUDA_WORDS = ("cuda", "nvidia", "nccl", "gpu")


def apply_cpu_patches(torch, M):
    """What Megatron's dist_checkpointing needs to save on a CPU-only machine (docs/roundtrip.md).
    Nothing is patched when CUDA is available."""
    patches = []
    if not torch.cuda.is_available():
        # filesystem_async.FileSystemWriterAsync.preload_tensors calls torch.cuda.synchronize()
        # whenever non_blocking (always true on the sync save path): nothing to wait for on CPU.
        torch.cuda.synchronize = lambda *a, **k: None
        patches.append("torch.cuda.synchronize -> no-op (FileSystemWriterAsync.preload_tensors)")
        # state_dict_saver.save_state_dict_async_finalize puts its failure flag on
        # torch.cuda.current_device() before broadcasting it; gloo broadcasts CPU tensors.
        torch.cuda.current_device = lambda: "cpu"
        patches.append("torch.cuda.current_device -> 'cpu' (save_state_dict_async_finalize's flag tensor)")
    from megatron.core.dist_checkpointing.strategies import filesystem_async
    if not getattr(filesystem_async, "HAVE_PSUTIL", True):
        # The writer logs its memory use through psutil; megatron-core does not depend on psutil
        # and the venv lacks it, so every write fails with "psutil is not installed".
        filesystem_async._process_memory = lambda: 0
        patches.append("filesystem_async._process_memory -> 0 (psutil is not installed)")
    return patches


def apply_speed_patches(filesystem_async):
    """Not needed for correctness: the synchronous save's writer threads hand their results to
    the caller through a queue that Megatron creates as a spawn-context multiprocessing.Manager
    queue (get_write_results_queue), which starts a server process; on 2 cores that process and
    its unpickling of torch objects cost ~12 s per rank. In the synchronous path the producer
    and consumer are threads of one process, so a queue.Queue carries the same items."""
    import queue
    if getattr(filesystem_async, "_results_queue", None) is None:
        filesystem_async._results_queue = queue.Queue()
        return ["filesystem_async._results_queue -> queue.Queue() (sync save: no Manager process)"]
    return []


LOCAL_MUTANTS = {
    "reverse_gpt_layers": "gpt_compatible_layer_maps numbers GPT layers in reverse (hybrid layer "
                          "mapped to GPT layer L-1-i): keys and shapes still match, data does not",
    "swiglu_halves_swapped": "the hybrid model's SwiGLU fc1 factory swaps the W and V chunk "
                             "offsets (needs --gated): W rows are read from V's place",
}


def apply_mutant(name, M):
    """An adapter mutant (megatron_adapter/mutants.py) or one of LOCAL_MUTANTS, in the world of its phase
    (mutants.phase_of: the loading run's, unless the mutant is of what a save writes)."""
    if name == "reverse_gpt_layers":
        original = M.interop.gpt_compatible_layer_maps

        def reversed_maps(pattern):
            maps = original(pattern)
            last = maps.num_gpt_layers - 1
            return type(maps)(attention_to_gpt={h: last - g for h, g in maps.attention_to_gpt.items()},
                              mlp_to_gpt={h: last - g for h, g in maps.mlp_to_gpt.items()},
                              fresh_init=maps.fresh_init, num_gpt_layers=maps.num_gpt_layers)
        M.interop.gpt_compatible_layer_maps = reversed_maps
        return
    if name == "swiglu_halves_swapped":
        original_factory = M.mlp.apply_swiglu_sharded_factory

        def swapped_factory(orig, offsets, *a, **k):
            factory = original_factory(orig, offsets, *a, **k)
            build = factory.build_fn

            def swapped_build(*b, **kb):
                pieces = build(*b, **kb)
                w, v = pieces
                w.global_offset, v.global_offset = v.global_offset, w.global_offset
                return pieces
            factory.build_fn = swapped_build
            return factory
        M.mlp.apply_swiglu_sharded_factory = swapped_factory
        return
    from megatron_adapter import mutants
    if name not in mutants.MUTANTS:
        raise ValueError(f"no mutant {name!r}: adapter mutants (adapter.py's mutants op) or "
                         f"{sorted(LOCAL_MUTANTS)}")
    mutants.apply(name, M)


# The harness's own worker code (this adapter folder), where a failure is the harness's. Its mutants and
# candidates stand in for Megatron's code, so they are not the harness's own.
_ADAPTER_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_STANDS_IN_FOR_MEGATRON = (os.path.join(_ADAPTER_DIR, "megatron_adapter", "mutants.py"),
                           os.path.join(_ADAPTER_DIR, "candidates") + os.sep)


def harness_own(filename):
    path = os.path.abspath(filename)
    return path.startswith(_ADAPTER_DIR) and not path.startswith(_STANDS_IN_FOR_MEGATRON)


# A frame of a traceback carried as text (DCP's CheckpointException holds each rank's traceback in its message).
_TEXT_FRAME = re.compile(r'File "([^"]*)", line (\d+), in (\S+)')


def megatron_frame(tb, message=""):
    """The deepest traceback frame inside megatron/ (Megatron's code, not this adapter) as 'file:line in
    function': of a traceback carried in the exception's `message` where it holds one (DCP reraises a rank's
    failure as a CheckpointException whose own traceback ends in DCP's load), else of `tb`."""
    carried = [(f, line, name) for f, line, name in _TEXT_FRAME.findall(message)
               if "megatron" + os.sep in f and not harness_own(f)]
    if carried:
        f, line, name = carried[-1]
        return f"{f[f.rfind('megatron' + os.sep):]}:{line} in {name}"
    best = None
    for frame in traceback.extract_tb(tb):
        if "megatron" + os.sep in frame.filename and not harness_own(frame.filename):
            best = f"{frame.filename[frame.filename.rfind('megatron' + os.sep):]}:{frame.lineno} in {frame.name}"
    return best


def never_left_the_harness(tb):
    """Whether every frame of the traceback is the harness's own worker code: the failure happened before
    (or instead of) any call into Megatron, torch or a mutant, so it cannot be Megatron's."""
    return all(harness_own(frame.filename) for frame in traceback.extract_tb(tb))
