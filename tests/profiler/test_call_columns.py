"""The calls and the overlap intervals of the profile model are columns (issue 30: a million-call run's profile
holds no object per call or interval); each column form equals the object or list form it replaced."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from opsim.scenario.result import RecorderColumns
from opsim.scenario.runner import run_scenario
from opsim.trace.ascend_build import (_op_calls, _separate_touching, _separate_touching_calls, _thread_ids,
                                      build_profile, first_call_rows)
from opsim.trace.ascend_host import call_columns, host_columns
from opsim.trace.ascend_model import OpCall, OpCalls, merge_intervals
from opsim.trace.ascend_profiler_db import _call_strings
from opsim.trace.ascend_tasks import merged
from opsim.trace.recorder import Recorder

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
EPOCH_NS = 1_700_000_000_000_000_000


def _sim():
    return run_scenario(SCENARIOS / "quickstart.yaml", write=False).sim


def _object_calls(host, tids) -> list[OpCall]:
    """The calls as the profile model built them before they were columns: one OpCall per call."""
    rows = first_call_rows(host)
    calls = [OpCall(corr, host.values[th], tids[host.values[th]], host.values[op], s, e) for th, op, s, e, corr in zip(
        host.thread[rows].tolist(), host.op[rows].tolist(), host.start_ns[rows].tolist(), host.end_ns[rows].tolist(),
        host.corr[rows].tolist())]
    calls.sort(key=lambda c: (c.start_ns, c.tid, c.corr))
    _separate_touching(calls)
    return calls


def test_call_columns_equal_the_call_objects_they_replaced():
    sim = _sim()
    host = host_columns(sim.recorder, EPOCH_NS)
    tids = _thread_ids(sim, host.thread_names())
    want = _object_calls(host, tids)
    got = _op_calls(host, tids)
    assert isinstance(got, OpCalls) and isinstance(got.start_ns, np.ndarray) and len(got) == len(want) > 10
    assert [(c.corr, c.thread, c.tid, c.api, c.start_ns, c.end_ns) for c in got] == \
        [(c.corr, c.thread, c.tid, c.api, c.start_ns, c.end_ns) for c in want]


def test_a_profiles_calls_read_as_objects_and_as_columns_alike():
    p = build_profile(_sim())
    calls = p.op_calls
    objs = list(calls)
    stacks, texts = calls.call_stacks()
    names = calls.torch_names()
    assert [texts[s] for s in stacks.tolist()] == [c.call_stack for c in objs]
    assert [names[a] for a in calls.api.tolist()] == [c.torch_name for c in objs]
    assert [c.step for c in objs] == [s if h else None for s, h in zip(calls.step.tolist(), calls.has_step.tolist())]
    assert calls.index_of(calls.corr[::-1]).tolist() == list(range(len(calls)))[::-1]
    assert calls.index_of(np.array([-1, 10**12])).tolist() == [-1, -1]


def test_call_strings_number_texts_as_a_pass_over_the_calls_would():
    calls = build_profile(_sim()).op_calls
    want: dict[str, int] = {"pre": 0}
    for c in calls:
        for text in (c.torch_name, "", c.call_stack):
            want.setdefault(text, len(want))
    got = _Numbering({"pre": 0})
    _call_strings(calls, got)
    assert got == want


class _Numbering(dict):
    """STRING_IDS' numbering: a text gets the next id on first look-up."""

    def __getitem__(self, text: str) -> int:
        return self.setdefault(text, len(self))


spans = st.lists(st.tuples(st.integers(1, 3), st.integers(0, 40), st.integers(0, 6)), max_size=30)


@settings(max_examples=200, deadline=None)
@given(spans)
def test_touching_calls_are_separated_as_the_object_walk_separates_them(rows):
    rows = sorted(rows, key=lambda r: (r[1], r[0]))
    objs = [OpCall(i, f"t{t}", t, "aclnnAdd", s, s + d) for i, (t, s, d) in enumerate(rows)]
    n = len(rows)
    calls = OpCalls(np.arange(n, dtype=np.int64), np.array([t for t, _, _ in rows], np.int32), ["t0", "t1", "t2", "t3"],
                    np.array([t for t, _, _ in rows], np.int64), np.zeros(n, np.int32), ["aclnnAdd"],
                    np.array([s for _, s, _ in rows], np.int64), np.array([s + d for _, s, d in rows], np.int64),
                    np.zeros(n, np.int64), np.zeros(n, bool), np.zeros(n, np.int64))
    _separate_touching(objs)
    _separate_touching_calls(calls)
    assert calls.end_ns.tolist() == [c.end_ns for c in objs]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 60), st.integers(0, 9)), max_size=40))
