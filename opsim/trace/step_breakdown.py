"""The per-step time breakdown of step_trace_time.csv, computed as torch_npu's profiler does.

Within one ProfilerStep, over the device tasks the step's calls launched:

* Computing: the union of the compute tasks' intervals (kernels, copies);
* Communication: the union of the communication tasks' intervals (HCCL collectives and their sub-tasks);
* Communication(Not Overlapped): the communication time during which nothing computes; Overlapped the rest;
* Stage: from the step's first device task start to its last task end; Free = Stage - Computing -
  Communication(Not Overlapped) (the device neither computes nor communicates);
* Preparing: from the step's host start to its first device task; Bubble (pipeline receives) is 0: opsim
  models no pipeline-parallel receive, so "Not Overlapped and Exclude Receive" equals Not Overlapped.

On the shared AlexNet profile (tests/importer) the union of the communication stream's sub-tasks is within
0.05% of torch_npu's Communication, which takes the collectives' op-level spans.
"""
from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

COMMUNICATION_TASK_TYPES = frozenset({
    "COMMUNICATION", "NOTIFY WAIT", "NOTIFY RECORD", "NOTIFY_WAIT", "NOTIFY_RECORD", "WRITE VALUE", "SDMA", "RDMA",
    "REDUCE_INLINE", "REDUCE INLINE", "HCCL", "LOCAL_COPY", "REDUCE_TBE"})
"""Task types of communication tasks (opsim's own label and the HCCL sub-task types of torch_npu's rows)."""
NOT_COMPUTE_TASK_TYPES = frozenset({"EVENT_RECORD_SQE", "EVENT_WAIT_SQE", "EVENT_RECORD", "EVENT_WAIT", "HOST_FUNC",
                                    "PLACE_HOLDER_SQE", "RECORDED", "PCIE_DMA_SQE", "SDMA_SQE"})
"""Device tasks that neither compute nor communicate (stream synchronisation, profiling markers, and the
MEMCPY_ASYNC copies of a real profile, PCIE_DMA_SQE / SDMA_SQE: torch_npu leaves them out of Computing; on the
shared AlexNet profiles Computing is the union of the kernels and DSA tasks to 0.03 us, and 850 us more with
the copies). opsim's own copies (task type MEMCPY_ASYNC) are still counted as computing."""


@functools.lru_cache(maxsize=1024)
def is_communication(task_type: str) -> bool:
    return task_type.upper() in COMMUNICATION_TASK_TYPES


@functools.lru_cache(maxsize=1024)
def is_compute(task_type: str) -> bool:
    """(Remembered per task type: a run has a handful of types and millions of tasks.)"""
    return task_type not in NOT_COMPUTE_TASK_TYPES and not is_communication(task_type)


@dataclass
class StepBreakdown:
    """One step_trace_time row; every figure in ns."""

    step: int
    computing: int
    comm_not_overlapped: int
    overlapped: int
    communication: int
    free: int
    stage: int
    bubble: int
    preparing: int
    start_ns: int
    end_ns: int


def _merge(intervals: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for s, e in sorted(iv for iv in intervals if iv[1] > iv[0]):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def _length(merged: list[tuple[int, int]]) -> int:
    return sum(e - s for s, e in merged)


def _minus(a: list[tuple[int, int]], b: list[tuple[int, int]]) -> int:
    """Length of the merged intervals `a` outside the merged intervals `b` (one sweep)."""
    total, j = 0, 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                total += b[k][0] - cur
            cur = max(cur, b[k][1])
            k += 1
        if cur < e:
            total += e - cur
    return total


def breakdown(step: int, start_ns: int, end_ns: int, tasks: Iterable[Any]) -> StepBreakdown:
    """The breakdown of one step from its tasks (objects with task_type, start_ns, end_ns)."""
    compute, comm, all_iv = [], [], []
    for t in tasks:
        iv = (t.start_ns, t.end_ns)
        if is_communication(t.task_type):
            comm.append(iv)
        elif is_compute(t.task_type):
            compute.append(iv)
        else:
            continue
        all_iv.append(iv)
    if all_iv:
        ds, de = min(s for s, _ in all_iv), max(e for _, e in all_iv)
    else:
        ds = de = start_ns
    c_m, m_m = _merge(compute), _merge(comm)
    computing, communication = _length(c_m), _length(m_m)
    not_overlapped = _minus(m_m, c_m)
    stage = de - ds
    return StepBreakdown(step, computing, not_overlapped, communication - not_overlapped, communication,
                         stage - computing - not_overlapped, stage, 0, max(0, ds - start_ns), start_ns, end_ns)


def step_rows(windows: Iterable[Any], tasks: list[Any]) -> list[StepBreakdown]:
    """One breakdown per step window (objects with step, start_ns, end_ns); a task belongs to `task.step`."""
    by_step: dict[Any, list[Any]] = {}
    for t in tasks:
        by_step.setdefault(t.step, []).append(t)
    return [breakdown(w.step, w.start_ns, w.end_ns, by_step.get(w.step, ())) for w in windows]


SUMMARY_KEYS = ("computing_us", "comm_not_overlapped_us", "overlapped_us", "communication_us", "free_us",
                "stage_us", "bubble_us", "preparing_us")
"""summary.json's ``step_breakdown`` figures: step_trace_time.csv's columns in its order (Computing,
Communication(Not Overlapped), Overlapped, Communication, Free, Stage, Bubble, Preparing), summed over the steps."""


def summarise(rows: list[StepBreakdown], step_thread: str | None) -> dict[str, Any]:
    """summary.json's ``step_breakdown``: the number of steps, whose thread marks them (None: the first thread
    with steps) and each figure summed over the steps, in us (per step: step_trace_time.csv)."""
    out: dict[str, Any] = {"steps": len(rows), "step_thread": step_thread}
    fields = ("computing", "comm_not_overlapped", "overlapped", "communication", "free", "stage", "bubble",
              "preparing")
    for key, f in zip(SUMMARY_KEYS, fields):
        out[key] = round(sum(getattr(r, f) for r in rows) / 1000.0, 3)
    return out


__all__ = ["StepBreakdown", "breakdown", "step_rows", "summarise", "SUMMARY_KEYS", "is_communication", "is_compute",
           "COMMUNICATION_TASK_TYPES", "NOT_COMPUTE_TASK_TYPES"]
