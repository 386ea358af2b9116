"""The profile's device tasks as columns (`DeviceTasks`): a million-call run shows a million tasks, held as
numpy columns and codes into small tables (texts, tensor descriptions, PMU splits), never one object per task.

`device_tasks` builds them from the recorder (see ascend_build.py for how a task gets its call, step, name,
tensors and wait time); the writers read the columns; ``DeviceTasks[i]`` and iteration give `DeviceTaskRow`
objects for tests and small runs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np

from opsim.trace import step_breakdown
from opsim.trace.ascend_model import (BUSY_NON_KERNEL_TASK_TYPES, HIDDEN_TASK_TYPES, DeviceTaskRow, OpCalls,
                                      is_kernel_type, merged_array)
from opsim.trace.ascend_host import exact
from opsim.trace.timefmt import to_ns, to_ns_array

_INT_COLUMNS = ("device", "stream", "task_id", "block_dim", "corr")
_TEXT_COLUMNS = ("op", "task_type", "unit_kind")


@dataclass
class DeviceTasks:
    """The shown tasks of one device in (start, stream, task id) order. Texts (op, task type, unit kind, name)
    are codes into ``texts``; ``call`` an index into ``op_calls`` (-1: none); ``step`` is valid where
    ``has_step``; ``tensors`` / ``pmu`` index ``tensor_list`` / ``pmu_list`` (-1: none)."""

    device: int
    index: np.ndarray
    stream: np.ndarray
    task_id: np.ndarray
    block_dim: np.ndarray
    start_ns: np.ndarray
    end_ns: np.ndarray
    corr: np.ndarray
    wait_ns: np.ndarray
    step: np.ndarray
    has_step: np.ndarray
    call: np.ndarray
    op: np.ndarray
    task_type: np.ndarray
    unit_kind: np.ndarray
    name: np.ndarray
    texts: list[str]
    tensors: np.ndarray
    tensor_list: list[dict[str, str]]
    pmu: np.ndarray
    pmu_list: list[Any]
    op_calls: OpCalls

    def __len__(self) -> int:
        return len(self.start_ns)

    def is_kernel(self) -> np.ndarray:
        """Whether each task is a kernel (a kernel_details row)."""
        return self._by_type(is_kernel_type)

    def is_busy(self) -> np.ndarray:
        return self._by_type(lambda tt: is_kernel_type(tt) or tt in BUSY_NON_KERNEL_TASK_TYPES)

    def is_communication(self) -> np.ndarray:
        return self._by_type(step_breakdown.is_communication)

    def _by_type(self, test: Callable[[str], bool]) -> np.ndarray:
        table = np.array([bool(test(t)) if isinstance(t, str) else False for t in self.texts] or [False])
        return table[self.task_type]

    def code(self, text: str) -> int:
        """The code of `text` in ``texts`` (added when new)."""
        if text in self.texts:
            return self.texts.index(text)
        self.texts.append(text)
        return len(self.texts) - 1

    def steps_or_none(self) -> list[int | None]:
        return [s if h else None for s, h in zip(self.step.tolist(), self.has_step.tolist())]

    def __getitem__(self, i: int) -> DeviceTaskRow:
        texts = self.texts
        c, ti, pm = int(self.call[i]), int(self.tensors[i]), int(self.pmu[i])
        return DeviceTaskRow(
            int(self.index[i]), self.device, int(self.stream[i]), int(self.task_id[i]), texts[self.op[i]],
            texts[self.task_type[i]], texts[self.unit_kind[i]], int(self.block_dim[i]), int(self.start_ns[i]),
            int(self.end_ns[i]), int(self.corr[i]), texts[self.name[i]], self.op_calls[c] if c >= 0 else None,
            int(self.step[i]) if self.has_step[i] else None, int(self.wait_ns[i]),
            self.tensor_list[ti] if ti >= 0 else {}, self.pmu_list[pm] if pm >= 0 else None)

    def __iter__(self) -> Iterator[DeviceTaskRow]:
        return (self[i] for i in range(len(self)))


def device_columns(rec: Any) -> tuple[dict[str, np.ndarray], list]:
    """The device records as arrays (ints, float times, and the texts as codes into the returned values)."""
    cols: dict[str, np.ndarray] = {}
    if getattr(rec, "coded", None) is not None and getattr(rec, "numeric", None) is not None:
        values: list = []
        for c in _TEXT_COLUMNS:
            cols[c], values = rec.coded("device", c)
        for c in _INT_COLUMNS + ("queued", "start", "end"):
            tc = "q" if c in _INT_COLUMNS else "d"
            arr, odd = rec.numeric("device", c, tc)
            cols[c] = arr if exact(odd, tc) else np.asarray(rec.records("device")[c])
        return cols, list(values)
    dev = rec.records("device")
    index: dict[Any, int] = {}
    values = []
    for c in _TEXT_COLUMNS:
        cols[c] = np.array([index.setdefault(v, len(index)) for v in dev[c]], dtype=np.int64)
    values = list(index)
    for c in _INT_COLUMNS + ("queued", "start", "end"):
        cols[c] = np.asarray(dev[c])
    return cols, values


def _epoch(times: np.ndarray, epoch_ns: int) -> np.ndarray:
    x = np.asarray(times, dtype=np.float64)
    return to_ns_array(x) + epoch_ns


def device_tasks(dev: tuple[dict[str, np.ndarray], list], dev_id: int, op_calls: OpCalls, epoch_ns: int,
                 step_of: Any, stream_ids: Mapping[int, int],
                 kernel_name: Callable[[str, str | None], str]) -> DeviceTasks:
    """The shown tasks of device `dev_id` in record order (streams renumbered by `stream_ids`); a task's step is
    that of the call that launched it; a collective (a communication task no op call launched) belongs to the
    step its host thread launched it in, as torch_npu counts an HCCL op in the step that issued it (the task is
    queued as its launch ends, which may be the instant the step ends: its launch's last nanosecond decides).
    `dev`: `device_columns` of the recorder."""
    cols, values = dev
    hidden = np.array([v in HIDDEN_TASK_TYPES if isinstance(v, str) else False for v in values] or [False])
    keep = np.flatnonzero((cols["device"] == dev_id) & ~hidden[cols["task_type"]]) if len(cols["device"]) else \
        np.empty(0, np.int64)
    texts: list[str] = []
    text_code: dict[Any, int] = {}

    def code(v: Any) -> int:
        c = text_code.get(v)
        if c is None:
            c = text_code[v] = len(texts)
            texts.append(v)
        return c
    value_code = np.array([code(v) for v in values] or [0], dtype=np.int32)
    op, tt, unit = (value_code[np.asarray(cols[c])[keep].astype(np.int64)] for c in _TEXT_COLUMNS)
    stream = np.asarray(cols["stream"])[keep].astype(np.int64)
    if stream_ids:
        stream = np.array([stream_ids.get(s, s) for s in stream.tolist()], dtype=np.int64)
    corr = np.asarray(cols["corr"])[keep].astype(np.int64)
    call = op_calls.index_of(corr)
    start, end = _epoch(cols["start"][keep], epoch_ns), _epoch(cols["end"][keep], epoch_ns)
    name = _kernel_names(op, tt, call, texts, op_calls, code, kernel_name)
    step, has = _task_steps(call, op_calls, step_of, tt, texts, start, cols["queued"][keep], epoch_ns)
    n = len(keep)
    return DeviceTasks(dev_id, keep.astype(np.int64), stream, np.asarray(cols["task_id"])[keep].astype(np.int64),
                       np.asarray(cols["block_dim"])[keep].astype(np.int64), start, end, corr,
                       np.zeros(n, np.int64), step, has, call.astype(np.int64), op, tt, unit, name, texts,
                       np.full(n, -1, np.int32), [], np.full(n, -1, np.int32), [], op_calls)


def _kernel_names(op: np.ndarray, tt: np.ndarray, call: np.ndarray, texts: list[str], op_calls: OpCalls,
                  code: Callable[[Any], int], kernel_name: Callable[[str, str | None], str]) -> np.ndarray:
    """Each task's name code: its op, or for a kernel ``kernel_name(op, its call's API)`` (each pair once)."""
    name = op.copy()
    kernel = np.array([is_kernel_type(t) if isinstance(t, str) else False for t in texts] or [False])[tt]
    rows = np.flatnonzero(kernel)
    apis = [op_calls.apis[a] for a in op_calls.api.tolist()]
    memo: dict[tuple, int] = {}
    for i, o, c in zip(rows.tolist(), op[rows].tolist(), call[rows].tolist()):
        key = (o, c >= 0 and apis[c])
        got = memo.get(key)
        if got is None:
            got = memo[key] = code(kernel_name(texts[o], apis[c] if c >= 0 else None))
        name[i] = got
    return name


def _task_steps(call: np.ndarray, op_calls: OpCalls, step_of: Any, tt: np.ndarray, texts: list[str],
                start: np.ndarray, queued: np.ndarray, epoch_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Each task's step (and whether it has one): its call's step in the timeline, else as `device_tasks` says."""
    call_steps = [step_of(t) for t in op_calls.start_ns.tolist()]
    comm = np.array([step_breakdown.is_communication(t) if isinstance(t, str) else False for t in texts]
                    or [False])[tt]
    out: list[int | None] = [None] * len(call)
    for i, c in enumerate(call.tolist()):
        if c >= 0:
            out[i] = call_steps[c]
        elif comm[i]:
            out[i] = step_of.closed(epoch_ns + to_ns(float(queued[i])) - 1)
        else:
            out[i] = step_of(int(start[i]))
    has = np.array([s is not None for s in out], dtype=bool)
    return np.array([0 if s is None else s for s in out], dtype=np.int64), has


