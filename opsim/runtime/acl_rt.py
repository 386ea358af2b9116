"""The ACL runtime calls an application makes around ACLNN calls (aclrtMalloc, aclrtFree, streams, events).

They run on the calling simulated thread like framework calls: host cost is charged, device work is queued.
"""
from __future__ import annotations

from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.opdev.thread_local import ThreadLocalContext, charged_us, current

S = AclnnStatus


def _clock(ctx: ThreadLocalContext) -> float:
    """The thread's simulated time at this point of the call (now plus host time charged so far)."""
    return ctx.process.device.env.now + charged_us(ctx.actions)


def malloc(size: int) -> tuple[AclnnStatus, int]:
    """aclrtMalloc: a device allocation; out of memory returns a status (nothing is leaked)."""
    ctx = current()
    ctx.charge("rt malloc")
    status, addr = ctx.process.device.memory.malloc(int(size), at=_clock(ctx))
    if status != S.ACLNN_SUCCESS:
        rec = ctx.process.recorder
        if rec.enabled:
            name, op = ctx.name, ctx.current_op
            ctx.at(lambda t: rec.instant(t, "oom", name, {"size": int(size), "op": op}))
    return status, addr


def free(address: int) -> AclnnStatus:
    """aclrtFree: immediate free."""
    ctx = current()
    ctx.charge("rt free")
    return ctx.process.device.memory.free(address, at=_clock(ctx))


def free_async(address: int, stream: Any) -> AclnnStatus:
    """A stream-ordered free: the block returns to the pool after the work already queued on `stream`."""
    ctx = current()
    ctx.charge("rt free")
    return ctx.process.device.memory.free_async(address, stream, _clock(ctx))


def synchronize_stream(stream: Any) -> AclnnStatus:
    """aclrtSynchronizeStream."""
    from opsim.opdev import rt  # lazy: keeps SimPy out of importing opsim.runtime.acl_rt
    return rt.synchronize_stream(current(), stream)


def synchronize_device() -> AclnnStatus:
    """aclrtSynchronizeDevice."""
    ctx = current()
    ctx.charge("stream sync")
    ctx.sync(None)
    return S.ACLNN_SUCCESS


def record_event(event: Any, stream: Any) -> AclnnStatus:
    """aclrtRecordEvent: the event completes when the stream reaches it."""
    ctx = current()
    ctx.charge("launch", "RecordEvent")
    ctx.actions.append((1, _EventSubmit(stream, event, record=True), None))
    return S.ACLNN_SUCCESS


def stream_wait_event(stream: Any, event: Any) -> AclnnStatus:
    """aclrtStreamWaitEvent: `stream` waits until the event's record completes."""
    ctx = current()
    ctx.charge("launch", "StreamWaitEvent")
    ctx.actions.append((1, _EventSubmit(stream, event, record=False), None))
    return S.ACLNN_SUCCESS


def launch_task(stream: Any, kind: str, name: str, task_type: str, duration_us: float) -> AclnnStatus:
    """A device task replayed from a profile (a communication task or a recorded one): it takes its stream
    for `duration_us`; its host side is in the replayed host gaps, so it charges no host time."""
    from opsim.device.task import DeviceTask, TaskKind  # lazy: keeps SimPy out of importing opsim.runtime.acl_rt
    task = DeviceTask.trusted(TaskKind.COMMUNICATION if kind == "communication" else TaskKind.RECORDED,
                              float(duration_us), 1, name, task_type)
    current().actions.append((1, _TaskSubmit(stream, task), None))
    return S.ACLNN_SUCCESS


class _TaskSubmit:
    """Adapter: submit one prepared task on its stream through the replay submit path."""

    __slots__ = ("stream", "task")

    def __init__(self, stream: Any, task: Any):
        self.stream, self.task = stream, task

    def submit(self, _task: Any, at: float) -> None:
        self.stream.submit(self.task, at)


class _EventSubmit:
    """Adapter so event record/wait go through the same replay submit path as tasks."""

    __slots__ = ("stream", "event", "record")

    def __init__(self, stream: Any, event: Any, record: bool):
        self.stream, self.event, self.record = stream, event, record

    def submit(self, _task: Any, at: float) -> None:
        if self.record:
            self.stream.record_event(self.event, at)
        else:
            self.stream.wait_event(self.event, at)
