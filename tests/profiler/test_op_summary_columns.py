"""op_summary.csv and task_time.csv read from the recorder's columns a block at a time are the files the record
lists give: the same rows in the same order (ties in record order), across block edges."""
from __future__ import annotations

import io
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.trace import msprof_csv
from opsim.trace.msprof_csv import write_op_summary, write_task_time
from opsim.trace.recorder import Recorder

TASKS = st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["aicore", "vector", "aicpu", "sdma", "none"]),
                           st.integers(0, 3), st.integers(0, 5), st.sampled_from(["Add", "Mul", ""]),
                           st.sampled_from(["AI_CORE", "AI_VECTOR_CORE", "HOST_FUNC"]), st.integers(0, 8),
                           st.sampled_from([0.0, 1.5, 2.0004, 7.25]), st.integers(0, 3),
                           st.integers(-1, 3), st.integers(0, 1)), max_size=40)


def _write(rec, **kw) -> str:
    fh = io.StringIO()
    n = write_op_summary(rec, fh, epoch_us=1_700_000_000_000_000, clock_mhz=1850.0, **kw)
    assert n == len(fh.getvalue().splitlines()) - 1
    return fh.getvalue()


def _task_time(rec) -> str:
    fh = io.StringIO()
    n = write_task_time(rec, fh, epoch_us=1_700_000_000_000_000)
    assert n == len(fh.getvalue().splitlines()) - 1
    return fh.getvalue()


@settings(max_examples=150, deadline=None)
@given(TASKS, st.integers(1, 7))
def test_the_columns_give_the_record_lists_file(tasks, block):
    rec = Recorder()
    rec.host_span("t0", "op_call", "aclnnAdd", 0.0, 1.0, corr=1)
    for stream, kind, units, task_id, op, ttype, bd, start, dur, corr, device in tasks:
        rec.device_task(stream, kind, units, task_id, op, ttype, bd, start - 0.5, start, start + dur, corr, device)
    lists = SimpleNamespace(records=rec.records)  # no columns: the record lists' path
    info = {1: {"Input Shapes": '"2,3"'}}.get
    old = msprof_csv.BLOCK_ROWS
    msprof_csv.BLOCK_ROWS = block
    try:
        assert _write(rec, tensor_info=info) == _write(lists, tensor_info=info)
        assert _task_time(rec) == _task_time(lists)
    finally:
        msprof_csv.BLOCK_ROWS = old


def test_a_value_of_another_type_takes_the_record_lists():
    rec = Recorder()
    rec.device_task(0, "aicore", 1, 0, "Add", "AI_CORE", 1, 0.0, 3, 4.0)  # an int start: exact in the column
    rec.device_task(True, "aicore", 1, 1, "Mul", "AI_CORE", 1, 0.0, 1.0, 2.0)  # a bool stream: not an int
    rows = _write(rec).splitlines()[1:]
    assert [r.split(",")[4] for r in rows] == ["Mul", "Add"]
    assert rows[0].split(",")[3] == "True"


class _NoLists(Recorder):
    def records(self, kind):
        raise AssertionError(f"the {kind} records were copied into lists")


def test_the_device_records_are_never_copied_into_lists():
    rec = _NoLists()
    for i in range(5):
        rec.device_task(0, "aicore", 1, i, "Add", "AI_CORE", 1, 0.0, 5.0 - i, 6.0, i)
    assert _write(rec).count("\n") == 6
    assert _task_time(rec).count("\n") == 6


def test_a_task_type_that_is_not_a_string_fails_as_the_record_lists_do():
    rec = Recorder()
    rec.device_task(0, "aicore", 1, 0, "Add", 7, 1, 0.0, 1.0, 2.0)
    rec.device_task(0, "aicore", 1, 0, "Add", "AI_CORE", 1, 0.0, 1.0, 2.0)
    for r in (rec, SimpleNamespace(records=rec.records)):
        with pytest.raises(TypeError):  # the record tuples do not compare: both ways fail alike
            _task_time(r)
