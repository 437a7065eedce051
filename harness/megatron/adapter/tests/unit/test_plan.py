"""Plan reading of the worlds engine (roundtrip_world.py), without Megatron: the oracle's key encoding
comes from the plan the C++ side writes, and a plan without it is a harness error naming the field."""

import json
import os
import subprocess
import sys

import pytest

import roundtrip_world

ADAPTER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_key_shift_from_the_plan():
    assert roundtrip_world.oracle_key_shift({"oracle": {"key_shift": 40}, "scenarios": []}) == 40
    assert roundtrip_world.oracle_key_shift({"oracle": {"key_shift": 12}}) == 12


@pytest.mark.parametrize("plan", [
    {}, {"oracle": None}, {"oracle": {}}, {"oracle": 40}, {"oracle": {"key_shift": "40"}},
    {"oracle": {"key_shift": True}}, {"oracle": {"key_shift": 0}}, {"oracle": {"key_shift": 63}},
])
def test_a_plan_without_a_usable_key_shift_is_refused(plan):
    with pytest.raises(roundtrip_world.PlanError, match=r'"oracle": \{"key_shift": N\}'):
        roundtrip_world.oracle_key_shift(plan)


def test_no_copy_of_the_constant_in_python():
    with open(os.path.join(ADAPTER, "roundtrip_world.py"), encoding="utf-8") as f:
        assert "KEY_SHIFT" not in f.read()


def run_world(tmp_path, plan):
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    proc = subprocess.run([sys.executable, os.path.join(ADAPTER, "roundtrip_world.py"), "--work", str(tmp_path),
                           "--phase", "save"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, OMPI_COMM_WORLD_RANK="0"))
    with open(tmp_path / "results" / "save_rank_0.json", encoding="utf-8") as f:
        return proc.returncode, json.load(f)


def test_the_rank_records_a_harness_error_naming_the_field(tmp_path):
    code, result = run_world(tmp_path, {"scenarios": [], "device": "cpu"})
    assert code == 1
    assert result["error"]["kind"] == "harness_error" and result["error"]["stage"] == "start"
    assert 'PlanError: plan.json needs "oracle": {"key_shift": N}' in result["error"]["message"]


def test_a_plan_that_is_not_json_is_a_harness_error(tmp_path):
    (tmp_path / "plan.json").write_text("{")
    proc = subprocess.run([sys.executable, os.path.join(ADAPTER, "roundtrip_world.py"), "--work", str(tmp_path),
                           "--phase", "load"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, OMPI_COMM_WORLD_RANK="0"))
    with open(tmp_path / "results" / "load_rank_0.json", encoding="utf-8") as f:
        assert proc.returncode == 1 and json.load(f)["error"]["kind"] == "harness_error"
