#!/usr/bin/env bash
# `roundtrip --list` names the synthetic scenarios and `roundtrip --real --list` the real-model ones, never each
# other's; a real scenario that reproduces a finding says which (docs/cli.md, roundtrip). No Megatron needed.
# Usage: list_test.sh BINARY
set -uo pipefail
bin=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
synthetic=$("$bin" roundtrip --list --json) || fail "roundtrip --list --json exited $?"
real=$("$bin" roundtrip --real --list --json) || fail "roundtrip --real --list --json exited $?"
text=$("$bin" roundtrip --real --list) || fail "roundtrip --real --list exited $?"
python3 - "$synthetic" "$real" <<'PY' || exit 1
import json, sys
synthetic = {s["name"]: s for s in json.loads(sys.argv[1])["scenarios"]}
real = {s["name"]: s for s in json.loads(sys.argv[2])["scenarios"]}
def check(ok, what):
    if not ok:
        sys.exit("FAIL: " + what)
check("gpt_hybrid_tp" in synthetic and "gdp_in_proj_gtp" in synthetic, "--list lacks a synthetic scenario")
check("gdp_in_proj_shard_split" in synthetic and "not_run" in synthetic["gdp_in_proj_shard_split"],
      "--list does not say the shard-split scenario is not run without the candidate")
check("real_gpt_hybrid_tp" in real and "real_gpt_hybrid_distributed_optimizer" in real, "--real --list lacks a real one")
check(not set(synthetic) & set(real), "the two lists share " + ", ".join(sorted(set(synthetic) & set(real))))
check(all(not name.startswith("real_") for name in synthetic), "--list names a real-model scenario")
check(real["real_gpt_hybrid_gtp_swiglu"].get("finding") == "S", "real_gpt_hybrid_gtp_swiglu does not name finding S")
check("finding" not in real["real_gpt_hybrid_tp"], "a scenario of --real --all names a finding")
PY
grep -q '^real_gpt_hybrid_gtp_swiglu: .*\[reproduces finding S; --scenario only, not in --all\]$' <<<"$text" ||
  fail "the text listing does not say which finding real_gpt_hybrid_gtp_swiglu reproduces"
echo "PASS: roundtrip --list and --real --list"
