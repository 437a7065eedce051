"""Run-time mutants of Megatron (mutants/table.py, the one table): planted in the adapter's process (`--mutant`,
the `mutate` op) or in a round trip's world (`roundtrip --mutant`), where they stay for the rest of the process
(one process per mutant)."""

from megatron_adapter.mutants.install import install, resolve
from megatron_adapter.mutants.table import MUTANTS_TABLE

BY_NAME = {m.name: m for m in MUTANTS_TABLE}
assert len(BY_NAME) == len(MUTANTS_TABLE), "duplicate mutant names in MUTANTS_TABLE"
SERVED = tuple(m for m in MUTANTS_TABLE if m.scope == "adapter")  # the adapter's: its mutants op lists them


class _Names:
    def __contains__(self, name):
        return name in BY_NAME and BY_NAME[name].scope == "adapter"


MUTANTS = _Names()  # the names the adapter plants (--mutant, the mutate op)


def is_candidate_mutant(name):
    return name.startswith("candidate_")


def missing(target):
    """Why `target` (module:attr.path) cannot be patched in this Megatron, or None."""
    try:
        resolve(target)
    except (ImportError, AttributeError) as exc:
        return str(exc)
    return None


def describe(M=None):
    """Every mutant the adapter serves with what it patches, and whether this Megatron has all of it: a mutant of
    code the checkout lacks (GDP/GTP in a megatron-core without them) cannot be planted, and the campaign reports
    it as not applicable rather than as killed or survived. A candidate_* mutant applies only where the candidate
    it plants a mistake in is applied (--candidate shard-split)."""
    out = []
    candidate_applied = bool(M is not None and getattr(M, "candidate", {}).get("applied"))
    for m in SERVED:
        targets = [p.target for p in m.patches]
        absent = [why for why in (missing(t) for t in targets + list(m.requires)) if why]
        if is_candidate_mutant(m.name) and not candidate_applied:
            absent.append("the candidate shard-split design is not applied here (--candidate shard-split; "
                          "never over a checkout's own factory)")
        row = {"name": m.name, "spec_bug_class": m.bug_class, "patches": targets,
               "description": m.description + " [patches " + ", ".join(targets) + "]", "applicable": not absent,
               "of": "candidate" if is_candidate_mutant(m.name) else "megatron"}
        if m.tier:
            row["tier"] = m.tier
        if absent:
            row["not_applicable"] = "; ".join(absent)
        out.append(row)
    return out


def planted_in(name, phase):
    """Whether the round-trip world of `phase` ("save" or "load") plants the mutant `name`: its own phase, or both
    for a change that writes and reads alike (a self-consistent format change)."""
    planted = BY_NAME[name].phase if name in BY_NAME else "load"
    return planted in (phase, "both")


def apply(name, M):
    """Plants the mutant `name` (any scope) in this process."""
    row = BY_NAME[name]
    shared = row.shared() if row.shared else None
    for patch in row.patches:
        if shared is None:
            install(patch.target, lambda original, make=patch.make: make(original, M))
        else:
            install(patch.target, lambda original, make=patch.make: make(original, M, shared))


def apply_in_world(name, M):
    """A round-trip world's mutant: the adapter's or the round trip's own; ValueError for an unknown name."""
    if name not in BY_NAME:
        own = sorted(m.name for m in MUTANTS_TABLE if m.scope == "roundtrip")
        raise ValueError(f"no mutant {name!r}: adapter mutants (adapter.py's mutants op) or {own}")
    apply(name, M)
