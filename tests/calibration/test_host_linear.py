"""Host extraction is linear in the events: counted attribute reads, not wall time, so the test is stable."""
from __future__ import annotations

from pathlib import Path

from opsim.calibration.host import queue_phases
from opsim.ingest.trace_view import TraceEvent, TraceView

_READS = [0]


class _Counted(TraceEvent):
    """A TraceEvent that counts every attribute read (the work queue_phases does per event)."""

    def __getattribute__(self, name):
        _READS[0] += 1
        return object.__getattribute__(self, name)


def _trace(n: int) -> TraceView:
    """n queued calls on one consumer thread: Enqueue, Dequeue@ around one AscendCL@ call with a nested one."""
    ev = []
    for i in range(n):
        t = 100_000 * i
        ev.append(_Counted("Enqueue", 1, 7, t, 4_000, args={"correlation_id": i}, index=len(ev)))
        ev.append(_Counted("Dequeue@aclnnAdd", 1, 9, t + 5_000, 20_000, args={"correlation_id": i}, index=len(ev)))
        ev.append(_Counted("AscendCL@aclnnAdd", 2, 9, t + 10_000, 10_000, index=len(ev)))
        ev.append(_Counted("AscendCL@aclrtLaunchKernel", 2, 9, t + 12_000, 2_000, index=len(ev)))
    return TraceView(path=Path("t.json"), events=ev, flows=[], process_names={}, thread_names={})


def _reads(n: int) -> int:
    trace = _trace(n)
    _READS[0] = 0
    out = queue_phases(trace)
    assert out["dequeue"].median_us == 10.0 and out["dequeue"].n == n  # the nested call is not subtracted twice
    return _READS[0]


def test_queue_phases_work_grows_linearly_with_the_events():
    small, big = _reads(200), _reads(2000)
    assert big < 12 * small, (small, big)  # 10x the events: ~10x the reads (a per-dequeue scan gives ~100x)