def test_merged_intervals_are_the_union_merge_intervals_gives(pairs):
    starts = np.array([s for s, _ in pairs], np.int64)
    ends = starts + np.array([d for _, d in pairs], np.int64)
    got = merged(starts, ends)
    assert got.shape[1:] == (2,) and got.dtype == np.int64
    assert [tuple(r) for r in got.tolist()] == merge_intervals(zip(starts.tolist(), ends.tolist()))


def test_free_and_communication_gaps_are_what_the_interval_lists_gave():
    p = build_profile(_sim())
    busy = [tuple(r) for r in p.busy.tolist()]
    assert [tuple(r) for r in p.free.tolist()] == [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] > a[1]]
    assert p.computing_ns == sum(e - s for s, e in busy) and len(p.comm) == 0
    p.comm = np.array([[busy[0][0], busy[2][1]]], np.int64)
    spans = merge_intervals(busy + [tuple(p.comm[0].tolist())])
    assert [tuple(r) for r in p.free.tolist()] == [(a[1], b[0]) for a, b in zip(spans, spans[1:]) if b[0] > a[1]]
    gaps = [(busy[0][1], busy[1][0]), (busy[1][1], busy[2][0])]
    assert [tuple(r) for r in p.comm_not_overlapped.tolist()] == [g for g in gaps if g[1] > g[0]]


def test_call_columns_read_chunk_by_chunk_equal_the_calls_of_every_host_span():
    sim = _sim()
    rec = sim.recorder
    for since in (None, float(sim.now) / 2):
        full = host_columns(rec, EPOCH_NS, since_us=since)
        calls = call_columns(rec, EPOCH_NS, since_us=since)
        rows = np.flatnonzero(full.phase == full.code("op_call"))
        assert len(rows) == len(calls) > 0
        for name in ("thread", "phase", "op", "corr", "start_ns", "end_ns"):
            assert getattr(calls, name).tolist() == getattr(full, name)[rows].tolist(), name
        assert calls.bounds() == full.bounds() and calls.thread_names() == full.thread_names()


def test_a_span_at_int_time_zero_is_read_from_the_arrays_with_the_same_values():
    rec = Recorder()
    rec.host_span("main", "op_call", "aclnnAdd", 0, 1.5, corr=1)  # an int start: an "odd" value
    rec.host_span("main", "launch", "Add", 0.25, 0.5, corr=1)
    rec.compact()

    class Lists:  # the recorder read as whole lists (what an odd value used to force)
        records = staticmethod(rec.records)
    for read in (host_columns, call_columns):
        a, b = read(rec, EPOCH_NS), read(Lists(), EPOCH_NS)
        assert a.start_ns.tolist() == b.start_ns.tolist() and a.end_ns.tolist() == b.end_ns.tolist()


def test_asking_whether_a_kind_is_recorded_reads_no_column():
    cols = RecorderColumns(_sim().recorder)
    assert "host" in cols and "nope" not in cols
    assert cols._read == {}


def test_memory_columns_read_as_the_event_and_allocation_objects_they_replaced():
    from opsim.trace.ascend_memory import memory_record_rows, operator_memory_rows, _mb, _ts
    p = build_profile(_sim())
    events, allocs = list(p.memory_events), list(p.op_memory)
    assert len(events) > 4 and len(allocs) > 2 and any(a.release_ns is None for a in allocs) is not None
    total = 0
    for e in events:  # running totals, in time order
        total += e.size if e.kind == "alloc" else -e.size
        assert e.total == total and e.kind in ("alloc", "free")
    assert [e.time_ns for e in events] == sorted(e.time_ns for e in events)
    assert memory_record_rows(p.memory_events, 0) == [
        ["PTA", _ts(e.time_ns), _mb(e.total), _mb(e.total), _mb(e.total), "", "NPU:0"] for e in events]
    rows = operator_memory_rows(p.op_memory, 0)
    for a, row in zip(allocs, rows, strict=True):
        dur = None if a.release_ns is None else a.release_ns - a.alloc_ns
        assert row[:4] == [a.name, repr(a.size / 1024), _ts(a.alloc_ns), _ts(a.release_ns)]
        assert row[5] == _ts(dur) and row[7] == _mb(a.alloc_total) and row[10] == _mb(a.release_total)
