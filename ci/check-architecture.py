#!/usr/bin/env python3
"""Checks the project's #include lines against the house plan in docs/architecture.md.

Each room may include only the rooms listed for it (and itself). A room is a top-level folder, or a
folder under harness/. Prints every upward or sideways include with file and line; exits 1 if any.
"""
import os
import re
import sys

# room -> rooms it may include. The same table is drawn in docs/architecture.md.
ALLOWED = {
    "models": set(),
    "seam": {"models"},
    "mutants": {"seam", "models"},
    # codec and process name the seam's error kinds (unsupported, timeout, harness_error) and nothing else of it;
    # the codec also reads Megatron's replies into the scenario operations' typed answers (seam/scenarios).
    "codec": {"models", "seam/error_kinds", "seam/scenarios"},
    "properties": {"seam", "models"},
    # fuzz targets drive the invariants the properties state (one body each) and the CLI's parser.
    "fuzz": {"models", "seam", "codec", "properties/invariants", "harness/cli/args"},
    "bench": {"models", "seam"},
    "harness/install": set(),
    "harness/process": {"models", "seam/error_kinds"},
    # The Megatron client answers the seam; the gate's checks ask the seam, never the client: no megatron -> gate.
    "harness/megatron": {"harness/process", "harness/install", "codec", "seam", "models"},
    "harness/targets": {"harness/megatron", "mutants", "seam", "models"},
    "harness/gate": {"properties", "codec", "seam", "models"},
    "harness/report": {"harness/gate", "properties", "codec", "seam", "models"},
    "harness/roundtrip": {"harness/megatron", "harness/process", "harness/install", "properties", "codec", "seam",
                          "models"},
    "harness/cli": {"harness/gate", "harness/report", "harness/roundtrip", "harness/targets", "harness/megatron",
                    "harness/process", "harness/install", "properties", "mutants", "codec", "seam", "models"},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def room_of(path):
    parts = path.split("/")
    if parts[0] == "harness" and len(parts) > 2:
        return "harness/" + parts[1]
    return parts[0]


# Tests may reach one step sideways: the mutation test proves each planted mutant fails some property.
TEST_EXTRA = {"properties": {"mutants"}}


def allowed(source_room, include, is_test):
    target = room_of(include)
    rules = ALLOWED.get(source_room, set()) | (TEST_EXTRA.get(source_room, set()) if is_test else set())
    return target == source_room or target in rules or os.path.splitext(include)[0] in rules


def main(root):
    problems = []
    for folder in ALLOWED:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            continue
        for dirpath, dirnames, filenames in os.walk(base):
            rel_dir = os.path.relpath(dirpath, root)
            if folder == "harness" or (rel_dir != folder and room_of(rel_dir + "/x") != folder):
                continue
            for name in sorted(filenames):
                if not name.endswith((".cc", ".h")):
                    continue
                rel = os.path.join(rel_dir, name)
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    for number, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if m and "/" in m.group(1) and not allowed(folder, m.group(1), name.endswith("_test.cc")):
                            problems.append(f"{rel}:{number}: {folder} may not include {m.group(1)}")
    for p in problems:
        print(p)
    print(f"architecture: {len(problems)} forbidden include(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..")))
