"""A round-trip rank's side of the describe/plan handshake (megatron_adapter/roundtrip/handshake.py), without
Megatron: which marker ends its wait, and what it does for a scenario that has no handshake or was skipped."""

import types

import pytest

from megatron_adapter.roundtrip import handshake


def _world(tmp_path, phase="load"):
    stages = []
    world = types.SimpleNamespace(work=str(tmp_path), phase=phase, rank=0, args=types.SimpleNamespace(timeout=5),
                                  built=None, stage=stages.append)
    return world, stages


def test_the_marker_ends_the_wait_and_skip_ends_it_without_running(tmp_path):
    (tmp_path / handshake.PLAN_READY).write_text("")
    assert handshake.wait_for(str(tmp_path), handshake.PLAN_READY, 1) is True
    assert not (tmp_path / handshake.CHECKPOINT_COMPLETE).exists()
    (tmp_path / handshake.SKIP).write_text("")
    assert handshake.wait_for(str(tmp_path), handshake.CHECKPOINT_COMPLETE, 1) is False


def test_a_wait_no_marker_ends_is_the_harnesss_timeout(tmp_path):
    with pytest.raises(handshake.HandshakeTimeout, match="neither checkpoint.complete nor skip"):
        handshake.wait_for(str(tmp_path), handshake.CHECKPOINT_COMPLETE, 0.2)


def test_a_scenario_without_describe_runs_at_once_and_a_skipped_one_builds_nothing(tmp_path):
    world, stages = _world(tmp_path)
    assert handshake.prepared(world, {"name": "gpt_hybrid_tp", "dir": "s"}, {}) is True
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / handshake.SKIP).write_text("")
    assert handshake.prepared(world, {"name": "x", "dir": "s", "describe": {"load": {}}}, {}) is False
    assert stages == [] and world.built is None and not (tmp_path / "s" / handshake.DESCRIBED).exists()


def test_a_restarted_load_world_does_not_describe_a_planned_scenario_again(tmp_path):
    world, stages = _world(tmp_path)
    (tmp_path / "s").mkdir()
    for marker in (handshake.PLAN_READY, handshake.CHECKPOINT_COMPLETE):
        (tmp_path / "s" / marker).write_text("")
    entry = {}
    assert handshake.prepared(world, {"name": "x", "dir": "s", "describe": {"load": {}}}, entry) is True
    assert not (tmp_path / "s" / handshake.DESCRIBED).exists() and world.built is None
    assert stages[-1].startswith("load: wait for the complete checkpoint") and entry["handshake_wait_seconds"] >= 0
