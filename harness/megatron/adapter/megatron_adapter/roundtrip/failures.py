"""How a round-trip rank tells a failure apart (docs/roundtrip.md): Megatron's (megatron_error), the harness's
(harness_error), one for want of a GPU (cannot_run), or a damaged checkpoint; and the Megatron frame it names."""

import os
import re
import traceback

# A save or load that fails for want of a GPU (cannot_run, not a finding): torch raises a bare
# RuntimeError or AssertionError for it from many places (torch.cuda, NCCL, device placement), with
# no type of its own, so the words of its message are what tells it from Megatron's own failures.
CUDA_WORDS = ("cuda", "nvidia", "nccl", "gpu")

# The harness's own worker code (this adapter folder), where a failure is the harness's. Its mutants and
# candidates stand in for Megatron's code, so they are not the harness's own.
_ADAPTER_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_STANDS_IN_FOR_MEGATRON = (os.path.join(_ADAPTER_DIR, "megatron_adapter", "mutants") + os.sep,
                           os.path.join(_ADAPTER_DIR, "candidates") + os.sep)

# Stages whose failure happened inside a call of Megatron's checkpoint code (when it left the harness).
_MEGATRON_STAGES = ("dist_checkpointing", "retarget", "training.checkpointing")


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


def staged(exc, stage, kind=None):
    """The exception marked with the stage it was raised in and, where the raiser knows it, its kind."""
    exc._ih_stage = stage
    if kind:
        exc._ih_kind = kind
    return exc


def harness_kind(exc):
    """"harness_error" for the harness's own failures inside a Megatron call (a patch that no longer fits, a
    training-path setup error), else None (Megatron's)."""
    from megatron_adapter import patches
    from megatron_adapter.real_models import training_path
    return "harness_error" if isinstance(exc, (patches.PatchError, training_path.TrainingPathError)) else None


def error_entry(exc, stage, device):
    """The result's "error" of a scenario that raised in `stage`: its kind, stage, message and Megatron frame."""
    stage = getattr(exc, "_ih_stage", stage)
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    kind = getattr(exc, "_ih_kind", None)
    if kind is None:
        in_megatron = any(w in stage for w in _MEGATRON_STAGES) and not never_left_the_harness(exc.__traceback__)
        kind = "megatron_error" if in_megatron else "harness_error"
        if in_megatron and any(w in text.lower() for w in CUDA_WORDS) and device == "cpu":
            kind = "cannot_run"
    return {"kind": kind, "stage": stage, "message": text[:2000],
            "megatron_frame": megatron_frame(exc.__traceback__, str(exc))}
