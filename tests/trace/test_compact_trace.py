"""Compact trace storage: folded record chunks read back as the same values, and trace.json holds every record at
its exact time whatever the chunking."""
from __future__ import annotations

import io
import json
from array import array
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import opsim.trace.recorder as recorder_mod
from opsim.scenario.runner import run_scenario
from opsim.trace import COLUMNS, Recorder
from opsim.trace.chrome_trace import write_chrome_trace
from opsim.trace.timefmt import to_ns

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
    assert isinstance(chunk["task_id"], array) and chunk["task_id"].typecode == "i"  # 4 bytes when they fit
    raw = next(rec._raw_chunks("device"))
    assert isinstance(raw["op"], array) and raw["op"].typecode == "H"  # names as 2-byte codes
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


def _trace(sim) -> str:
    out = io.StringIO()
    write_chrome_trace(sim, out)
    return out.getvalue()


@pytest.mark.parametrize("name", ["quickstart", "exec_cache_and_repeat", "multi_stream_contention"])
def test_trace_events_are_the_records_with_exact_times(name):
    """An independent reading of trace.json: every host and device slice is a record, at its exact time."""
    res = run_scenario(ROOT / "scenarios" / f"{name}.yaml", write=False)
    rec, tids = res.sim.recorder, {th.name: th.thread_id for th in res.sim.threads}
    events = json.loads(_trace(res.sim))["traceEvents"]
    host = rec.records("host")
    want = sorted((tids[t], to_ns(s) / 1000, op if ph == "op_call" else ph)
                  for t, ph, op, s in zip(host["thread"], host["phase"], host["op"], host["start"]))
    got = sorted((e["tid"], e["ts"], e["name"]) for e in events if e["ph"] == "X" and e["cat"] in ("host", "op_call"))
    assert got == want
    dev = rec.records("device")
    want = sorted((st + 1, to_ns(s) / 1000, tid, round(q, 3), round(s - q, 3))
                  for st, tid, q, s in zip(dev["stream"], dev["task_id"], dev["queued"], dev["start"]))
    got = sorted((e["tid"], e["ts"], e["args"]["task_id"], e["args"]["queued_us"], e["args"]["wait_us"])
                 for e in events if e["ph"] == "X" and e.get("pid") == 100)
    assert got == want
    # the same bytes from folded chunks
    before = _trace(res.sim)
    res.sim.recorder.compact()
    assert _trace(res.sim) == before


def test_trace_over_many_small_chunks_is_unchanged(monkeypatch):
    overrides = {"trace": True, "threads.0.program.0.loop.count": 400, "threads.1.program.0.loop.count": 400}
    whole = _trace(run_scenario(ROOT / "scenarios" / "large.yaml", overrides=overrides, write=False).sim)
    monkeypatch.setattr(recorder_mod, "CHUNK_ROWS", 300)
    res = run_scenario(ROOT / "scenarios" / "large.yaml", overrides=overrides, write=False)
    assert len(list(res.sim.recorder.iter_chunks("host"))) >= 3  # folded every 1024 correlation ids
    assert _trace(res.sim) == whole


def test_tensor_infos_read_as_tuples_and_bulk_spans_as_single_ones():
    rec, plain = Recorder(), Recorder()
    info = {"input_shapes": "4"}
    rec.tensor_info(3, "Add", info)
    rec.tensor_info(1 << 70, "Mul", info)  # beyond 64 bits: kept as it is
    assert list(rec.tensor_infos) == [(3, "Add", info), (1 << 70, "Mul", info)] == rec.tensor_infos
    assert rec.tensor_infos[1] == (1 << 70, "Mul", info) and rec.tensor_infos[:1] == [(3, "Add", info)]
    phases, ops = ("tiling", "launch"), ("Add", "Add")
    rec.host_spans("t0", phases, ops, 0.0, (1.0, 2.0), 7)
    rec.host_spans("t0", phases, ops, 3.0, (1.0, 2.0))
    for start in (0.0, 3.0):
        plain.host_span("t0", "tiling", "Add", start, 1.0, 7 if start == 0.0 else -1)
        plain.host_span("t0", "launch", "Add", start + 1.0, 2.0, 7 if start == 0.0 else -1)
    assert rec.rows("host") == plain.rows("host")
    assert rec.records("host")["phase"][:2] == ["tiling", "launch"]
    rec.tensor_infos.clear()
    assert len(rec.tensor_infos) == 0


