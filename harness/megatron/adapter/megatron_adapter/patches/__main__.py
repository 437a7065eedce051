"""python -m megatron_adapter.patches --markdown | --check DOC | --write DOC

--markdown prints the patch tables (one per family) generated from patches/table.py; --check exits 1 when the
tables between DOC's markers are not that text (ctest megatron_patches_doc), --write puts it there. Needs neither
torch nor Megatron."""

import argparse
import sys

from megatron_adapter.patches import markdown

BEGIN = "<!-- patch tables: generated from patches/table.py by `python -m megatron_adapter.patches --write` -->"
END = "<!-- end of the generated patch tables -->"


def split(text, path):
    """(before, generated, after) of a doc holding the markers once each, in order."""
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        raise ValueError(f"{path} must hold the markers\n  {BEGIN}\n  {END}\nonce each, in that order")
    head, _, rest = text.partition(BEGIN + "\n")
    body, _, tail = rest.partition(END)
    return head, body, tail


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--markdown", action="store_true")
    mode.add_argument("--check", metavar="DOC")
    mode.add_argument("--write", metavar="DOC")
    args = ap.parse_args(argv)
    tables = markdown()
    if args.markdown:
        sys.stdout.write(tables)
        return 0
    path = args.check or args.write
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        head, body, tail = split(text, path)
    except ValueError as exc:
        print(f"ERROR: invalid_argument: {exc}", file=sys.stderr)
        return 2
    if args.write:
        with open(path, "w", encoding="utf-8") as f:
            f.write(head + BEGIN + "\n" + tables + END + tail)
        return 0
    if body != tables:
        print(f"{path}: the patch tables differ from patches/table.py; run python -m megatron_adapter.patches "
              f"--write {path} (from harness/megatron/adapter)", file=sys.stderr)
        return 1
    print(f"{path}: the patch tables match patches/table.py ({tables.count(chr(10) + '| `')} patches)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
