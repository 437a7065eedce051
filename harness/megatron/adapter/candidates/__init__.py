"""Candidates: the harness's own implementations of designs a pending Megatron change introduces,
applied to a Megatron checkout only when asked (`--candidate NAME`), so the gate can run that design
through Megatron's real save and load before the change lands. Nothing here is Megatron's code.

REAL_GTP_SPLIT_FACTORY is the one place that knows how the pending GTP shard-split PR names its
factory in a checkout: every check, reason and test reads it from here, so a rename when the PR
lands is a one-line change.
"""

import collections

FactoryName = collections.namedtuple("FactoryName", "name modules parameters")

# The PR's factory (spec 4.7): looked up by name in these adapter namespaces (load_megatron's M.gdp,
# M.ssm_utils, M.gtp), called with these parameters.
REAL_GTP_SPLIT_FACTORY = FactoryName(
    name="_gtp_split_tensor_factory",
    modules=("gdp", "ssm_utils", "gtp"),
    parameters=("orig", "sections", "names", "gtp_rank", "tp_rank", "tp_size"),
)

# What every report, finding and first line says of a run with a candidate applied.
CANDIDATE_LABEL = {"shard-split": "candidate shard-split design, not Megatron's code"}


def find_real_gtp_split_factory(M):
    """The checkout's own shard-split factory, or None."""
    for module_name in REAL_GTP_SPLIT_FACTORY.modules:
        module = getattr(M, module_name, None)
        fn = getattr(module, REAL_GTP_SPLIT_FACTORY.name, None) if module is not None else None
        if fn is not None:
            return fn
    return None


def not_in_checkout_reason():
    return (f"{REAL_GTP_SPLIT_FACTORY.name} (the pending GTP shard-split PR) is not in this Megatron "
            "(run with --candidate shard-split to gate the harness's candidate of its design)")
