#!/usr/bin/env python3
"""Copies a Megatron-LM tree and plants one slip of the kind a pull request makes (one text replaced by another,
exactly once, in one file of the copy): the checkout itself is never edited.

    plant_slip.py SNAPSHOT DEST FILE OLD NEW

Exit 0 with DEST holding the changed copy (DEST is replaced), 2 when FILE does not hold OLD exactly once (the
test is then skipped, never passed)."""

import pathlib
import shutil
import sys


def plant(source, dest, target, replacements, who="plant_slip"):
    """DEST a copy of SOURCE whose TARGET has each (old, new) of `replacements` replaced in turn; each old must be
    in SOURCE's TARGET exactly once. Exit status 0, or 2 (said on stderr) when one is not."""
    text = (source / target).read_text() if (source / target).is_file() else ""
    for old, _ in replacements:
        if text.count(old) != 1:
            print(f"{who}: {source / target} holds {old!r} {text.count(old)} times, not once", file=sys.stderr)
            return 2
    for old, new in replacements:
        text = text.replace(old, new)
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".git"), symlinks=True)
    (dest / target).write_text(text)
    return 0


def main(argv):
    if len(argv) != 6:
        print(__doc__, file=sys.stderr)
        return 2
    source, dest, target, old, new = pathlib.Path(argv[1]), pathlib.Path(argv[2]), argv[3], argv[4], argv[5]
    status = plant(source, dest, target, [(old, new)])
    if status == 0:
        print(f"plant_slip: {dest / target}: {old!r} -> {new!r}")
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv))
