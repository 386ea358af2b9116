"""trace_view.json of the profiler output: Python / CANN / Ascend Hardware / Overlap Analysis processes."""
from __future__ import annotations

import json
import operator
from typing import Any, BinaryIO, Iterator

import numpy as np

from opsim.trace.ascend_model import (MODEL_ID_NONE, OVERLAP_THREADS, PID_CANN, PID_HARDWARE, PID_OVERLAP,
                                      PID_PYTHON, AscendProfile, us_str)

_str = json.encoder.encode_basestring  # a string as json.dumps(..., ensure_ascii=False) writes it


def _meta(pid: int, name: str, kind: str = "process_name", tid: int = 0, **extra: Any) -> dict:
    return {"ph": "M", "name": kind, "pid": pid, "tid": tid, "args": {"name": name, **extra}}


def trace_events_metadata(p: AscendProfile) -> list[dict]:
    """The process and track names and sort orders."""
    ev: list[dict] = []
    for sort, (pid, name) in enumerate(((PID_PYTHON, "Python"), (PID_CANN, "CANN"),
                                        (PID_HARDWARE, "Ascend Hardware"), (PID_OVERLAP, "Overlap Analysis"))):
        ev.append(_meta(pid, name))
        ev.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}})
    for thread, tid in sorted(p.threads.items(), key=lambda kv: kv[1]):
        for pid in (PID_PYTHON, PID_CANN):
            ev.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}})
            ev.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid, "args": {"sort_index": tid}})
    for stream in np.unique(p.tasks.stream).tolist():
        ev.append({"ph": "M", "name": "thread_name", "pid": PID_HARDWARE, "tid": stream,
                   "args": {"name": f"Stream {stream}"}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": PID_HARDWARE, "tid": stream,
                   "args": {"sort_index": stream}})
    for tid, name in OVERLAP_THREADS.items():
        ev.append({"ph": "M", "name": "thread_name", "pid": PID_OVERLAP, "tid": tid, "args": {"name": name}})
        ev.append({"ph": "M", "name": "thread_sort_index", "pid": PID_OVERLAP, "tid": tid,
                   "args": {"sort_index": tid}})
    return ev


def trace_events(p: AscendProfile) -> list[dict]:
    """The trace_view.json events, in a fixed order (the reference `trace_view_lines` is held to)."""
    ev = trace_events_metadata(p)
    for w in p.steps:
        ev.append({"ph": "X", "cat": "cpu_op", "name": f"ProfilerStep#{w.step}", "pid": PID_PYTHON, "tid": w.tid,
                   "ts": us_str(w.start_ns), "dur": us_str(w.end_ns - w.start_ns),
                   "args": {"Sequence number": -1, "Fwd thread id": 0}})
    for c in p.op_calls:
        args: dict[str, Any] = {"Sequence number": -1, "Fwd thread id": 0, "Call stack": c.call_stack}
        ev.append({"ph": "X", "cat": "cpu_op", "name": c.torch_name, "pid": PID_PYTHON, "tid": c.tid,
                   "ts": us_str(c.start_ns), "dur": us_str(c.end_ns - c.start_ns), "args": args})
    for a in p.api_spans:
        ev.append({"ph": "X", "name": a.trace_name, "pid": PID_CANN, "tid": a.tid, "ts": us_str(a.start_ns),
                   "dur": us_str(a.end_ns - a.start_ns), "args": {"connection_id": a.corr}})
    for t in p.tasks:
        ev.append({"ph": "X", "name": t.name, "pid": PID_HARDWARE, "tid": t.stream, "ts": us_str(t.start_ns),
                   "dur": us_str(t.dur_ns),
                   "args": {"Model Id": MODEL_ID_NONE, "Task Type": t.task_type, "Physic Stream Id": t.stream,
                            "Task Id": t.task_id, "Stream Id": t.stream, "connection_id": t.corr}})
    for t in p.tasks:
        if t.op_call is None:
            continue
        flow = {"name": "torch_to_npu", "cat": "async_npu", "id": t.flow_id}
        ev.append({**flow, "ph": "s", "pid": PID_PYTHON, "tid": t.op_call.tid, "ts": us_str(t.op_call.start_ns)})
        ev.append({**flow, "ph": "f", "bp": "e", "pid": PID_HARDWARE, "tid": t.stream, "ts": us_str(t.start_ns)})
    for name, tid, spans in _overlap_tracks(p):
        for s, e in spans.tolist():
            ev.append({"ph": "X", "name": name, "pid": PID_OVERLAP, "tid": tid, "ts": us_str(s), "dur": us_str(e - s)})
    return ev


