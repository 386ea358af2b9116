"""Synthetic torch_npu traces for the importer's edge cases (the real one lives in tests/data/real)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

PY, CANN, HW = 1, 2, 3


class TraceBuilder:
    """A minimal trace_view.json: Python/CANN host threads, one device process, flows by HostToDevice."""

    def __init__(self) -> None:
        self.events: list[dict] = [
            {"ph": "M", "name": "process_name", "pid": PY, "tid": 0, "args": {"name": "Python"}},
            {"ph": "M", "name": "process_name", "pid": CANN, "tid": 0, "args": {"name": "CANN"}},
            {"ph": "M", "name": "process_name", "pid": HW, "tid": 0, "args": {"name": "Ascend Hardware"}},
        ]
        self.flow = 0
        self.corr = 0

    def x(self, name: str, pid: int, tid: int, ts: float, dur: float, **args) -> None:
        self.events.append({"ph": "X", "name": name, "pid": pid, "tid": tid, "ts": f"{ts:.3f}", "dur": dur,
                            "args": args})

    def stream(self, sid: int) -> None:
        self.events.append({"ph": "M", "name": "thread_name", "pid": HW, "tid": sid,
                            "args": {"name": f"Stream {sid}"}})

    def call(self, tid: int, api: str, ts: float, *, phase1: bool = True, kernels=((5.0, 3),), flows: bool = True,
             queue_tid: int | None = None) -> float:
        """One ACLNN call from thread `tid` at `ts`; returns the end time on the issuing thread."""
        t = ts
        if phase1:
            self.x(f"AscendCL@{api}GetWorkspaceSize", CANN, tid, t, 20.0)
            t += 22.0
        run_tid, run_t = tid, t
        if queue_tid is not None:
            self.corr += 1
            self.x("Enqueue", PY, tid, t, 2.0, correlation_id=self.corr)
            self.x(f"Dequeue@{api}", PY, queue_tid, t + 3.0, 16.0, correlation_id=self.corr)
            run_tid, run_t = queue_tid, t + 4.0
            t += 2.0
        self.x(f"AscendCL@{api}", CANN, run_tid, run_t, 10.0)
        for i, (dur, sid) in enumerate(kernels):
            self.flow += 1
            k_ts = run_t + 20.0 + 10 * i
            self.x(f"{api}_K{i}", HW, sid, k_ts, dur, **{"Task Type": "AI_CORE", "Stream Id": sid})
            if flows:
                fid = str(self.flow)
                self.events.append({"ph": "s", "cat": "HostToDevice", "name": "HostToDevice", "id": fid,
                                    "pid": CANN, "tid": run_tid, "ts": f"{run_t + 1 + i:.3f}"})
                self.events.append({"ph": "f", "cat": "HostToDevice", "name": "HostToDevice", "id": fid, "bp": "e",
                                    "pid": HW, "tid": sid, "ts": f"{k_ts:.3f}"})
        return t if queue_tid is not None else run_t + 10.0

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.events), encoding="utf-8")
        return path


@pytest.fixture
def trace() -> TraceBuilder:
    b = TraceBuilder()
    b.stream(3)
    return b


def _op_steps(program):
    """The op steps of a program, loops entered, in order."""
    for step in program:
        if "op" in step:
            yield step
        elif "loop" in step:
            yield from _op_steps(step["loop"]["body"])


@pytest.fixture
def op_steps():
    return _op_steps
