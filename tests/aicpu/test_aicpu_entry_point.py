"""The AI CPU launcher's dedicated registration entry point, AddToKernelLauncherListAiCpu (launchers.md §3,
executor-and-memory.md §8 "legacy AddToKernelLauncherListAiCpu (true)"; op_executor.cpp)."""
from __future__ import annotations

import numpy as np

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev.aicpu.kernel_lib import CC, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.launcher import AiCpuKernelLauncher, creat_aicpu_kernel_launcher
from opsim.opdev.aicpu.task_space import get_task_space
from opsim.opdev.executor import create_executor
from opsim.opdev.op_args import make_op_arg_context, op_attr, op_input, op_output
from opsim.opdev.op_def import RepeatMode
from opsim.opdev.op_types import register_op_type
from opsim.opdev.process import ProcessContext
from opsim.opdev.thread_local import set_current

S = AclnnStatus
OP = "AicpuEntryPointOp"
register_aicpu_kernel(AicpuKernel(OP, CC))


def test_dedicated_entry_point_abandons_with_disable_repeat():
    """Given a phase-1 executor with a valid cache, when a launcher is added through AddToKernelLauncherListAiCpu,
    then the cache is invalid, the executor is Unrepeatable (SetRepeatable -> ACLNN_ERR_INNER), and one launcher
    and one graph node over its INPUT / OUTPUT / WORKSPACE lists are added."""
    p = ProcessContext()
    prev = set_current(p.new_thread())
    try:
        unique = create_executor("aclnnEntry")
        ex = unique.get()
        cache = ex.op_exec_cache
        x, y = Tensor([4], address=0x100), Tensor([4], address=0x200)
        # a task made the usual way, then handed to the dedicated entry point
        scratch = create_executor("aclnnScratch").get()
        args = make_op_arg_context(op_input(x), op_output(y), op_attr(np.int64(1)))
        assert creat_aicpu_kernel_launcher(OP, get_task_space(OP), scratch, ["n"], args) == S.ACLNN_SUCCESS
        launcher = scratch.kernel_launch_obj_list.pop()
        launcher.executor = ex
        assert ex.add_to_kernel_launcher_list_aicpu(register_op_type(OP), launcher, launcher.args) == S.ACLNN_SUCCESS
        assert ex.kernel_launch_obj_list == [launcher] and isinstance(launcher, AiCpuKernelLauncher)
        assert len(ex.graph.nodes) == 1
        assert ex.repeat_mode == RepeatMode.UNREPEATABLE and ex.set_repeatable() == S.ACLNN_ERR_INNER
        assert cache is None or not cache.valid
    finally:
        set_current(prev)


def test_generic_registration_keeps_repeat_allowed():
    """The generic CreatAicpuKernelLauncher path abandons without disabling repeat (contrast)."""
    p = ProcessContext()
    prev = set_current(p.new_thread())
    try:
        ex = create_executor("aclnnGeneric").get()
        args = make_op_arg_context(op_input(Tensor([4], address=0x100)), op_output(Tensor([4], address=0x200)),
                                   op_attr(np.int64(1)))
        assert creat_aicpu_kernel_launcher(OP, get_task_space(OP), ex, ["n"], args) == S.ACLNN_SUCCESS
        assert ex.repeat_mode == RepeatMode.DEFAULT
    finally:
        set_current(prev)