_SPAN_GROUPS = [(("tiling", "launch"), ("Add", "Add"), (0.1, 0.2)),
                (("make key", "match cache", "launch"), ("aclnnMul", "aclnnMul", "Mul"), (1.0 / 3, 2.7, 1e-9)),
                (("odd",), ("Relu",), (1,)),  # an int duration: recorded span by span, as it is
                (("p",), (("a", 1),), (0.5,)),  # an op that is not a str
                (("tiling", "launch"), ("Add", "Add"), (0.0, 0.2)),
                (("tiling", "launch"), ("Add", "Add"), (-0.0, 0.2)),  # equal to the one above but for a zero's sign
                (("tiling", 1), ("Add", "Add"), (0.1, 0.2)),
                (("tiling", True), ("Add", "Add"), (0.1, 0.2))]  # equal to the one above but for a name's type


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(st.integers(0, len(_SPAN_GROUPS)), st.one_of(
    st.floats(-1e6, 1e12, allow_nan=False), st.integers(0, 10), st.just(0.0)), st.integers(-1, 5)), max_size=40),
    chunk=st.sampled_from([1, 2, 3, 7, 1 << 16]))
def test_span_groups_read_back_as_the_spans_one_by_one(calls, chunk):
    """host_spans (a group row folded into its spans) reads back exactly as host_span per span with the starts
    added in order: same values, same types, same order among single spans, whatever the chunking."""
    old = recorder_mod.CHUNK_ROWS
    recorder_mod.CHUNK_ROWS = chunk
    try:
        rec, plain = Recorder(), Recorder()
        for which, start, corr in calls:
            if which == len(_SPAN_GROUPS):
                rec.host_span("t1", "op_call", "aclnnAdd", start, 2.5, corr)
                plain.host_span("t1", "op_call", "aclnnAdd", start, 2.5, corr)
            else:
                phases, ops, durs = _SPAN_GROUPS[which]
                rec.host_spans("t0", phases, ops, start, durs, corr)
                t = start
                for p, o, d in zip(phases, ops, durs):
                    plain.host_span("t0", p, o, t, d, corr)
                    t = t + d
            rec.next_corr()  # folds now and then
        assert rec.count("host") == plain.count("host") == len(plain.rows("host"))
        typed = lambda rows: [tuple((type(v), repr(v)) for v in row) for row in rows]  # noqa: E731
        assert typed(rec.rows("host")) == typed(plain.rows("host"))
        for c, t in (("start", "d"), ("dur", "d"), ("corr", "q")):
            got, want = rec.numeric("host", c, t), plain.numeric("host", c, t)
            assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
    finally:
        recorder_mod.CHUNK_ROWS = old


_HITS = [(("L2 phase1 entry", "make key", "match cache", "L2 phase2 entry", "cache replay", "launch"),
          ("aclnnAdd",) * 4 + ("Add", "Add"), (1.5, 0.7, 0.3, 0.25, 1.0 / 3, 2.2), "aclnnAdd", "aclnnAdd",
          (("Add", {"input_shapes": "4"}),)),
         (("L2 phase1 entry", "launch"), ("aclnnMul", "Mul"), (1e-9, 7.0), "aclnnMulOut", "aclnnMul", ())]


@settings(max_examples=60, deadline=None)
@given(calls=st.lists(st.tuples(st.integers(0, len(_HITS)), st.floats(0, 1e12, allow_nan=False),
                                st.booleans(), st.integers(-1, 9)), max_size=40),
       chunk=st.sampled_from([1, 2, 3, 7, 1 << 16]))
