"""trace_view.json of the profiler output: Python / CANN / Ascend Hardware / Overlap Analysis processes."""
from __future__ import annotations

import json
from typing import Any

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
    for stream in sorted({t.stream for t in p.tasks}):
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
        for s, e in spans:
            ev.append({"ph": "X", "name": name, "pid": PID_OVERLAP, "tid": tid, "ts": us_str(s), "dur": us_str(e - s)})
    return ev


def _overlap_tracks(p: AscendProfile) -> list[tuple[str, int, list[tuple[int, int]]]]:
    """Overlap Analysis: Computing, Communication and its part not overlapped (a rank of a job), Free."""
    tracks = [("Computing", 0, p.busy)]
    if p.comm:
        tracks += [("Communication", 1, p.comm), ("Communication(Not Overlapped)", 2, p.comm_not_overlapped)]
    return tracks + [("Free", 3, p.free)]


def trace_view_json(p: AscendProfile) -> str:
    """A flat JSON array, one event per line, keys sorted (as ``json.dumps(e, sort_keys=True)`` of every
    `trace_events` event). The bulk events are formatted directly, one string each, in time linear in the
    events; ``tests/profiler/test_trace_view_lines.py`` holds them to ``json.dumps``."""
    return "[\n" + ",\n".join(trace_view_lines(p)) + "\n]\n"


def trace_view_lines(p: AscendProfile) -> list[str]:
    """The lines of trace_view.json: the metadata through ``json.dumps``, every other event formatted here."""
    ev = trace_events_metadata(p)
    lines = [json.dumps(e, sort_keys=True, separators=(",", ":"), ensure_ascii=False) for e in ev]
    us = us_str
    for w in p.steps:
        lines.append('{"args":{"Fwd thread id":0,"Sequence number":-1},"cat":"cpu_op","dur":"%s","name":%s,'
                     '"ph":"X","pid":%d,"tid":%d,"ts":"%s"}' % (us(w.end_ns - w.start_ns),
                                                                 _str(f"ProfilerStep#{w.step}"), PID_PYTHON, w.tid,
                                                                 us(w.start_ns)))
    for c in p.op_calls:
        lines.append('{"args":{"Call stack":%s,"Fwd thread id":0,"Sequence number":-1},"cat":"cpu_op","dur":"%s",'
                     '"name":%s,"ph":"X","pid":%d,"tid":%d,"ts":"%s"}' % (
                         _str(c.call_stack), us(c.end_ns - c.start_ns), _str(c.torch_name), PID_PYTHON, c.tid,
                         us(c.start_ns)))
    for a in p.api_spans:
        lines.append('{"args":{"connection_id":%d},"dur":"%s","name":%s,"ph":"X","pid":%d,"tid":%d,"ts":"%s"}' % (
            a.corr, us(a.end_ns - a.start_ns), _str(a.trace_name), PID_CANN, a.tid, us(a.start_ns)))
    for t in p.tasks:
        lines.append('{"args":{"Model Id":%d,"Physic Stream Id":%d,"Stream Id":%d,"Task Id":%d,"Task Type":%s,'
                     '"connection_id":%d},"dur":"%s","name":%s,"ph":"X","pid":%d,"tid":%d,"ts":"%s"}' % (
                         MODEL_ID_NONE, t.stream, t.stream, t.task_id, _str(t.task_type), t.corr, us(t.dur_ns),
                         _str(t.name), PID_HARDWARE, t.stream, us(t.start_ns)))
    for t in p.tasks:
        if t.op_call is None:
            continue
        fid = _str(t.flow_id)
        lines.append('{"cat":"async_npu","id":%s,"name":"torch_to_npu","ph":"s","pid":%d,"tid":%d,"ts":"%s"}' % (
            fid, PID_PYTHON, t.op_call.tid, us(t.op_call.start_ns)))
        lines.append('{"bp":"e","cat":"async_npu","id":%s,"name":"torch_to_npu","ph":"f","pid":%d,"tid":%d,'
                     '"ts":"%s"}' % (fid, PID_HARDWARE, t.stream, us(t.start_ns)))
    for name, tid, spans in _overlap_tracks(p):
        for s, e in spans:
            lines.append('{"dur":"%s","name":"%s","ph":"X","pid":%d,"tid":%d,"ts":"%s"}' % (
                us(e - s), name, PID_OVERLAP, tid, us(s)))
    return lines
