"""HcclAllReduce and its kin as a host thread calls them: the collective goes onto the stream as one task."""
from __future__ import annotations

from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.cluster.collective import CollectiveCall
from opsim.device.task import DeviceTask, TaskKind
from opsim.opdev.thread_local import current


def launch_collective(stream: Any, call: CollectiveCall) -> AclnnStatus:
    """Queue `call` on `stream` at the thread's time: the host pays one launch (its thread and time go into the
    rank's CollectiveRecord); the stream reaching the task is the rank's arrival at the collective
    (opsim.cluster.collective)."""
    ctx = current()
    name = call.spec.type_name
    launch_us = ctx.process.cost.host("launch")
    ctx.charge("launch", name, launch_us)
    task = DeviceTask.trusted(TaskKind.COLLECTIVE, 0.0, 1, name, "COMMUNICATION", ctx.current_corr)
    task.event = call.issue(ctx.name, launch_us)
    ctx.submit(stream, task)
    return AclnnStatus.ACLNN_SUCCESS


__all__ = ["launch_collective"]
