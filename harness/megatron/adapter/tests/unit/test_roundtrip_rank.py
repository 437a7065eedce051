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


class _LoadWorld:
    """What the DistributedOptimizer's load step uses of a rank's world: stages, the collectives (one rank: an
    all_reduce leaves the flag as it is), torch.tensor."""

    def __init__(self):
        import types
        self.rank, self.stages, self.M = 0, [], None

        class Flag:
            def __init__(self, values):
                self.values = values

            def item(self):
                return self.values[0]
        self.torch = types.SimpleNamespace(tensor=Flag)
        self.dist = types.SimpleNamespace(ReduceOp=types.SimpleNamespace(MIN="min"), barrier=lambda: None,
                                          all_reduce=lambda flag, op: None)

    def stage(self, stage):
        self.stages.append(stage)
        return stage


def _optimizer_load(monkeypatch, refusals):
    """Runs load._distributed_optimizer_load with load_state_dict raising refusals[past_f] (or not): the calls
    made (past_f of each), the dumps written, and what it raised."""
    import types
    from megatron_adapter.real_models import roundtrip_models
    from megatron_adapter.roundtrip import checkpoint_files
    calls, dumps = [], []

    def apply(optimizer, loaded, req, past_f=False):
        calls.append(past_f)
        if past_f in refusals:
            raise refusals[past_f]
    monkeypatch.setattr(roundtrip_models, "apply_distributed_optimizer", apply)
    monkeypatch.setattr(roundtrip_models, "own_optimizer_states",
                        lambda M, chunks, optimizer, req, paths: {p: "own" for p in paths if p.startswith("optimizer.")})
    monkeypatch.setattr(checkpoint_files, "write_dump", lambda sdir, rank, dump, torch: dumps.append(dict(dump)))
    loading = load.Loading(None, {}, object(), {})
    expected = {"tensors": [{"path": "optimizer.param_state.0.exp_avg"}, {"path": "model.w"}]}
    try:
        load._distributed_optimizer_load(_LoadWorld(), types.SimpleNamespace(dir="d"), loading, {}, expected,
                                         {"model.w": "loaded"})
    except KeyError as exc:
        return calls, dumps, exc
    return calls, dumps, None


def test_past_finding_f_the_optimizer_loads_again_under_the_shim_and_f_is_still_raised(monkeypatch):
    f = KeyError("step")
    calls, dumps, raised = _optimizer_load(monkeypatch, {False: f})
    assert calls == [False, True] and raised is f and raised._ih_kind == "megatron_error"
    assert dumps == [{"model.w": "loaded", "after_load_state_dict/optimizer.param_state.0.exp_avg": "own"}]


def test_a_shimmed_load_that_raises_is_raised_and_nothing_after_it_is_dumped(monkeypatch):
    shimmed = KeyError("elsewhere")
    calls, dumps, raised = _optimizer_load(monkeypatch, {False: KeyError("step"), True: shimmed})
    assert calls == [False, True] and raised is shimmed and dumps == []


def test_a_megatron_without_f_loads_once_unshimmed_and_its_states_are_dumped(monkeypatch):
    calls, dumps, raised = _optimizer_load(monkeypatch, {})
    assert calls == [False] and raised is None
    assert dumps == [{"model.w": "loaded", "after_load_state_dict/optimizer.param_state.0.exp_avg": "own"}]
