"""AI CPU kernel launchers and their registration (CreatAicpuKernelLauncher, ADD_TO_LAUNCHER_LIST_AICPU).

AiCpuKernelLauncher references a task cached in its space: it releases the task's occupancy right after Run
for a non-repeatable executor (whatever Run returned) and only in its destructor for a repeatable one; a
failed SetIoTensors returns before the release, leaving the task busy for good. AiCpuOneShotKernelLauncher
owns an overflow task: it never releases it, the task dies with the launcher, and it makes the executor
unrepeatable. Neither launcher dumps tensors or checks overflow.
"""
from __future__ import annotations

import logging
from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.opdev.aicpu.task import AicpuTask
from opsim.opdev.aicpu.task_space import AicpuTaskSpace, take_pending_overflow_task
from opsim.opdev.launchers import KernelLauncher, graph_lists, register_launcher
from opsim.opdev.op_args import OpArgContext, destroy_op_arg_context, make_op_arg_context
from opsim.opdev.op_def import CoreType
from opsim.opdev.op_types import register_op_type
from opsim.opdev.thread_local import current

log = logging.getLogger("opsim.opdev.aicpu")
S = AclnnStatus


class AiCpuKernelLauncher(KernelLauncher):
    """Launches a task owned by its space's cache (raw pointer in opbase)."""

    core_type = CoreType.AI_CPU

    def __init__(self, op_type: int, executor: Any, args: OpArgContext, task: AicpuTask):
        super().__init__(op_type, executor, args)
        self.task: AicpuTask | None = task
        task.holder = self
        space = task.space
        if space is not None:
            space.live_launchers += 1

    def _release(self) -> None:
        """SetVisit(false), unless another launcher has taken the task since (no double release)."""
        task = self.task
        if task is not None and task.holder is self:
            task.set_visit(False)
            task.holder = None

    def launch(self) -> AclnnStatus:
        task = self.task
        if task is None:
            log.error("AI CPU launcher without a task (ACLNN_ERR_PARAM_NULLPTR)")
            return S.ACLNN_ERR_PARAM_NULLPTR
        if task.released:
            from opsim.errors import UseAfterDestroyError
            raise UseAfterDestroyError(f"AI CPU task of {task.op_type} was freed (aclnnAicpuFinalize) while an "
                                       "executor still referenced it")
        ctx = current()
        ex = self.executor
        status = task.set_io_tensors(ctx, ex, self.args)
        if status != S.ACLNN_SUCCESS:
            return status
        status = task.run(ctx, ex, ex.stream)
        if not ex.is_repeatable():
            self._release()
        return status

    def destroy(self) -> None:
        """Destructor: release occupancy if the executor is repeatable; destroy the args."""
        if self.destroyed:
            return
        if self.executor.is_repeatable():
            self._release()
        task = self.task
        if task is not None and task.space is not None:
            task.space.live_launchers -= 1
        super().destroy()


class AiCpuOneShotKernelLauncher(KernelLauncher):
    """Owns an overflow task: launch = SetIoTensors + Run, never released, freed with the launcher."""

    core_type = CoreType.AI_CPU

    def __init__(self, op_type: int, executor: Any, args: OpArgContext, task: AicpuTask):
        super().__init__(op_type, executor, args)
        self.task: AicpuTask | None = task
        task.holder = self

    def launch(self) -> AclnnStatus:
        task = self.task
        if task is None:
            log.error("one-shot AI CPU launcher without a task (ACLNN_ERR_PARAM_NULLPTR)")
            return S.ACLNN_ERR_PARAM_NULLPTR
        ctx = current()
        ex = self.executor
        status = task.set_io_tensors(ctx, ex, self.args)
        if status != S.ACLNN_SUCCESS:
            return status
        return task.run(ctx, ex, ex.stream)

    def check_repeatable(self, relation: dict, ori_storage: set) -> bool:
        return False

    def destroy(self) -> None:
        """Destructor: destroy the args; the task is freed with the launcher."""
        if self.destroyed:
            return
        task = self.task
        if task is not None:
            task.released = True
            task.holder = None
            self.task = None
        super().destroy()


def creat_aicpu_kernel_launcher(op_type: int | str, space: AicpuTaskSpace, executor: Any,
                                attr_names: list[str] | tuple[str, ...], args: OpArgContext | None) -> AclnnStatus:
    """CreatAicpuKernelLauncher: find or create the task, wrap it in a cached or one-shot launcher.

    The args are consumed on every path: by the launcher (destroyed with the executor) or, when no task can
    be had (a failed kernel-description load, an Init failure, an oversized key), destroyed here, as
    AddDirectInvokeTask does. A null task is ACLNN_ERR_INNER whatever the reason (aicpu_task.cpp:
    `CHECK_RET(task != nullptr, ACLNN_ERR_INNER)`); GetOrCreateTask's own status is only logged."""
    if args is None:
        log.error("AI CPU registration with null args (ACLNN_ERR_PARAM_INVALID)")
        return S.ACLNN_ERR_PARAM_INVALID
    ctx = current()
    op_id = register_op_type(op_type) if isinstance(op_type, str) else op_type
    task, status = space.get_or_create(ctx, executor, attr_names, args)
    if task is None:
        destroy_op_arg_context(args)
        log.error("AI CPU task of %s could not be created (%d)", space.op_type, int(status))
        return S.ACLNN_ERR_INNER
    overflow = take_pending_overflow_task(ctx, task)
    if overflow is not None:
        executor.abandon_cache(True)
        launcher: KernelLauncher = AiCpuOneShotKernelLauncher(op_id, executor, args, overflow)
    else:
        executor.abandon_cache()
        launcher = AiCpuKernelLauncher(op_id, executor, args, task)
    register_launcher(executor, launcher, *graph_lists(args, with_outshape=False))
    return S.ACLNN_SUCCESS


def add_to_launcher_list_aicpu(kernel_name: str, space: AicpuTaskSpace, executor: Any,
                               attr_names: list[str] | tuple[str, ...], *groups) -> AclnnStatus:
    """ADD_TO_LAUNCHER_LIST_AICPU(KernelName, OP_ATTR_NAMES({...}), OP_INPUT(...), OP_OUTPUT(...), OP_ATTR(...)).

    The C++ macro picks up `space` and `executor` from the L0 function's scope; here they are passed.
    """
    ctx = current()
    ctx.charge("add io and attr", kernel_name)
    op_id = register_op_type(kernel_name)
    p = ctx.process
    args = None if p.faults and p.fault("op_args.make_context", kernel_name) else make_op_arg_context(*groups)
    return creat_aicpu_kernel_launcher(op_id, space, executor, attr_names, args)


__all__ = ["AiCpuKernelLauncher", "AiCpuOneShotKernelLauncher", "creat_aicpu_kernel_launcher",
           "add_to_launcher_list_aicpu"]
