"""Stable error kinds for what Megatron raises (docs/adapter-protocol.md, "Errors")."""

from megatron_adapter.errors import OpError

# Megatron's ValueError texts -> stable kinds. Order matters: the out-of-range message also
# mentions "pipe-delimited segments".
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
