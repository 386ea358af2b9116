"""A rank's HCCL ops as `collective` steps: what a job import replays instead of their sub-tasks.

torch_npu writes each HCCL op twice: as one event on the "HCCL" process's "Group N Communication" row
(`hcom_allReduce__586_0_1`, args data_type, count and alg_type; kernel_details.csv lists it with Type
`hcom_allReduce_`), and as its sub-tasks (Notify Wait/Record, SDMA, Write Value, ...) on the Ascend Hardware
row of its stream. A single-rank import replays the sub-tasks with their recorded durations; a job import
replaces the sub-tasks inside each op's span by one `collective` step on the op's stream (the stream of its
first sub-task), with the op, its group, bytes (count x dtype size), dtype, the op type as `name`, and the
recorded Transit and Idle times of the rank's communication.json: the ranks then meet in it (opsim.cluster).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from typing import Any, Callable

from opsim.errors import ProfileFormatError
from opsim.importer.device_tasks import DeviceItem, DeviceTasks, assign_lanes
from opsim.importer.report import ImportReport
from opsim.ingest import TraceView
from opsim.ingest.kernels import canonical_dtype, dtype_itemsize

HCCL_PROCESS = "HCCL"
_OP_NAME = re.compile(r"^(hcom_[A-Za-z0-9]+_)_(\d{1,20})_(\d{1,12})_(\d{1,6})$")
OPS_OF_TYPE = {"hcom_allReduce_": "allreduce", "hcom_allGather_": "allgather",
               "hcom_reduceScatter_": "reducescatter", "hcom_broadcast_": "broadcast", "hcom_alltoall_": "alltoall",
               "hcom_alltoallv_": "alltoall", "hcom_send_": "send", "hcom_receive_": "recv"}
"""msprof's op type (kernel_details.csv's Type of an HCCL row) -> the collective a scenario names."""
OVERLAP_WINDOW = 8
"""A task belongs to the latest-starting op whose span holds its start, among the 8 latest that started before it
(ops of different groups overlap in time; more than 8 at once is not seen on real jobs: opsim's bound)."""
MAX_COUNT = 1 << 48
"""Largest element count accepted on an HCCL op (far above any device memory; larger is damage)."""


@dataclass(frozen=True)
class HcclOp:
    """One HCCL op of a trace: name hcom_allReduce__586_0_1 (type, group hash % 1000, index, 1)."""

    name: str
    op_type: str
    op: str
    hash3: str
    start_ns: int
    dur_ns: int
    dtype: str
    count: int
    alg_type: str

    @property
    def nbytes(self) -> int:
        return int(self.count * dtype_itemsize(self.dtype))

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.dur_ns


def read_hccl_ops(view: TraceView) -> list[HcclOp]:
    """The HCCL ops of a trace in time order (events named hcom_* on the "HCCL" process)."""
    pids = {pid for pid, n in view.process_names.items() if n == HCCL_PROCESS}
    out = []
    for e in view.events:
        m = _OP_NAME.match(e.name) if e.pid in pids else None
        if m is None:
            continue
        op = OPS_OF_TYPE.get(m.group(1))
        if op is None:
            raise ProfileFormatError(f"{view.path}: HCCL op {e.name[:80]!r} has type {m.group(1)!r}, which opsim "
                                     f"does not model (known: {', '.join(OPS_OF_TYPE)})")
        out.append(HcclOp(e.name, m.group(1), op, m.group(2), e.ts, e.dur, _dtype(e, view), _count(e, view),
                          str(e.args.get("alg_type", ""))[:64]))
    out.sort(key=lambda o: (o.start_ns, o.name))
    return out


def _dtype(e: Any, view: TraceView) -> str:
    raw = e.args.get("data_type")
    try:
        name = canonical_dtype(str(raw)) if isinstance(raw, str) else None
    except Exception:
        name = None
    if name is None or dtype_itemsize(name) <= 0:
        raise ProfileFormatError(f"{view.path}: HCCL op {e.name!r}: field 'data_type' is {str(raw)[:40]!r}, "
                                 f"expected a dtype such as FP32, FP16 or BF16; export the profile again")
    return "float32" if name == "float" else name


def _count(e: Any, view: TraceView) -> int:
    raw = e.args.get("count")
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, str) and raw.isdigit() and len(raw) < 20:
        raw = int(raw)
    if isinstance(raw, bool) or not isinstance(raw, int) or not 0 <= raw <= MAX_COUNT:
        raise ProfileFormatError(f"{view.path}: HCCL op {e.name!r}: field 'count' is {str(raw)[:40]!r}, expected "
                                 f"the element count (an integer from 0 to {MAX_COUNT})")
    return raw


def collapse(device: DeviceTasks, ops: list[HcclOp], step_of_op: Callable[[HcclOp], dict[str, Any]],
             report: ImportReport) -> None:
    """Replace the communication tasks inside each op's span (the latest-starting op whose span holds a task's
    start) by one collective item per op, on the stream of its first task; lanes are assigned again."""
    starts = [o.start_ns for o in ops]
    members: list[list[DeviceItem]] = [[] for _ in ops]
    kept: list[DeviceItem] = []
    for item in device.items:
        j = bisect.bisect_right(starts, item.start_ns) - 1 if item.kind == "communication" else -1
        home = next((k for k in range(j, max(j - OVERLAP_WINDOW, -1), -1) if ops[k].end_ns >= item.start_ns), None)
        (kept if home is None else members[home]).append(item)
    report.warn("communication task outside every HCCL op (replayed with its recorded duration)",
                sum(1 for i in kept if i.kind == "communication"))
    fallback = _common_stream(members)
    for op, its in zip(ops, members):
        first = min(its, key=lambda i: (i.start_ns, i.host_ns)) if its else None
        if first is None and fallback is None:
            raise ProfileFormatError(f"{op.name}: no HCCL task of this op on any stream of the trace; give the "
                                     f"profile of a level that records the communication tasks (Level1 or higher)")
        item = DeviceItem("collective", first.stream if first else fallback, op.name, "COMMUNICATION", op.start_ns,
                          op.dur_ns, collective=step_of_op(op))
        launched = [i for i in its if i.host_tid is not None]
        if launched:
            src = min(launched, key=lambda i: i.host_ns)
            item.host_tid, item.host_ns, item.host_end_ns = src.host_tid, src.host_ns, src.host_end_ns
        else:
            item.host_ns = item.host_end_ns = first.host_ns if first else op.start_ns
        kept.append(item)
        report.note("HCCL op replayed as one collective step", 1)
        report.note("HCCL sub-task modelled by its op's collective step (not replayed on its own)", len(its))
    assign_lanes(kept)
    kept.sort(key=lambda i: (i.host_ns, i.start_ns))
    device.items = kept
    device.streams = {i.label for i in kept}


def _common_stream(members: list[list[DeviceItem]]) -> int | None:
    counts: dict[int, int] = {}
    for its in members:
        if its:
            s = min(its, key=lambda i: i.start_ns).stream
            counts[s] = counts.get(s, 0) + 1
    return max(counts, key=lambda s: (counts[s], -s)) if counts else None


__all__ = ["HcclOp", "read_hccl_ops", "collapse", "OPS_OF_TYPE"]
