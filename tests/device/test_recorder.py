"""The recorder: columnar records, interning, switching off, correlation ids, DataFrame access."""
import sys

import pytest

from opsim.errors import InvalidArgumentError, OpsimError
from opsim.trace import COLUMNS, Recorder


def fill(rec):
    rec.host_span(1, "tiling", "Add", 0.0, 4.0, corr=3)
    rec.device_task(0, "aicore", 8, 0, "Add", "AI_CORE", 8, 4.0, 4.0, 10.0, 3)
    rec.memory_event(1.0, "alloc", 0x100000000, 512, 512)
    rec.cache_event(2.0, 1, "exec", "hit", "Add", key_hash=99, detail="x")
    rec.instant(3.0, "dump", "thread 1", {"name": "aclnnAdd_0_L2"})
    rec.counter(4.0, "queue", 2)


def test_each_kind_records_its_columns():
    rec = Recorder()
    fill(rec)
    for kind, cols in COLUMNS.items():
        data = rec.records(kind)
        assert list(data) == list(cols)
        assert rec.count(kind) == 1
    assert rec.records("host")["phase"] == ["tiling"]
    assert rec.rows("device") == [(0, 0, "aicore", 8, 0, "Add", "AI_CORE", 8, 4.0, 4.0, 10.0, 3)]
    assert rec.records("cache")["key_hash"] == [99]
    assert rec.records("instant")["args"] == [{"name": "aclnnAdd_0_L2"}]


def test_strings_are_interned():
    rec = Recorder()
    a = "".join(["ti", "ling"])
    b = "".join(["til", "ing"])
    assert a is not b
    rec.host_span(0, a, "Op", 0.0, 1.0)
    rec.host_span(0, b, "Op", 1.0, 1.0)
    phases = rec.records("host")["phase"]
    assert phases[0] is phases[1]


def test_disabled_recorder_records_nothing_and_can_be_switched_on():
    rec = Recorder(enabled=False)
    fill(rec)
    assert all(rec.count(k) == 0 for k in COLUMNS)
    assert rec.next_corr() == 1 and rec.next_corr() == 2
    rec.set_enabled(True)
    fill(rec)
    assert all(rec.count(k) == 1 for k in COLUMNS)


def test_unknown_kind_names_the_kinds():
    with pytest.raises(InvalidArgumentError, match="host"):
        Recorder().records("spans")


def test_to_dataframe_without_pandas_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(OpsimError, match=r"pip install opsim\[analysis\]"):
        Recorder().to_dataframe("host")


def test_to_dataframe_with_pandas():
    pytest.importorskip("pandas")
    rec = Recorder()
    fill(rec)
    df = rec.to_dataframe("device")
    assert list(df.columns) == list(COLUMNS["device"]) and len(df) == 1


def test_device_rows_read_back_as_recorded_at_every_point():
    """A device record is taken as one row and moved to the columns when anything reads or folds: every
    value comes back in its column, of its type, in record order, with folds, reads and a clear in between."""
    rec = Recorder()
    want = []
    for i in range(7):
        row = (i % 2, i, "aicore" if i % 3 else "vector", 8, i, f"op{i % 2}", "AI_CORE", 4, i * 1.5, i + 0.25,
               i + 2, -1 if i == 3 else i * 1000)  # an int end among floats
        rec.device_task(*row[1:], device=row[0])
        want.append(row)
        if i == 2:
            assert rec.count("device") == 3 and rec.rows("device") == want
        if i == 4:
            rec.compact()
    assert rec.rows("device") == want
    assert [tuple(map(type, r)) for r in rec.rows("device")] == [tuple(map(type, r)) for r in want]
    rec.device_task(0, "aicore", 1, 99, "x", "AI_CORE", 1, 0.0, 0.0, 1.0, 5)
    rec.clear()
    assert rec.count("device") == 0 and rec.rows("device") == []