def take(tasks: DeviceTasks, order: np.ndarray) -> None:
    """Reorder every per-task column of `tasks` in place by `order`."""
    for f in ("index", "stream", "task_id", "block_dim", "start_ns", "end_ns", "corr", "wait_ns", "step",
              "has_step", "call", "op", "task_type", "unit_kind", "name", "tensors", "pmu"):
        setattr(tasks, f, getattr(tasks, f)[order])


def merged(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The union of the intervals (starts[i], ends[i]) as `ascend_model.merged_array` gives it: an (n, 2) int64
    array, sorted, touching ones joined (`merge_intervals` of the pairs)."""
    return merged_array(np.stack([np.asarray(starts, np.int64), np.asarray(ends, np.int64)], axis=1))


def step_rows(windows: Sequence[Any], tasks: DeviceTasks) -> list[step_breakdown.StepBreakdown]:
    """`step_breakdown.step_rows` over the columns: each window's breakdown from the tasks of its step."""
    rows = np.flatnonzero(tasks.has_step)
    order = rows[np.argsort(tasks.step[rows], kind="stable")]
    steps = tasks.step[order]
    texts = tasks.texts

    def of(step: int) -> Iterator[Any]:
        lo, hi = np.searchsorted(steps, step, "left"), np.searchsorted(steps, step, "right")
        sel = order[lo:hi]
        for t, s, e in zip(tasks.task_type[sel].tolist(), tasks.start_ns[sel].tolist(), tasks.end_ns[sel].tolist()):
            yield _Task(texts[t], s, e)
    return [step_breakdown.breakdown(w.step, w.start_ns, w.end_ns, of(w.step)) for w in windows]


@dataclass(slots=True)
class _Task:
    task_type: str
    start_ns: int
    end_ns: int
