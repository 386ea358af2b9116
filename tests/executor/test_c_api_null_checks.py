"""Null arguments of the C entry points (executor-and-memory.md §1 step 1a, §7 steps 1-2; op_dfx.cpp
CheckPhase1Params; op_executor.cpp CommonOpExecutorRun / DeleteExecutorForError)."""
from __future__ import annotations

import pytest

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev import c_api
from opsim.opdev.c_api import OutSlot
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size

S = AclnnStatus
WS = 0x100000


def args(n=8):
    return Tensor([n], address=0x80), Tensor([n], address=0x100), Scalar(1.0), Tensor([n], address=0x200)


@pytest.mark.parametrize("null", ["executor", "workspace_size", "both"])
def test_null_out_slot_is_param_nullptr_before_anything(ctx, null):
    """Given a null executor or workspace-size slot, when phase 1 is called, then it returns
    ACLNN_ERR_PARAM_NULLPTR (161001) before the TLS context, the sequence counter or the key are touched."""
    ws = None if null in ("workspace_size", "both") else OutSlot()
    ex = None if null in ("executor", "both") else OutSlot()
    seq = ctx.process.l2_sequence_counter
    assert c_api.get_workspace_size(aclnn_add_get_workspace_size, *args(), workspace_size=ws, executor=ex) == \
        S.ACLNN_ERR_PARAM_NULLPTR
    assert ctx.process.l2_sequence_counter == seq and ctx.log_info.l2_api_name is None and ctx.key == b""
    assert ctx.take_actions() == []


def test_slots_receive_the_results(ctx):
    ws, ex = OutSlot(), OutSlot()
    assert c_api.get_workspace_size(aclnn_add_get_workspace_size, *args(), workspace_size=ws, executor=ex) == \
        S.ACLNN_SUCCESS
    assert ws.value == 0 and ex.value.kind == "executor"
    assert c_api.run(aclnn_add, None, ws.value, ex.value, None) == S.ACLNN_SUCCESS


def test_null_executor_in_phase_2(ctx):
    assert c_api.run(aclnn_add, WS, 0, None, None) == S.ACLNN_ERR_PARAM_NULLPTR


def test_op_cache_replay_without_a_buffer(ctx):
    """Given a cache hit (a wrapper) that needs a workspace, when phase 2 gets a null workspace, then the wrapper
    is deleted, nothing is replayed and the status is ACLNN_ERR_PARAM_NULLPTR."""
    from opsim.ops import _common as C
    from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
    from opsim.opdev.dfx import l0_dfx
    from opsim.opdev.launchers import add_to_launcher_list_aicore
    from opsim.opdev.op_args import op_input, op_output
    register_aicore_kernel(AiCoreKernel("NullWsKernel", lambda i, o, a: TilingResult(workspace_sizes=[256])))
    x, y = Tensor([4], address=0x1000), Tensor([4], address=0x2000)

    def phase1():
        def build(ex):
            with l0_dfx("NullWsKernel", ex):
                return add_to_launcher_list_aicore("NullWsKernel", ex, op_input(x), op_output(y))
        ws, ex = OutSlot(), OutSlot()
        st = c_api.get_workspace_size(
            lambda: C.l2_phase_1("aclnnNullWs", (x,), (y,), lambda: S.ACLNN_SUCCESS, build),
            workspace_size=ws, executor=ex)
        assert st == S.ACLNN_SUCCESS
        return ws.value, ex.value

    def phase2(ws, size, ex):
        return c_api.run(lambda w, s, e, st: C.l2_phase_2("aclnnNullWs", w, s, e, st), ws, size, ex, None)

    size, ex = phase1()
    assert size > 0 and phase2(WS, size, ex) == S.ACLNN_SUCCESS
    size, wrap = phase1()
    assert wrap.kind == "wrap"
    ctx.take_actions()
    assert phase2(None, size, wrap) == S.ACLNN_ERR_PARAM_NULLPTR
    assert not wrap.alive
    assert not [a for a in ctx.take_actions() if a[0] == 1]  # no device task submitted


def test_null_workspace_with_a_size_is_commonopexecutorrun_s_check_for_any_executor(ctx):
    """op_executor.cpp CommonOpExecutorRun: `workspaceSize > 0 && workspace == nullptr` is checked before the
    cache wrapper is even looked at, so a plain executor (no cache involved) is deleted and nothing launches;
    docs/fidelity.md words it as that check, not as a property of an op-cache replay."""
    from pathlib import Path
    from opsim.opdev.executor import AclOpExecutor
    ex = AclOpExecutor()
    ctx.take_actions()
    assert c_api.run(aclnn_add, None, 64, ex, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert not ex.alive and not [a for a in ctx.take_actions() if a[0] == 1]
    docs = (Path(__file__).parents[2] / "docs" / "fidelity.md").read_text()
    row = next(line for line in docs.splitlines() if "test_op_cache_replay_without_a_buffer" in line)
    assert "CommonOpExecutorRun" in row and "an op-cache replay without a buffer" not in row
