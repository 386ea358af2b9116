"""Compact trace storage: folded record chunks read back as the same values, and the columnar trace.json writer
produces exactly the bytes of the reference writer (with and without folded chunks)."""
from __future__ import annotations

import io
from array import array
from pathlib import Path

import pytest

import opsim.trace.recorder as recorder_mod
from opsim.scenario.runner import run_scenario
from opsim.trace import COLUMNS, Recorder
from opsim.trace.chrome_trace import _ColumnarTrace, write_chrome_trace, write_chrome_trace_reference

ROOT = Path(__file__).resolve().parents[2]


def _fill(rec: Recorder, n: int) -> None:
    for i in range(n):
        rec.host_span("t0", "launch", "Add", 0 if i == 0 else i * 1.5, 0.25, i)  # an int start among floats
        rec.device_task(i % 3, "aicore", 8, i, "Add", "AI_CORE", 8, i * 1.0, i * 1.0 + 0.5, i * 1.0 + 2.0, i)
        rec.memory_event(float(i), "alloc", 0x100000000 + i, 512, 512 * i)
        rec.cache_event(float(i), "t0", "exec", "hit", "Add", key_hash=(1 << 70) if i == 3 else i, detail="")
        rec.instant(float(i), "dump", "t0", {"i": i})
        rec.counter(float(i), "queue", i if i % 2 else i + 0.5)


def test_compacted_records_read_back_identically():
    rec, plain = Recorder(), Recorder()
    _fill(rec, 50)
    _fill(plain, 50)
    rec.compact()
    _fill(rec, 7)  # growing lists after a folded chunk
    _fill(plain, 7)
    for kind in COLUMNS:
        assert rec.count(kind) == plain.count(kind) == 57
        got, want = rec.records(kind), plain.records(kind)
        assert got == want
        for col in COLUMNS[kind]:  # same types too (an int stays an int, a float a float)
            assert [type(v) for v in got[col]] == [type(v) for v in want[col]], (kind, col)
        assert rec.rows(kind) == plain.rows(kind)
    chunk = next(rec.iter_chunks("device"))
    assert isinstance(chunk["start"], array) and chunk["start"].typecode == "d"
    assert isinstance(chunk["task_id"], array) and chunk["task_id"].typecode == "q"
    host = next(rec.iter_chunks("host"))
    assert not isinstance(host["start"], array)  # int 0 among floats: kept as a list, values unchanged
    cache = next(rec.iter_chunks("cache"))
    assert not isinstance(cache["key_hash"], array)  # beyond 64 bits: kept as a list
    rec.clear()
    assert all(rec.count(k) == 0 for k in COLUMNS)


def test_folding_keeps_interning():
    rec = Recorder()
    a, b = "".join(["ti", "ling"]), "".join(["til", "ing"])
    rec.host_span(0, a, "Op", 0.0, 1.0)
    rec.compact()
    rec.host_span(0, b, "Op", 1.0, 1.0)
    phases = rec.records("host")["phase"]
    assert phases[0] is phases[1]


@pytest.mark.parametrize("name", ["quickstart", "exec_cache_and_repeat", "multi_stream_contention"])
def test_columnar_trace_writer_matches_reference_bytes(name):
    res = run_scenario(ROOT / "scenarios" / f"{name}.yaml", write=False)
    assert _ColumnarTrace.prepare(res.sim, "Host") is not None  # the columnar path is the one taken
    ref = io.StringIO()
    n_ref = write_chrome_trace_reference(res.sim, ref)
    out = io.StringIO()
    assert write_chrome_trace(res.sim, out) == n_ref
    assert out.getvalue() == ref.getvalue()
    res.sim.recorder.compact()  # the same from folded chunks
    again = io.StringIO()
    write_chrome_trace(res.sim, again)
    assert again.getvalue() == ref.getvalue()


def test_columnar_writer_over_many_small_chunks(monkeypatch):
    monkeypatch.setattr(recorder_mod, "CHUNK_ROWS", 300)
    overrides = {"trace": True, "threads.0.program.0.loop.count": 400, "threads.1.program.0.loop.count": 400}
    res = run_scenario(ROOT / "scenarios" / "large.yaml", overrides=overrides, write=False)
    assert len(list(res.sim.recorder.iter_chunks("host"))) >= 3  # folded every 1024 correlation ids
    ref, out = io.StringIO(), io.StringIO()
    write_chrome_trace_reference(res.sim, ref)
    write_chrome_trace(res.sim, out)
    assert out.getvalue() == ref.getvalue()


def test_unusual_values_fall_back_to_the_reference_writer():
    res = run_scenario(ROOT / "scenarios" / "quickstart.yaml", write=False)
    res.sim.recorder.host_span(7, "launch", "Add", 1.0, 1.0, -1)  # a thread that is not a name
    assert _ColumnarTrace.prepare(res.sim, "Host") is None
    ref, out = io.StringIO(), io.StringIO()
    write_chrome_trace_reference(res.sim, ref)
    write_chrome_trace(res.sim, out)
    assert out.getvalue() == ref.getvalue()
