"""Plan reading of the worlds engine (roundtrip_world.py, megatron_adapter/roundtrip/plan.py), without Megatron: each scenario's oracle encoding
comes from the catalogue the C++ side writes, and a catalogue without it is a harness error naming the field."""

import json
import os
import subprocess
import sys

import pytest

from megatron_adapter.roundtrip import plan

ADAPTER = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_the_encoding_comes_from_the_scenarios_catalogue():
    oracle = plan.Oracle({"oracle": {"key_shift": 40, "dtype": "float64"}, "keys": []})
    assert (oracle.key_shift, oracle.dtype) == (40, "float64")
    oracle = plan.Oracle({"oracle": {"key_shift": 15, "dtype": "float32"}})
    assert (oracle.key_shift, oracle.dtype) == (15, "float32")


@pytest.mark.parametrize("catalogue", [
    {}, {"oracle": None}, {"oracle": {}}, {"oracle": 40}, {"oracle": {"key_shift": "40", "dtype": "float64"}},
    {"oracle": {"key_shift": True, "dtype": "float64"}}, {"oracle": {"key_shift": 0, "dtype": "float64"}},
    {"oracle": {"key_shift": 63, "dtype": "float64"}}, {"oracle": {"key_shift": 24}},
    {"oracle": {"key_shift": 24, "dtype": "bfloat16"}},
])
def test_a_catalogue_without_a_usable_encoding_is_refused(catalogue):
    with pytest.raises(plan.PlanError, match=r'"oracle": \{"key_shift": N, "dtype"'):
        plan.Oracle(catalogue)


def test_no_copy_of_the_constant_in_python():
    package = os.path.join(ADAPTER, "megatron_adapter", "roundtrip")
    for path in [os.path.join(ADAPTER, "roundtrip_world.py")] + [os.path.join(package, n) for n in os.listdir(package)
                                                                 if n.endswith(".py")]:
        with open(path, encoding="utf-8") as f:
            assert "KEY_SHIFT" not in f.read(), path


def test_a_plan_that_is_not_json_is_a_harness_error(tmp_path):
    (tmp_path / "plan.json").write_text("{")
    proc = subprocess.run([sys.executable, os.path.join(ADAPTER, "roundtrip_world.py"), "--work", str(tmp_path),
                           "--phase", "load"], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, OMPI_COMM_WORLD_RANK="0"))
    with open(tmp_path / "results" / "load_rank_0.json", encoding="utf-8") as f:
        assert proc.returncode == 1 and json.load(f)["error"]["kind"] == "harness_error"
