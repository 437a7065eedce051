"""Stable error kinds for what Megatron raises (docs/adapter-protocol.md, "Errors").

A kind is read from the exception's type and the function that raised it wherever Megatron (or
torch DCP) raises something typed. Only the hybrid-pattern functions are read by message: they
raise plain ValueError for every rule they check, so the text is the only thing that tells the
rules apart.
"""

import traceback

from megatron_adapter.errors import OpError

# Megatron's ValueError texts -> stable kinds. hybrid_layer_allocation and gpt_checkpoint_interop
# raise a bare ValueError for each rule (no subclass, no code), hence the texts. Order matters:
# the out-of-range message also mentions "pipe-delimited segments".
_VALUE_ERROR_KINDS = (
    ("All MTP patterns must be identical", "mtp_not_identical"),
    ("is not a valid layer symbol", "invalid_symbol"),
    ("In hybrid layer pattern segment", "invalid_symbol"),
    ("Not supported to have both Attention and MLA/DSA", "attention_with_mla_dsa"),
    ("contains MTP layers", "mtp_present"),
    ("Hybrid layer pattern is empty", "empty_pattern"),
    ("cannot be translated from a GPT checkpoint", "untranslatable_layer_types"),
    ("mixes dense ('-') and MoE ('E')", "mixed_mlp_kinds"),
    ("needs an equal, nonzero number of each", "unbalanced_attention_mlp"),
    ("Cannot specify num_layers_in_first_pipeline_stage", "pipe_with_first_last"),
    ("Virtual pipeline parallelism (vp_stage != None) is not supported", "vpp_without_pipes"),
    ("must be evenly divisible by middle pipeline stages", "middle_not_divisible"),
    ("when no pipe separators are specified", "layers_not_divisible_by_pp"),
    ("Pipeline segment index", "segment_out_of_range"),
    ("pipe-delimited segments", "segments_not_divisible_by_pp"),
    ("refers to hybrid layer", "unknown_hybrid_layer"),
    ("Split sections must cover the whole dimension size", "split_sections_mismatch"),
)


def classify(exc, type_kinds=None):
    """OpError for an exception Megatron raised: a known ValueError text, a kind given per
    exception type by the op, else "unknown" carrying the type and message."""
    if isinstance(exc, OpError):
        return exc
    message = str(exc)
    if isinstance(exc, ValueError):
        for needle, kind in _VALUE_ERROR_KINDS:
            if needle in message:
                return OpError(kind, message, exception_type=type(exc).__name__)
    for exc_type, kind in (type_kinds or {}).items():
        if isinstance(exc, exc_type):
            return OpError(kind, message, exception_type=type(exc).__name__)
    return OpError("unknown", f"{type(exc).__name__}: {message}", exception_type=type(exc).__name__)


def exception_facts(exc):
    """Picklable facts for classifying an exception in another process: per failure, the names of
    its type and every base, and the function that raised it. torch DCP's CheckpointException
    (a BaseException) carries each rank's failure with its stack in `failures`; those are listed
    after the exception itself."""
    out = [(exc, traceback.extract_tb(exc.__traceback__))]
    for failure in (getattr(exc, "failures", None) or {}).values():
        if isinstance(failure, tuple) and len(failure) == 2 and isinstance(failure[0], BaseException):
            out.append(failure)  # DCP's (exception, StackSummary) of one rank
    return [{"types": [c.__name__ for c in type(e).__mro__], "raised_in": stack[-1].name if stack else None}
            for e, stack in out]


def kind_of(facts, table):
    """The kind of the first (type name, raising function or None for any) row of table that one of
    the facts matches, else None."""
    for type_name, function, kind in table:
        for fact in facts or ():
            if type_name in fact["types"] and function in (None, fact["raised_in"]):
                return kind
    return None


# A load Megatron refuses (load_state): Megatron's TorchDistLoadShardedStrategy checks every
# requested tensor's global shape against the checkpoint's metadata (CheckpointingException) and
# its presence (KeyError); torch DCP's default load planner refuses a requested key the checkpoint
# lacks (RuntimeError from create_default_local_load_plan).
LOAD_FAILURE_KINDS = (
    ("CheckpointingException", "_validate_global_shapes", "global_shape_mismatch"),
    ("KeyError", None, "load_not_covered"),
    ("RuntimeError", "create_default_local_load_plan", "load_not_covered"),
)

# The GTP writer election (gtp_param_entry with an election): gtp_replica_rank raises RuntimeError
# when neither parallel_state nor the param names the gtp_remat-excluded replica group.
ELECTION_FAILURE_KINDS = (
    ("RuntimeError", "gtp_replica_rank", "gtp_replica_group_unknown"),
)
