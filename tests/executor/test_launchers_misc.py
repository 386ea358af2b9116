"""DSA, copy and MemSet pre-launch behaviour (launchers.md §6-§8)."""
from __future__ import annotations

from opsim.acl import AclnnStatus as S, DataType, Placement, Tensor, host_tensor
from opsim.opdev.executor import common_op_executor_run, create_executor, set_repeatable
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import (DSA_WORKSPACE_SIZE, add_to_launcher_list_aicore, copy_npu_to_npu, copy_to_npu,
                                   creat_dsa_kernel_launcher)
from opsim.opdev.op_args import make_op_arg_context, op_input, op_output, op_workspace
from opsim.opdev.op_def import CoreType, DsaTaskType, RepeatMode
from opsim.opdev.op_types import register_op_type

from .conftest import phases


def _dsa(ctx, n_inputs=5, workspace=None):
    ue = create_executor("aclnnRandom")
    ex = ue.get()
    groups = [op_input(*[Tensor([1]) for _ in range(n_inputs)]), op_output(Tensor([64]))]
    if workspace is not None:
        groups.append(op_workspace(workspace))
    args = make_op_arg_context(*groups)
    creat_dsa_kernel_launcher("DSARandomNormal", register_op_type("DSARandomNormal"),
                              DsaTaskType.DSA_RANDOM_NORMAL, ex, args)
    return ue, ex, args


def test_dsa_registration_appends_512_byte_workspace_and_abandons_repeat(ctx):
    ue, ex, args = _dsa(ctx)
    launcher = ex.kernel_launch_obj_list[0]
    assert launcher.core_type == CoreType.AI_CORE  # there is no DSA enumerator
    ws = args.workspaces()
    assert len(ws) == 1 and len(ws[0].value) == 1
    t = ws[0].value[0]
    assert t.dtype == DataType.DT_UINT8 and t.storage_nbytes == DSA_WORKSPACE_SIZE
    assert ex.repeat_mode == RepeatMode.UNREPEATABLE
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER
    assert launcher.check_repeatable({}, set()) is False
    assert ex.get_workspace_size() == 1024  # Align(512) = 1024
    ex = ue.release_to()
    assert common_op_executor_run(0x4000, 1024, ex, None) == S.ACLNN_SUCCESS


def test_dsa_keeps_an_explicit_workspace(ctx):
    mine = Tensor([16], DataType.DT_UINT8)
    ue, ex, args = _dsa(ctx, workspace=mine)
    assert args.workspaces()[0].value is mine
    ue.close()


def test_dsa_wrong_input_count_is_inner_error(ctx):
    ue, ex, args = _dsa(ctx, n_inputs=3)
    ex = ue.release_to()
    assert common_op_executor_run(0x4000, ex.get_workspace_size(), ex, None) == S.ACLNN_ERR_INNER


def test_dsa_null_args_registers_nothing(ctx):
    ue = create_executor("aclnnRandom")
    creat_dsa_kernel_launcher("X", register_op_type("X"), 0, ue.get(), None)
    assert ue.get().kernel_launch_obj_list == []
    ue.close()


def test_copy_launchers(ctx):
    ue = create_executor("aclnnCopy")
    ex = ue.get()
    src = host_tensor([1.0, 2.0, 3.0], "float")
    dst = copy_to_npu(src, ex)
    assert dst is not None and dst.placement == Placement.ON_DEVICE_HBM and dst.storage.from_workspace
    launcher = ex.kernel_launch_obj_list[0]
    assert launcher.core_type == CoreType.NO_CALC and launcher.check_repeatable({}, set()) is False
    assert ex.op_exec_cache is None or not ex.op_exec_cache.valid  # AbandonCache()
    assert ex.repeat_mode == RepeatMode.DEFAULT
    small = Tensor([1])
    assert copy_npu_to_npu(dst, small, ex) == S.ACLNN_SUCCESS
    assert copy_npu_to_npu(src, small, ex) == S.ACLNN_ERR_PARAM_INVALID  # both must be on device
    size = ex.get_workspace_size()
    ex = ue.release_to()
    # the second copy's destination is smaller than its source -> ACLNN_ERR_INNER, the first copy ran
    assert common_op_executor_run(0x8000, size, ex, None) == S.ACLNN_ERR_INNER


def _memset_tiling(ins, outs, attrs):
    return TilingResult(block_dim=4, duration=2.0, memset_outputs=(0,))


register_aicore_kernel(AiCoreKernel("TestAtomicAdd", _memset_tiling, None, declares_workspace=False))


def test_memset_prelaunch_precedes_the_kernel(ctx):
    ue = create_executor("aclnnAtomic")
    ex = ue.get()
    add_to_launcher_list_aicore("TestAtomicAdd", ex, op_input(Tensor([8])), op_output(Tensor([8])))
    ex = ue.release_to()
    phases(ctx)
    submitted = []
    assert common_op_executor_run(0, 0, ex, object()) == S.ACLNN_SUCCESS
    for a in ctx.take_actions():
        if a[0] == 1:
            submitted.append(a[2].op_name)
    assert submitted == ["MemSet", "TestAtomicAdd"]


def _memset_task(ctx):
    ue = create_executor("aclnnAtomic")
    ex = ue.get()
    add_to_launcher_list_aicore("TestAtomicAdd", ex, op_input(Tensor([8])), op_output(Tensor([8])))
    assert ex.kernel_launch_obj_list[0].core_type == CoreType.AI_CORE  # opbase: part of the AI Core launch
    ex = ue.release_to()
    phases(ctx)
    assert common_op_executor_run(0, 0, ex, object()) == S.ACLNN_SUCCESS
    return next(a[2] for a in ctx.take_actions() if a[0] == 1 and a[2].op_name == "MemSet")


def test_memset_kernel_runs_on_the_vector_cores_as_real_910b_profiles_show(ctx):
    """kernel_details_910b_training.csv: all 84 MemSet rows are AI_VECTOR_CORE; the built-in MemSet factor applies."""
    task = _memset_task(ctx)
    cost = ctx.process.cost
    assert task.task_type == "AI_VECTOR_CORE" and task.kind.name == "AI_VECTOR"
    assert cost.kernel_level("MemSet", "AI_VECTOR_CORE", 0.0, 32.0) == "op type (built-in fits)"
    assert task.duration == cost.kernel("MemSet", "AI_VECTOR_CORE", 0.0, 32.0, 1)


def test_memset_kernel_on_a_soc_without_vector_cores_uses_the_ai_cores():
    from opsim.device.cost import CostModel
    from opsim.device.soc import get_soc
    from opsim.opdev.process import ProcessContext
    from opsim.opdev.thread_local import set_current
    c = ProcessContext(cost=CostModel(get_soc("Ascend910A"))).new_thread("t0")
    prev = set_current(c)
    try:
        assert _memset_task(c).task_type == "AI_CORE"
    finally:
        set_current(prev)
