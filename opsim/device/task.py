"""Device tasks: the unit of work a stream runs (a kernel, a copy, an event record/wait, a host function)."""
from __future__ import annotations

import math
import operator
from enum import IntEnum
from typing import Any, Callable

from opsim.errors import InvalidArgumentError


class TaskKind(IntEnum):
    """What a task needs from the device. The kind picks the unit pool; ``task_type`` is the profiler label."""

    AI_CORE = 0
    """Occupies min(block_dim, AI Core count) AI Cores (cube cores) for its duration."""
    AI_VECTOR = 1
    """Occupies min(block_dim, vector core count) vector cores (AI Cores on SoCs without vector cores)."""
    AI_CPU = 2
    """Occupies one AI CPU."""
    MEMCPY_H2D = 3
    MEMCPY_D2H = 4
    MEMCPY_D2D = 5
    EVENT_RECORD = 6
    EVENT_WAIT = 7
    HOST_FUNC = 8
    """Runs its callback on the stream, in stream order, for zero or a given duration; takes no units."""
    COMMUNICATION = 9
    """An HCCL task (a collective such as hcom_allReduce_ or one of its notify/wait/copy sub-tasks) replayed
    with its recorded duration: it occupies its stream, takes none of the compute units."""
    RECORDED = 10
    """A device task opsim does not model, replayed from a profile: it occupies its stream for its recorded
    duration and takes no units."""
    COLLECTIVE = 11
    """A collective of a communication group (opsim.cluster): it starts when its stream reaches it, holds the
    stream while the group gathers and transfers, and ends when the group's rendezvous says; no units."""


MEMCPY_KINDS = frozenset({TaskKind.MEMCPY_H2D, TaskKind.MEMCPY_D2H, TaskKind.MEMCPY_D2D})
CORE_KINDS = frozenset({TaskKind.AI_CORE, TaskKind.AI_VECTOR})

DEFAULT_TASK_TYPE: dict[TaskKind, str] = {
    TaskKind.AI_CORE: "AI_CORE",
    TaskKind.AI_VECTOR: "AI_VECTOR_CORE",
    TaskKind.AI_CPU: "AI_CPU",
    TaskKind.MEMCPY_H2D: "MEMCPY_ASYNC",
    TaskKind.MEMCPY_D2H: "MEMCPY_ASYNC",
    TaskKind.MEMCPY_D2D: "MEMCPY_ASYNC",
    TaskKind.EVENT_RECORD: "EVENT_RECORD_SQE",
    TaskKind.EVENT_WAIT: "EVENT_WAIT_SQE",
    TaskKind.HOST_FUNC: "HOST_FUNC",
    TaskKind.COMMUNICATION: "COMMUNICATION",
    TaskKind.RECORDED: "RECORDED",
    TaskKind.COLLECTIVE: "COMMUNICATION",
}
"""Profiler "Task Type" labels (msprof / torch_npu spelling) used when a task does not name its own."""

TaskCallback = Callable[["DeviceTask"], Any]


def _check_block_dim(block_dim: Any, kind: TaskKind, op_name: str) -> int:
    """Slow path of the block_dim check: integer-like values are accepted, kernels need at least one block."""
    try:
        value = operator.index(block_dim) if not isinstance(block_dim, bool) else None
    except TypeError:
        value = None
    if value is None:
        raise InvalidArgumentError(f"block_dim must be an integer, got {block_dim!r} ({op_name})")
    if value <= 0 and kind in CORE_KINDS:
        raise InvalidArgumentError(
            f"block_dim must be >= 1 for {kind.name} tasks, got {value} ({op_name}); "
            "a kernel runs on at least one core")
    return int(value)


class DeviceTask:
    """One task on one stream.

    ``callback(task)`` runs when the task **starts** (it has its units and its simulated time begins), for
    every kind: a HOST_FUNC task exists only to run it in stream order (stream-ordered frees, numerics);
    a kernel may carry its numerics on it. ``on_done(task)`` runs when the task completes, before the next
    task on the stream starts. The stream fills in ``stream_id``, ``task_id`` (per-stream counter from 0),
    ``queued`` (the host submission time), ``start``, ``end`` and ``units``.
    """

    __slots__ = ("kind", "duration", "block_dim", "op_name", "task_type", "corr_id", "callback", "on_done",
                 "event", "nbytes", "stream_id", "task_id", "queued", "start", "end", "units", "_target")

    def __init__(self, kind: TaskKind, duration: float = 0.0, block_dim: int = 1, op_name: str = "",
                 task_type: str | None = None, corr_id: int = -1, callback: TaskCallback | None = None,
                 on_done: TaskCallback | None = None, event: Any = None, nbytes: int = 0) -> None:
        if type(kind) is not TaskKind:
            try:
                kind = TaskKind(kind) if not isinstance(kind, str) else TaskKind[kind]
            except (ValueError, KeyError):
                raise InvalidArgumentError(
                    f"task kind {kind!r} is not a TaskKind; use one of {', '.join(k.name for k in TaskKind)}") from None
        if type(duration) is not float and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
            raise InvalidArgumentError(f"task duration must be a number of microseconds, got {duration!r} ({op_name})")
        if not duration >= 0.0 or duration == math.inf:
            raise InvalidArgumentError(f"task duration must be a finite number >= 0 us, got {duration!r} ({op_name})")
        if type(block_dim) is not int or (block_dim <= 0 and kind in CORE_KINDS):
            block_dim = _check_block_dim(block_dim, kind, op_name)
        if (kind is TaskKind.EVENT_RECORD or kind is TaskKind.EVENT_WAIT) and event is None:
            raise InvalidArgumentError(f"{kind.name} tasks need an event (a StreamEvent from Device.create_event())")
        self._fill(kind, float(duration), block_dim, op_name,
                   task_type if task_type is not None else DEFAULT_TASK_TYPE[kind], corr_id, nbytes)
        self.callback = callback
        self.on_done = on_done
        self.event = event

    @classmethod
    def trusted(cls, kind: TaskKind, duration: float, block_dim: int, op_name: str, task_type: str,
                corr_id: int = -1, nbytes: int = 0) -> "DeviceTask":
        """A task built by the framework from values it already validated (a TaskKind, a finite float
        duration >= 0, an int block_dim >= 1, a task type string): the constructor without its checks."""
        self = object.__new__(cls)
        self._fill(kind, duration, block_dim, op_name, task_type, corr_id, nbytes)
        self.callback = None
        self.on_done = None
        self.event = None
        return self

    def _fill(self, kind: TaskKind, duration: float, block_dim: int, op_name: str, task_type: str, corr_id: int,
              nbytes: int) -> None:
        self.kind = kind
        self.duration = duration
        self.block_dim = block_dim
        self.op_name = op_name
        self.task_type = task_type
        self.corr_id = corr_id
        self.nbytes = nbytes
        self.stream_id = -1
        self.task_id = -1
        self.queued = math.nan
        self.start = math.nan
        self.end = math.nan
        self.units = 0
        self._target = 0

    def __repr__(self) -> str:
        return (f"DeviceTask({self.kind.name}, op={self.op_name!r}, stream={self.stream_id}, id={self.task_id}, "
                f"queued={self.queued}, start={self.start}, end={self.end})")