def test_a_hit_in_one_call_reads_back_as_its_records_one_by_one(calls, chunk):
    """`Recorder.hit` (a replayed executor-cache hit: tensor descriptions, host spans, the cache hit and, with
    `call_end`, run_op's call span ending where the host clock moves) reads back exactly as the record methods
    called one by one, the call span's duration computed as run_op computes it, whatever the chunking and the
    single spans around it (an int start among them)."""
    old = recorder_mod.CHUNK_ROWS
    recorder_mod.CHUNK_ROWS = chunk
    try:
        rec, plain = Recorder(), Recorder()
        for r in (rec, plain):  # every name already coded, as after the first (recorded) replay of a template
            for phases, ops, durs, api, api_1, infos in _HITS:
                for info_op, info in infos:
                    r.tensor_info(0, info_op, info)
                r.host_spans("t0", phases, ops, 0, durs, 0)
                r.cache_event(0.0, "t0", "exec", "hit", api_1, 0, "")
                r.host_span("t0", "op_call", api, 0, 1.0, 0)
        rows = [rec.hit_rows("t0", *h) for h in _HITS]
        for which, start, call_end, corr in calls:
            if which == len(_HITS):
                for r in (rec, plain):
                    r.host_span("t1", "op_call", "aclnnAdd", 0 if corr < 0 else start, 2.5, corr)
                continue
            phases, ops, durs, api, api_1, infos = _HITS[which]
            t = start
            starts = []
            for p, o, d in zip(phases, ops, durs):
                plain.host_span("t0", p, o, t, d, corr)
                starts.append(t)
                t = t + d
            for info_op, info in infos:
                plain.tensor_info(corr, info_op, info)
            plain.cache_event(starts[1 % len(starts)], "t0", "exec", "hit", api_1, 0, "")
            if call_end:
                end = start + (t - start)  # FastEnvironment.advance's clock
                plain.host_span("t0", "op_call", api, start, end - start, corr)
            rec.hit(rows[which], start, starts[1 % len(starts)], corr, call_end)
            rec.next_corr()  # folds now and then
        assert rec.count("host") == plain.count("host") == len(plain.rows("host"))
        typed = lambda rows: [tuple((type(v), repr(v)) for v in row) for row in rows]  # noqa: E731
        for kind in ("host", "cache"):
            assert typed(rec.rows(kind)) == typed(plain.rows(kind))
        assert list(rec.tensor_infos) == list(plain.tensor_infos)
        for c, t in (("start", "d"), ("dur", "d"), ("corr", "q")):
            got, want = rec.numeric("host", c, t), plain.numeric("host", c, t)
            assert got[0].tolist() == want[0].tolist() and got[1] == want[1]
    finally:
        recorder_mod.CHUNK_ROWS = old


def test_hit_rows_need_plain_float_durations():
    rec = Recorder()
    rec.host_spans("t0", ("launch",), ("Add",), 0.0, (1,), 0)  # an int duration: no group
    assert rec.hit_rows("t0", ("launch",), ("Add",), (1,), "aclnnAdd", "aclnnAdd", ()) is None


_NAMES = [f"name{i}" for i in range(600)]


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.tuples(st.integers(0, 3), st.integers(0, len(_NAMES) - 1), st.integers(0, len(_NAMES) - 1),
                                st.floats(0, 1e9, allow_nan=False)), max_size=60),
       folds=st.lists(st.integers(0, 60), max_size=4), known=st.integers(0, len(_NAMES)))
def test_name_codes_read_back_whatever_their_number(calls, folds, known):
    """Columns of names fold into code arrays the same way below and beyond 256 distinct names (bytes or numpy):
    records, rows and code chunks read back as from a recorder never folded, span groups included."""
    rec, plain = Recorder(), Recorder()
    for r in (rec, plain):
        for name in _NAMES[:known]:  # names seen before: their codes, up to 599
            r.counter(0.0, name, 1)
    for i, (kind, a, b, t) in enumerate(calls):
        if i in folds:
            rec.compact()
        na, nb = _NAMES[a], _NAMES[b]
        if kind == 0:
            phases, ops, durs = (na, nb), (nb, na), (0.5, 0.25)
            rec.host_spans(na, phases, ops, t, durs, i)
            plain.host_span(na, na, nb, t, 0.5, i)
            plain.host_span(na, nb, na, t + 0.5, 0.25, i)
        else:
            for r in (rec, plain):
                if kind == 1:
                    r.device_task(0, na, 8, i, nb, na, 8, t, t + 1, t + 2, i)
                elif kind == 2:
                    r.cache_event(t, na, "exec", nb, na, i, nb)
                else:
                    r.host_span(nb, na, nb, t, 1.0, i)
    rec.compact()
    values = rec.code_values()
    assert values == plain.code_values()
    for kind in COLUMNS:
        typed = lambda rows: [tuple((type(v), repr(v)) for v in row) for row in rows]  # noqa: E731
        assert typed(rec.rows(kind)) == typed(plain.rows(kind)), kind
        for name in recorder_mod._CODED[kind]:
            got = [values[c] for part in rec.coded_chunks(kind, name) for c in part.tolist()]
            assert got == plain.records(kind)[name], (kind, name)