def _overlap_tracks(p: AscendProfile) -> list[tuple[str, int, np.ndarray]]:
    """Overlap Analysis: Computing, Communication and its part not overlapped (a rank of a job), Free."""
    tracks = [("Computing", 0, p.busy)]
    if len(p.comm):
        tracks += [("Communication", 1, p.comm), ("Communication(Not Overlapped)", 2, p.comm_not_overlapped)]
    return tracks + [("Free", 3, p.free)]


def trace_view_json(p: AscendProfile) -> str:
    """A flat JSON array, one event per line, keys sorted (as ``json.dumps(e, sort_keys=True)`` of every
    `trace_events` event). The bulk events are rendered from integer columns by one compiled loop
    (`opsim.trace.json_rows`), block by block, in time linear in the events;
    ``tests/profiler/test_linear_writing.py`` holds them to ``json.dumps``."""
    return b"".join(trace_view_blocks(p)).decode("utf-8")


def write_trace_view(p: AscendProfile, fh: BinaryIO) -> None:
    """`trace_view_json` written block by block into a binary file (no whole-file text in memory)."""
    for block in trace_view_blocks(p):
        fh.write(block)


def trace_view_lines(p: AscendProfile) -> list[str]:
    """The lines of trace_view.json (without the brackets and the separating commas)."""
    text = trace_view_json(p)
    return text[2:-3].split(",\n") if len(text) > 5 else []


BLOCK_ROWS = 65_536
"""Rows rendered at a time: bounds the text held in memory whatever the run's size."""

_STEP = ('{"args":{"Fwd thread id":0,"Sequence number":-1},"cat":"cpu_op","dur":"', ("us_text", "dur"),
         '","name":', ("piece", "name", 0), f',"ph":"X","pid":{PID_PYTHON},"tid":', ("int", "tid"),
         ',"ts":"', ("us_text", "ts"), '"}')
_CALL = ('{"args":{"Call stack":', ("piece", "stack", 0), ',"Fwd thread id":0,"Sequence number":-1},'
         '"cat":"cpu_op","dur":"', ("us_text", "dur"), '","name":', ("piece", "name", 0),
         f',"ph":"X","pid":{PID_PYTHON},"tid":', ("int", "tid"), ',"ts":"', ("us_text", "ts"), '"}')
_API = ('{"args":{"connection_id":', ("int", "corr"), '},"dur":"', ("us_text", "dur"), '","name":',
        ("piece", "name", 0), f',"ph":"X","pid":{PID_CANN},"tid":', ("int", "tid"), ',"ts":"', ("us_text", "ts"),
        '"}')
_TASK = (f'{{"args":{{"Model Id":{MODEL_ID_NONE},"Physic Stream Id":', ("int", "stream"), ',"Stream Id":',
         ("int", "stream"), ',"Task Id":', ("int", "task_id"), ',"Task Type":', ("piece", "type", 0),
         ',"connection_id":', ("int", "corr"), '},"dur":"', ("us_text", "dur"), '","name":', ("piece", "name", 0),
         f',"ph":"X","pid":{PID_HARDWARE},"tid":', ("int", "stream"), ',"ts":"', ("us_text", "ts"), '"}')
_FLOW = ('{"cat":"async_npu","id":"', ("int", "stream"), "-", ("us_text", "ts"),
         f'","name":"torch_to_npu","ph":"s","pid":{PID_PYTHON},"tid":', ("int", "call_tid"), ',"ts":"',
         ("us_text", "call_ts"), '"},\n{"bp":"e","cat":"async_npu","id":"', ("int", "stream"), "-",
         ("us_text", "ts"), f'","name":"torch_to_npu","ph":"f","pid":{PID_HARDWARE},"tid":', ("int", "stream"),
         ',"ts":"', ("us_text", "ts"), '"}')
_OVERLAP = ('{"dur":"', ("us_text", "dur"), '","name":"', ("piece", "name", 0), f'","ph":"X","pid":{PID_OVERLAP},'
            '"tid":', ("int", "tid"), ',"ts":"', ("us_text", "ts"), '"}')


def trace_view_blocks(p: AscendProfile) -> Iterator[bytes]:
    """trace_view.json as UTF-8 blocks: the metadata through ``json.dumps``, then every other event rendered
    from columns (`_sections`), `BLOCK_ROWS` rows at a time."""
    from opsim.trace.json_rows import Pieces, Template  # lazy: the compiled row loop loads with a trace_view
    meta = [json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            for e in trace_events_metadata(p)]
    yield ("[\n" + ",\n".join(meta)).encode("utf-8")
    pieces = Pieces(encoding="utf-8")
    for parts, n, columns in _sections(p, pieces):
        template = Template(parts)
        for lo in range(0, n, BLOCK_ROWS):
            hi = min(n, lo + BLOCK_ROWS)
            cols = {k: v(lo, hi) for k, v in columns.items()}
            yield template.render(hi - lo, cols, pieces).tobytes()
    yield b"\n]\n"


