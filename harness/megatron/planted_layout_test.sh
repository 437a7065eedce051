#!/usr/bin/env bash
# ctest wrapper (label megatron): the gate judges a Megatron-LM tree whose real models describe themselves
# otherwise than the reference lays them out, and does not crash (issue 31, deliverable 5). It copies the snapshot
# (ci/megatron-snapshot.sh) to a temporary folder and plants two such changes there, at test time (no copy of
# Megatron's code is kept in this repository):
#   - the tied output layer on the last pipeline stage describes itself as the embedding's main replica (two
#     writers of each embedding chunk: real_gpt_hybrid_training_pp, GPT at TP 2 x PP 2, tied);
#   - the Mamba mixer's in_proj split factory names its two same-shaped first pieces the other way round (x where
#     z lies: the GTP scenarios' gathered pieces are not the reference's).
# The gate must exit 1 with those scenarios FAILED for that reason, no HARNESS ERROR or TIMEOUT anywhere, and the
# real round trips the changes do not touch still PASSED.
# Run through checkout_test.sh, which finds the snapshot (none: exit 77, ctest: skipped, never passed).
#   planted_layout_test.sh INTEROP_HARNESS --megatron-path SNAPSHOT
set -u
bin=$1
snapshot=${3:?"usage: planted_layout_test.sh INTEROP_HARNESS --megatron-path SNAPSHOT"}
work=$(mktemp -d "${TMPDIR:-/tmp}/ih-planted-layout-XXXXXX")
trap 'rm -rf "$work"' EXIT
cp -a "$snapshot" "$work/tree" || { echo "ERROR: harness_error: cannot copy $snapshot" >&2; exit 3; }
# Each plant must find its line exactly once, else the snapshot moved on and this test is the harness's to fix.
plant() {
  python3 - "$work/tree/$1" "$2" "$3" <<'EOF' || { echo "ERROR: harness_error: cannot plant into $1" >&2; exit 3; }
import sys
path, old, new = sys.argv[1:]
text = open(path).read()
if text.count(old) != 1:
    sys.exit(f"{path}: {old!r} found {text.count(old)} times, want 1")
open(path, "w").write(text.replace(old, new))
EOF
}
plant megatron/core/models/common/language_module/language_module.py \
  "            1,  # copy of first stage embedding" "            0,  # planted: a main replica here too"
plant megatron/core/ssm/mamba_mixer.py '["z", "x", "B", "C", "dt"],' '["x", "z", "B", "C", "dt"],'

nice "$bin" gate --target megatron --megatron-path "$work/tree" --report "$work/report" >"$work/gate.log" 2>&1
rc=$?
grep -E '^(FAILED|HARNESS ERROR|TIMEOUT) |^gate: ' "$work/gate.log"
[ "$rc" -eq 1 ] || { echo "planted layout test: gate exited $rc, want 1 (3 is a harness error)" >&2; exit 1; }
python3 - "$work/report/report.json" <<'EOF'
import json, re, sys
checks = {c["title"]: c for c in json.load(open(sys.argv[1]))["checks"] if c["group"] == "real-roundtrips"}
problems = [f"{t}: {c['outcome']}: {c.get('detail', '')[:300]}" for t, c in checks.items()
            if c["outcome"] in ("harness error", "timeout")]
want_failed = {  # planted scenario -> what its detail must name
    "real_gpt_hybrid_training_pp_4_to_2": r"describes 2 main replicas of embedding\.word_embeddings\.weight",
    "real_hybrid_hybrid_gtp_4_to_2": r"Megatron describes rows \[0, \d+\) hold \S*in_proj\.weight\.x from",
}
for title, named in want_failed.items():
    c = checks.get(title, {})
    if c.get("outcome") != "failed" or not re.search(named, c.get("detail", "")):
        problems.append(f"{title} should have FAILED naming /{named}/: {c.get('outcome')}: {c.get('detail', '')[:300]}")
for title in ("real_gpt_hybrid_tp_4_to_2", "real_gpt_hybrid_training_4_to_2", "real_gpt_hybrid_moe_4_to_2"):
    if checks.get(title, {}).get("outcome") != "passed":  # untouched by the plants: still judged, and passing
        problems.append(f"{title} untouched by the plants but {checks.get(title, {}).get('outcome')}")
for p in problems:
    print("planted layout test:", p, file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
[ $? -eq 0 ] || exit 1
echo "planted layout test: the planted scenarios FAILED for Megatron's reason, the others judged on their own"
