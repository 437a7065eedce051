"""The optimizer_resume fill (worlds/optimizer_tasks.py): every saved row's value reads back as that row,
padding as zeros, and a value no saved row carried as its own text, never as some row."""

from megatron_adapter.worlds.optimizer_tasks import EXP_AVG_BASE, row_value, saved_row


def test_every_saved_row_reads_back_as_itself():
    for base in (0, EXP_AVG_BASE):
        for t in range(2):
            for x in range(60):
                assert saved_row(row_value(base, t, x, 60), base, 2, 60) == [t, x]


def test_padding_is_zeros():
    assert row_value(0, 1, 60, 60) == 0.0
    assert saved_row(0.0, EXP_AVG_BASE, 2, 60) is None


def test_a_value_no_saved_row_carried_is_named_not_read_as_a_row():
    for value in (1.5, 121.0, -3.0, float("nan"), float("inf"), row_value(0, 0, 5, 60)):  # the last: a weight's
        assert saved_row(value, EXP_AVG_BASE, 2, 60) == repr(value)


def test_the_weight_stays_exact_in_bfloat16():
    # bf16 holds every integer up to 256: the op allows at most 256 rows, so the largest weight value is 256
    assert row_value(0, 1, 127, 128) == 256.0