def _sections(p: AscendProfile, pieces: Any) -> Iterator[tuple[tuple, int, dict]]:
    """(template parts, row count, column name -> a function of a row range giving that range's int64 values)
    of each kind of event, in the file's order. Names are codes into `pieces` (their JSON text, each once)."""
    code = _coder(pieces)
    steps = p.steps
    yield _STEP, len(steps), {
        "dur": _span(steps), "name": _each(steps, lambda w: code(f"ProfilerStep#{w.step}")),
        "tid": _attr(steps, "tid"), "ts": _attr(steps, "start_ns")}
    calls = p.op_calls
    stacks, stack_texts = calls.call_stacks()
    stack_codes = np.array([code(text) for text in stack_texts] or [0], dtype=np.int64)
    call_names = np.array([code(text) for text in calls.torch_names()] or [0], dtype=np.int64)
    yield _CALL, len(calls), {
        "stack": lambda lo, hi: stack_codes[stacks[lo:hi]],
        "dur": lambda lo, hi: calls.end_ns[lo:hi] - calls.start_ns[lo:hi],
        "name": lambda lo, hi: call_names[calls.api[lo:hi]], "tid": _column(calls.tid),
        "ts": _column(calls.start_ns)}
    spans = p.api_spans
    span_names = np.array([code(text) for text in spans.trace_names()] or [0], dtype=np.int64)
    yield _API, len(spans), {
        "corr": _column(spans.corr), "dur": lambda lo, hi: spans.end_ns[lo:hi] - spans.start_ns[lo:hi],
        "name": lambda lo, hi: span_names[spans.kind[lo:hi].astype(np.int64) * len(spans.names) + spans.name[lo:hi]],
        "tid": _column(spans.tid), "ts": _column(spans.start_ns)}
    tasks = p.tasks
    text_codes = np.array([code(text) for text in tasks.texts] or [0], dtype=np.int64)
    yield _TASK, len(tasks), {
        "stream": _column(tasks.stream), "task_id": _column(tasks.task_id),
        "type": lambda lo, hi: text_codes[tasks.task_type[lo:hi]], "corr": _column(tasks.corr),
        "dur": lambda lo, hi: tasks.end_ns[lo:hi] - tasks.start_ns[lo:hi],
        "name": lambda lo, hi: text_codes[tasks.name[lo:hi]], "ts": _column(tasks.start_ns)}
    flows = np.flatnonzero(tasks.call >= 0)
    calls_of = tasks.call[flows]
    call_tid, call_ts = p.op_calls.tid, p.op_calls.start_ns
    yield _FLOW, len(flows), {
        "stream": lambda lo, hi: tasks.stream[flows[lo:hi]], "ts": lambda lo, hi: tasks.start_ns[flows[lo:hi]],
        "call_tid": lambda lo, hi: call_tid[calls_of[lo:hi]], "call_ts": lambda lo, hi: call_ts[calls_of[lo:hi]]}
    for name, tid, intervals in _overlap_tracks(p):
        starts, ends = _column(intervals[:, 0]), _column(intervals[:, 1])
        yield _OVERLAP, len(intervals), {
            "dur": lambda lo, hi, s=starts, e=ends: e(lo, hi) - s(lo, hi), "ts": starts,
            "name": _same(pieces.code(name)), "tid": _same(tid)}


def _coder(pieces: Any):
    """text -> the code of its JSON string in `pieces` (escaped as ``json.dumps(..., ensure_ascii=False)``)."""
    memo: dict[str, int] = {}

    def code(text: str) -> int:
        c = memo.get(text)
        if c is None:
            c = memo[text] = pieces.code(_str(text))
        return c
    return code


def _each(items: list, get: Any):
    """A column: ``get(item)`` of the items of a row range, as int64."""
    return lambda lo, hi: np.fromiter(map(get, items[lo:hi]), dtype=np.int64, count=hi - lo)


def _column(values: np.ndarray):
    """A column held as an array: its int64 values of a row range."""
    return lambda lo, hi: values[lo:hi].astype(np.int64, copy=False)


def _attr(items: list, name: str):
    return _each(items, operator.attrgetter(name))


def _span(items: list):
    """The column ``end_ns - start_ns``."""
    starts, ends = _attr(items, "start_ns"), _attr(items, "end_ns")
    return lambda lo, hi: ends(lo, hi) - starts(lo, hi)


def _same(value: int):
    return lambda lo, hi: np.full(hi - lo, value, dtype=np.int64)
