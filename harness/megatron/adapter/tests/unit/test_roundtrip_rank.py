"""How a round-trip rank classes a failure and what it does for each scenario kind (megatron_adapter/roundtrip/),
without Megatron."""

from megatron_adapter.roundtrip import failures, load, save
from megatron_adapter.roundtrip.plan import PlanError, scenario_files

KINDS = {"gpt_hybrid", "gdp_gtp", "real_gpt_hybrid", "real_hybrid_hybrid"}  # harness/roundtrip/world_plan.h


def _raise(exc):
    try:
        raise exc
    except BaseException as raised:  # noqa: BLE001
        return raised


def test_every_scenario_kind_is_saved_and_loaded():
    assert set(save.SAVES) == set(load.LOADS) == KINDS
    assert {k for k, kind in load.LOADS.items() if kind.retarget is None} == {"gdp_gtp", "real_hybrid_hybrid"}
    assert {k for k, kind in load.LOADS.items() if kind.dump is load.dump_real} == {"real_gpt_hybrid",
                                                                                   "real_hybrid_hybrid"}


def test_a_failure_that_never_left_the_harness_is_the_harnesss():
    entry = failures.error_entry(_raise(ValueError("bad plan")), "load: dist_checkpointing.load", "cpu")
    assert entry["kind"] == "harness_error" and entry["stage"] == "load: dist_checkpointing.load"


def test_a_staged_failure_keeps_its_stage_and_kind():
    exc = failures.staged(_raise(ValueError("x")), "load: check checkpoint files", "checkpoint_truncated")
    entry = failures.error_entry(exc, "prepare", "cpu")
    assert (entry["kind"], entry["stage"], entry["message"]) == ("checkpoint_truncated",
                                                                 "load: check checkpoint files", "ValueError: x")


def test_a_failure_inside_megatrons_call_for_want_of_a_gpu_cannot_run():
    try:  # raised outside the harness's own code, as torch raises it
        exec(compile("raise RuntimeError('Found no NVIDIA driver on your system')", "/venv/torch/cuda/__init__.py",
                     "exec"))
    except RuntimeError as raised:
        exc = raised
    assert failures.error_entry(exc, "save: dist_checkpointing.save", "cpu")["kind"] == "cannot_run"
    assert failures.error_entry(exc, "save: dist_checkpointing.save", "cuda:0")["kind"] == "megatron_error"


def test_a_rank_plan_of_an_unknown_kind_is_a_plan_error(tmp_path):
    import json
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "save_rank_0.json").write_text(json.dumps({"kind": "nope"}))
    (tmp_path / "s" / "catalogue.json").write_text(json.dumps({"oracle": {"key_shift": 40, "dtype": "float64"}}))

    class World:
        work, phase, rank = str(tmp_path), "save", 0

        def stage(self, stage):
            self.last = stage
    try:
        scenario_files(World(), {"name": "s", "dir": "s"}, save.SAVES)
    except PlanError as exc:
        assert "unknown kind 'nope'" in str(exc)
    else:
        raise AssertionError("an unknown kind was accepted")
