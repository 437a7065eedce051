"""The patch registry: every patch the adapter makes is a row of patches/table.py, applied only through

    with patches.applied("cpu_save", "save_speed") as applied:   # the families a context needs
        ...                                                      # applied.rows, applied.summaries

and undone when the block ends (restored in reverse order: nested blocks that patch the same attribute give it
back as they found it). Every row of the chosen families is checked before any is applied: a row whose check no
longer holds raises PatchError (a harness error) and nothing is patched; a row whose module has no code of its
family is recorded "not applicable" and skipped; a row this machine does not need is recorded and skipped.
`report(<families>)` checks without applying. docs/megatron-patches.md's tables are `markdown()` of the table
(`python -m megatron_adapter.patches --markdown`)."""

import contextlib

from megatron_adapter.patches.checks import NotApplicable, PatchError  # noqa: F401 - the registry's errors
from megatron_adapter.patches.table import FAMILIES, TABLE


def select(families, only=None, table=TABLE):
    """The rows of `families` (every one named in the table), in table order; with `only`, just those names."""
    unknown = set(families) - {e.family for e in table}
    if unknown:
        raise PatchError(f"no patch family {sorted(unknown)} (known: {', '.join(sorted({e.family for e in table}))})")
    chosen = [e for e in table if e.family in families]
    if only is not None:
        names = {e.name for e in chosen}
        for name in only:
            if name not in names:
                raise PatchError(f"no {'/'.join(families)} {name!r} (known: {', '.join(sorted(names))})")
        chosen = [e for e in chosen if e.name in only]
    return chosen


class Applied:
    """What one `applied` block put in place: rows [{"name", "applied", "why"} (+ "not_applicable": reason)],
    the summaries of the rows applied, and `suspended()` to take them out for a while."""

    def __init__(self, params):
        self.rows, self.summaries, self.params = [], [], params
        self._installed = []  # (row, its undo), in the order applied

    def install(self, entry):
        self._installed.append((entry, entry.install(self.params)))
        self.summaries.append(entry.summary)

    def undo_all(self):
        while self._installed:
            self._installed.pop()[1]()

    @contextlib.contextmanager
    def suspended(self):
        """The block's patches undone (to show each is still needed), then put in place again."""
        entries = [entry for entry, _ in self._installed]
        self.undo_all()
        try:
            yield self
        finally:
            for entry in entries:
                self._installed.append((entry, entry.install(self.params)))


@contextlib.contextmanager
def applied(*families, only=None, table=TABLE, **params):
    """The needed rows of `families` in force (params: what a row's make needs, e.g. the training run's argv);
    every one undone on exit."""
    chosen = select(families, only, table)
    statuses = [entry.status() for entry in chosen]  # every check before any patch
    handle = Applied(params)
    try:
        for entry, (reason, needed) in zip(chosen, statuses):
            row = {"name": entry.name, "applied": reason is None and needed, "why": entry.why}
            if reason is not None:
                row["not_applicable"] = reason
            elif needed:
                handle.install(entry)
            handle.rows.append(row)
        yield handle
    finally:
        handle.undo_all()


def report(*families, only=None, table=TABLE):
    """[{"name", "needed", "why"}] of `families` without applying anything ("not_applicable" with the reason,
    and needed false, for a row this checkout has no code for); PatchError when one no longer fits."""
    out = []
    for entry in select(families, only, table):
        reason, needed = entry.status()
        row = {"name": entry.name, "needed": needed, "why": entry.why}
        if reason is not None:
            row["not_applicable"] = reason
        out.append(row)
    return out


def _cell(text):
    return str(text).replace("|", "\\|").replace("\n", " ")


def markdown(table=TABLE, families=FAMILIES):
    """The tables of docs/megatron-patches.md: one per family, a row per patch."""
    lines = []
    for family, what in families.items():
        rows = [e for e in table if e.family == family]
        lines += [f"### `{family}`: {what}", "",
                  "| patch | replaces | needed | the code it must still fit | why |", "|---|---|---|---|---|"]
        for e in rows:
            targets = ", ".join(f"`{t}`" for t in e.targets) or "nothing"
            lines.append(f"| `{e.name}` | {_cell(targets)} | {_cell(e.needed.text)} | {_cell(e.fits.describe())} | "
                         f"{_cell(e.why)} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
