"""Which profiling reports each launcher kind emits under which switches, and their attribution
(dfx-and-profiling.md §5; op_kernel.h DoLaunchWithDfx / MemSet, aicpu_task.cpp Run, non_finite_check_op.h,
dsa_task.h Distribute, op_cache.cpp Run, OpDfxGuard)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev import dfx
from opsim.opdev.aicpu.kernel_lib import CC, AicpuKernel, register_aicpu_kernel
from opsim.opdev.aicpu.launcher import add_to_launcher_list_aicpu
from opsim.opdev.aicpu.task_space import get_task_space
from opsim.opdev.dfx import l0_dfx, profiler_hash as h
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.opdev.op_def import UnknowShapeOpType
from opsim.opdev.profiling import (PROF_ACL_API_MASK, PROF_TASK_TIME_L1_MASK, PROF_TASK_TIME_L2_MASK,
                                   PROF_TASK_TIME_MASK, start_profiling, stop_profiling)
from opsim.ops import _common as C
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size

S = AclnnStatus
WS = 0x100000
KL = PROF_TASK_TIME_MASK
L1 = PROF_TASK_TIME_L1_MASK
AICPU_OP = "ProfReportAicpuOp"
MEMSET_OP = "ProfReportMemSetOp"
register_aicpu_kernel(AicpuKernel(AICPU_OP, CC))
register_aicore_kernel(AiCoreKernel(MEMSET_OP, lambda i, o, a: TilingResult(memset_outputs=(0,)),
                                    declares_workspace=False))


def add_call(stream=None, n=8):
    """One aclnnAdd; a new `n` gives a new cache key (a miss), the same `n` a hit once the first run finished."""
    a, b, out = Tensor([n]), Tensor([n], address=0x100), Tensor([n], address=0x200)
    a.set_storage_address(0x300)
    status, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert status == S.ACLNN_SUCCESS
    return aclnn_add(WS if size else 0, size, ex, stream)


def l2_one_launcher(api, build, ins, outs, stream=None):
    status, size, ex = C.l2_phase_1(api, tuple(ins), tuple(outs), lambda: S.ACLNN_SUCCESS, build)
    assert status == S.ACLNN_SUCCESS
    return C.l2_phase_2(api, WS if size else 0, size, ex, stream)


def aicpu_call():
    x, y = Tensor([4], address=0x1000), Tensor([4], address=0x2000)

    def build(ex):
        with l0_dfx(AICPU_OP, ex):
            space = get_task_space(AICPU_OP, UnknowShapeOpType.DEPEND_IN_SHAPE, False)
            return add_to_launcher_list_aicpu(AICPU_OP, space, ex, ("n",), op_input(x), op_output(y),
                                              op_attr(np.int64(1)))
    return l2_one_launcher("aclnnProfAicpu", build, [x], [y])


def kinds(process, op=None):
    return [r.kind for r in process.profiling_reports if op is None or r.op_type == op]


# ---- AI Core -------------------------------------------------------------------------------------------

def test_acl_api_only_gives_host_exec_per_phase_and_no_kernel_launch(world):
    """Given reportFlag only, when aclnnAdd runs, then both L2 phases report host exec and the kernel-launch
    guard stays silent: the summary id is computed only with kernelLaunchFlag, so it is 0."""
    process, ctx = world
    start_profiling(process, PROF_ACL_API_MASK)
    assert add_call() == S.ACLNN_SUCCESS
    assert [(r.kind, r.op_type) for r in process.profiling_reports] == [("host_exec", "aclnnAdd")] * 2


def test_l2_guard_reports_an_acl_api_record_when_the_phase_ends(world):
    """op_dfx.cpp: the L2 OpDfxGuard makes an OpDfxProfiler(funcName) at entry (CollectProfilingStr registers
    __func__ as an ACL-level type, ids from 0x50000) and reports it (MsprofReportApi) in its destructor. So phase
    2's record follows the kernel-launch record of its launch, and the types are the registered ids of
    "aclnnAddGetWorkspaceSize" and "aclnnAdd" (not MSPROF_REPORT_NODE_HOST_OP_EXEC_TYPE)."""
    process, ctx = world
    start_profiling(process, PROF_ACL_API_MASK | KL)
    assert add_call() == S.ACLNN_SUCCESS
    assert add_call(n=16) == S.ACLNN_SUCCESS
    reps = process.profiling_reports
    assert kinds(process) == ["host_exec", "kernel_launch", "host_exec"] * 2
    assert process.profiling_strs == {"aclnnAddGetWorkspaceSize": 0x50000, "aclnnAdd": 0x50001}
    assert [r.type_id for r in reps if r.kind == "host_exec"] == [0x50000, 0x50001] * 2
    assert all(r.type_id == 0 for r in reps if r.kind != "host_exec")


def test_l2_guard_reports_on_a_failed_phase_1_too(world):
    """The guard is destroyed on every return path of aclnnXxxGetWorkspaceSize, a failed check included."""
    process, ctx = world
    start_profiling(process, PROF_ACL_API_MASK)
    status, _, ex = aclnn_add_get_workspace_size(Tensor([8]), Tensor([4]), Scalar(1.0), Tensor([2]))
    assert status != S.ACLNN_SUCCESS and ex is None
    assert [(r.kind, r.type_id) for r in process.profiling_reports] == [("host_exec", 0x50000)]
    assert ctx.l2_guard is None


def test_task_time_gives_the_kernel_launch_with_l2_l0_attribution(world):
    process, ctx = world
    start_profiling(process, KL)
    assert add_call() == S.ACLNN_SUCCESS
    (r,) = process.profiling_reports
    assert (r.kind, r.op_type, r.l2_api_name, r.l0_name) == ("kernel_launch", "Add", "aclnnAdd", "Add")
    assert (r.kernel_launcher_id, r.summary_item_id) == (h("Add"), h("aclnnAdd_Add_Add"))


def test_addition_info_needs_task_time(world):
    """Task-time level 1 alone reports nothing for an AI Core launch; with task time it adds basic info and the
    tensor info of the inputs and outputs."""
    process, ctx = world
    start_profiling(process, L1)
    add_call()
    assert kinds(process) == []
    start_profiling(process, KL | L1)
    add_call(n=16)
    assert kinds(process) == ["kernel_launch", "basic_info", "tensor_info", "tensor_info"]
    ins, outs = process.profiling_reports[-2:]
    assert [(r.tensor_type, r.tensor_num) for r in (ins, outs)] == [("input", 2), ("output", 1)]
    assert {(r.task_type, r.summary_item_id) for r in (ins, outs)} == {("AI_VECTOR_CORE", h("aclnnAdd_Add_Add"))}


def test_attribute_info_with_level_2(world):
    process, ctx = world
    start_profiling(process, KL | PROF_TASK_TIME_L2_MASK)
    add_call()
    assert kinds(process) == ["kernel_launch", "attr_info"]


def test_stop_silences_later_launches(world):
    process, ctx = world
    start_profiling(process, KL | L1 | PROF_ACL_API_MASK)
    add_call()
    n = len(process.profiling_reports)
    stop_profiling(process)
    add_call()
    assert len(process.profiling_reports) == n


# ---- MemSet, AI CPU, NonFiniteCheck, DSA ----------------------------------------------------------------

def _memset_call():
    x, y = Tensor([4], address=0x1000), Tensor([4], address=0x2000)

    def build(ex):
        with l0_dfx("MemSetL0", ex):
            return add_to_launcher_list_aicore(MEMSET_OP, ex, op_input(x), op_output(y))
    return l2_one_launcher("aclnnProfMemSet", build, [x], [y])


@pytest.mark.parametrize("mask, expected", [
    (PROF_ACL_API_MASK, []),
    (KL, ["kernel_launch"]),
    (KL | L1, ["kernel_launch", "basic_info", "tensor_info"]),
])
def test_memset_pre_launch(world, mask, expected):
    """MemSet: launcher id hash("MemSet"); summary id hash("l2_l0_MemSet") only with kernelLaunchFlag; the
    task-info addition report (an empty tensor list) with kernel launch and addition info."""
    process, ctx = world
    start_profiling(process, mask)
    assert _memset_call() == S.ACLNN_SUCCESS
    mem = [r for r in process.profiling_reports if r.op_type == "MemSet"]
    assert [r.kind for r in mem] == expected
    for r in mem:
        assert (r.kernel_launcher_id, r.summary_item_id) == (h("MemSet"), h("aclnnProfMemSet_MemSetL0_MemSet"))
    assert all(r.tensor_num == 0 for r in mem if r.kind == "tensor_info")


@pytest.mark.parametrize("mask, expected", [
    (PROF_ACL_API_MASK, ["kernel_launch"]),   # the guard fires on reportFlag: the id was captured at creation
    (KL, ["kernel_launch"]),
    (L1, []),
    (KL | L1, ["kernel_launch", "basic_info", "tensor_info", "tensor_info"]),
])
def test_aicpu_gating(world, mask, expected):
    """AI CPU: the guard uses summaryItemId_ from task creation (non-zero even without kernelLaunchFlag); the
    tensor info with task type AI_CPU only when kernel launch and addition info are both on."""
    process, ctx = world
    start_profiling(process, mask)
    assert aicpu_call() == S.ACLNN_SUCCESS
    reps = [r for r in process.profiling_reports if r.op_type == AICPU_OP]
    assert [r.kind for r in reps] == expected
    assert {r.summary_item_id for r in reps} <= {h(f"aclnnProfAicpu_{AICPU_OP}_{AICPU_OP}")}
    assert all(r.task_type == "AI_CPU" for r in reps if r.kind == "tensor_info")
    assert all(r.kernel_launcher_id == h(AICPU_OP) for r in reps)


@pytest.mark.parametrize("world", [{"overflow_dump": True}], indirect=True)
@pytest.mark.parametrize("mask, expected", [(PROF_ACL_API_MASK, []), (KL, ["kernel_launch"]),
                                            (KL | L1, ["kernel_launch", "basic_info", "tensor_info"])])
def test_non_finite_check(world, mask, expected):
    """The INFNAN overflow check launches one NonFiniteCheck per dtype group after a successful AI Core launch:
    summary id hash("l2_l0_NonFiniteCheck") only with kernelLaunchFlag, addition info with both flags."""
    process, ctx = world
    start_profiling(process, mask)
    assert add_call(stream=SimpleNamespace()) == S.ACLNN_SUCCESS
    reps = [r for r in process.profiling_reports if r.op_type == dfx.NON_FINITE_CHECK]
    assert [r.kind for r in reps] == expected
    assert all(r.summary_item_id == h("aclnnAdd_Add_NonFiniteCheck") for r in reps)


def test_dsa_attribution_uses_the_l0_name(world):
    from opsim.opdev.launchers import creat_dsa_kernel_launcher
    from opsim.opdev.op_args import make_op_arg_context
    from opsim.opdev.op_types import register_op_type
    process, ctx = world
    start_profiling(process, KL | L1)
    ins = [Tensor([1], address=0x100 * (i + 1)) for i in range(5)]
    y = Tensor([16], address=0x9000)

    def build(ex):
        with l0_dfx("RandL0", ex):
            creat_dsa_kernel_launcher("RandL0", register_op_type("DSARandomNormal"), 0, ex,
                                      make_op_arg_context(op_input(*ins), op_output(y)))
        return S.ACLNN_SUCCESS
    assert l2_one_launcher("aclnnProfDsa", build, ins, [y]) == S.ACLNN_SUCCESS
    reps = process.profiling_reports
    assert [r.kind for r in reps] == ["kernel_launch", "basic_info", "tensor_info", "tensor_info"]
    assert {(r.kernel_launcher_id, r.summary_item_id) for r in reps} == {(h("RandL0"), h("aclnnProfDsa_RandL0_RandL0"))}
    assert [(r.task_type, r.tensor_type, r.tensor_num) for r in reps[-2:]] == [("DSA", "input", 5), ("DSA", "output", 1)]


@pytest.mark.parametrize("n_in, n_out, nums", [
    (0, 0, []), (5, 1, [("input", 5), ("output", 1)]), (6, 0, [("input", 5), ("input", 1)]),
    (11, 10, [("input", 5), ("input", 5), ("input", 1), ("output", 5), ("output", 5)])])
def test_tensor_info_is_one_record_per_five_tensors_of_each_list(world, n_in, n_out, nums):
    """op_dfx.cpp ReportTensorAdditionInfo: per list (inputs, then outputs), `tensors.size() / 5` full records
    (MSPROF_GE_TENSOR_DATA_NUM) and one for a non-zero tail; an empty list sends none."""
    process, ctx = world
    ins, outs = [Tensor([1]) for _ in range(n_in)], [Tensor([1]) for _ in range(n_out)]
    dfx.report_addition_info(ctx, "Op", 1, 2, "AI_CORE", ins, outs)
    reps = process.profiling_reports
    assert reps[0].kind == "basic_info"
    assert [(r.tensor_type, r.tensor_num) for r in reps[1:]] == nums


def test_aicpu_tensor_info_drops_null_inputs_only(world):
    """aicpu_task.cpp Run: GetValidInputVec(inputs_) skips null inputs, GetConstVec(outputs_) keeps every output."""
    process, ctx = world
    start_profiling(process, KL | L1)
    x = Tensor([4])
    dfx.report_aicpu_run(ctx, AICPU_OP, 1, 2, [x, None, x], [None, x])
    assert [(r.tensor_type, r.tensor_num) for r in process.profiling_reports[1:]] == [("input", 2), ("output", 2)]


# ---- OpExecCache replay ----------------------------------------------------------------------------------

def test_replay_reports_with_the_ids_recorded_at_the_first_run(world):
    """Given profiling on (task time) during the first run, when the same call hits the cache, then the replayed
    task reports a kernel launch with the recorded summary id."""
    process, ctx = world
    start_profiling(process, KL)
    add_call()
    add_call()
    launches = [r for r in process.profiling_reports if r.kind == "kernel_launch"]
    assert len(launches) == 2 and launches[0].summary_item_id == launches[1].summary_item_id != 0


def test_replay_of_a_task_recorded_with_profiling_off_stays_silent_in_the_guard(world):
    """The recorded summary id is the TLS one at recording time (0 with profiling off): the replay guard never
    fires for it, while the addition info (gated on the flags only) is still reported."""
    process, ctx = world
    add_call()
    start_profiling(process, KL | L1)
    add_call()
    assert kinds(process) == ["basic_info", "tensor_info", "tensor_info"]
    assert {r.summary_item_id for r in process.profiling_reports} == {0}


# ---- capture-status query and the overflow check ---------------------------------------------------------

@pytest.mark.parametrize("world", [{"overflow_dump": True}], indirect=True)
@pytest.mark.parametrize("capturing, query_fails, checked", [
    (False, False, True), (True, False, False), (True, True, True), (False, True, True)])
def test_overflow_check_gating_by_capture_status(world, capturing, query_fails, checked):
    """The check is skipped only when aclmdlRICaptureGetInfo succeeds and reports ACTIVE; a failed query runs it
    (the C++ condition is `query == ACL_SUCCESS && status == ACTIVE`)."""
    process, ctx = world
    stream = SimpleNamespace(capturing=capturing)
    if query_fails:
        process.faults["rt.capture_get_info"] = lambda s: True
    assert dfx.capture_status(ctx, stream) == ((False, False) if query_fails else (True, capturing))
    add_call(stream=stream)
    spans = [a[1] for a in ctx.take_actions() if a[0] == 0]
    assert ("overflow check" in spans) is checked


MIX_OP = "ProfReportMixOp"
register_aicore_kernel(AiCoreKernel(MIX_OP, lambda i, o, a: TilingResult(task_type="MIX_AIC"),
                                    declares_workspace=False))


@pytest.mark.parametrize("mask, expected", [(PROF_ACL_API_MASK, []), (KL, ["kernel_launch", "context_id"])])
def test_mix_kernel_reports_its_context_id_with_task_time(world, mask, expected):
    process, ctx = world
    start_profiling(process, mask)
    x, y = Tensor([4], address=0x1000), Tensor([4], address=0x2000)

    def build(ex):
        with l0_dfx("MixL0", ex):
            return add_to_launcher_list_aicore(MIX_OP, ex, op_input(x), op_output(y))
    assert l2_one_launcher("aclnnProfMix", build, [x], [y]) == S.ACLNN_SUCCESS
    reps = [r for r in process.profiling_reports if r.op_type == MIX_OP]
    assert [r.kind for r in reps] == expected
    assert all(r.summary_item_id == h(f"aclnnProfMix_MixL0_{MIX_OP}") for r in reps)
