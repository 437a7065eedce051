"""The world tasks' pure parts (worlds/), without Megatron: the row codes that carry each row's provenance, the
in_proj layouts the stand-in mixer is shaped from, and the task table (every task names patch families the
registry has)."""

import pytest

from megatron_adapter.patches.table import FAMILIES
from megatron_adapter.worlds import gdp_tasks, task_table, worker_context

GDP_NAMES = ["z", "V0", "V1", "V2", "K0", "K1", "K2", "Q", "b0", "b1", "b2", "a"]


def test_row_codes_round_trip_and_zero_is_a_pad_row():
    codes = [worker_context.row_code(s, r) for s, r in ((0, 0), (3, 17), (999, 0))] + [0.0]
    assert worker_context.decode_rows(codes) == [(0, 0), (3, 17), (999, 0), None]


def test_the_in_proj_layouts_the_stand_in_is_shaped_from():
    sections = [10, 10, 10, 10, 3, 3, 3, 3, 2, 2, 2, 2]
    assert gdp_tasks.layout_dims(sections, GDP_NAMES) == ("gdp", 10, 3, 2, 3)
    assert gdp_tasks.layout_dims([4, 4, 2, 2, 1], ["z", "x", "B", "C", "dt"]) == ("mamba", 4, 2, 1, 0)
    with pytest.raises(ValueError, match="not a GDP or Mamba in_proj layout"):
        gdp_tasks.layout_dims([1, 1], ["z", "q"])


def test_every_task_names_families_of_the_registry():
    for name, task in task_table.TASKS.items():
        assert callable(task.run) and set(task.patches) <= set(FAMILIES), name
    # the tasks that save or load through dist_checkpointing run with its CPU patches
    for name in ("opt_save", "opt_load", "ordering", "ckpt_save", "load_state"):
        assert set(task_table.SAVES_ON_CPU) <= set(task_table.TASKS[name].patches), name
    assert "float16_optimizer" in task_table.TASKS["opt_save"].patches


def test_gloos_transport_failing_is_the_worlds_failure():
    assert worker_context.transport_failed("Gloo connectFullMesh failed with [pair.cc:561] Connection closed by peer")
    assert not worker_context.transport_failed("KeyError: 'optimizer.state.exp_avg'")
