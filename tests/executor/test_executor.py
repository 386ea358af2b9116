"""Two-phase executor: launch order, stop-on-failure, lifetimes, RepeatMode, workspace paths, bad input."""
from __future__ import annotations

import pytest

from opsim.acl import AclnnStatus as S, DataType, IntArray, Scalar, Tensor, TensorList
from opsim.opdev.executor import (common_op_executor_run, create_executor, destroy_executor, set_repeatable,
                                  set_tensor_addr)
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import OpArgDef, op_input, op_output, op_outshape
from opsim.opdev.op_def import RepeatMode
from opsim.ops.elementwise import aclnn_add, aclnn_add_get_workspace_size, aclnn_mul_get_workspace_size
from opsim.ops.matmul import aclnn_addmm_get_workspace_size
from opsim.ops.reduce import aclnn_reduce_sum_get_workspace_size
from opsim.ops.softmax import aclnn_softmax, aclnn_softmax_get_workspace_size

from .conftest import phases

launched: list[str] = []


def _tiling(ins, outs, attrs):
    return TilingResult(block_dim=2, workspace_sizes=[100], duration=5.0)


def _compute_named(name):
    def compute(ins, outs, attrs, wss):
        launched.append(name)
    return compute


for _n in ("TestA", "TestB", "TestC"):
    register_aicore_kernel(AiCoreKernel(_n, _tiling, _compute_named(_n)))


def _three_launcher_executor(ctx):
    ue = create_executor("aclnnTest")
    ex = ue.get()
    x = Tensor([4])
    t1, t2 = ex.alloc_tensor([4]), ex.alloc_tensor([4])
    out = Tensor([4])
    statuses = [add_to_launcher_list_aicore("TestA", ex, op_input(x), op_output(t1)),
                add_to_launcher_list_aicore("TestB", ex, op_input(t1), op_output(t2)),
                add_to_launcher_list_aicore("TestC", ex, op_input(t2), op_output(out))]
    assert statuses == [S.ACLNN_SUCCESS] * 3
    size = ex.get_workspace_size()
    return ue.release_to(), size


def test_launch_order_is_registration_order(ctx):
    ex, size = _three_launcher_executor(ctx)
    names = [l.op_type_name for l in ex.kernel_launch_obj_list]
    assert names == ["TestA", "TestB", "TestC"]
    assert [n.original_id for n in ex.graph.nodes] == [0, 1, 2]
    order = []
    for l in ex.kernel_launch_obj_list:
        orig = l.launch
        l.launch = (lambda o=orig, n=l.op_type_name: (order.append(n), o())[1])
    assert common_op_executor_run(0x1000, size, ex, None) == S.ACLNN_SUCCESS
    assert order == ["TestA", "TestB", "TestC"]


def test_stop_on_first_failure_and_release_after_failed_run(ctx, process):
    ex, size = _three_launcher_executor(ctx)
    launchers = list(ex.kernel_launch_obj_list)
    process.faults["rt.launch_kernel"] = lambda name: name == "TestB"
    order = []
    for l in launchers:
        orig = l.launch
        l.launch = (lambda o=orig, n=l.op_type_name: (order.append(n), o())[1])
    status = common_op_executor_run(0x1000, size, ex, None)
    assert status == S.ACLNN_ERR_RUNTIME_ERROR
    assert order == ["TestA", "TestB"]  # TestC never launched
    assert not ex.alive  # non-repeatable executor freed after the failed run
    assert all(l.args.destroy_count == 1 for l in launchers)


def test_non_repeatable_executor_freed_after_successful_run(ctx):
    ex, size = _three_launcher_executor(ctx)
    assert common_op_executor_run(0x1000, size, ex, None) == S.ACLNN_SUCCESS
    assert not ex.alive


def test_workspace_planned_with_tiling_sizes(ctx):
    ex, size = _three_launcher_executor(ctx)
    # Each node: one 100-byte tiling workspace (512 after Align) + intermediate outputs t1 (0..1), t2 (1..2).
    # Buckets: w0 {512}, t1 {512}, w1 reuses w0 (0 < 1), t2: B0 last w1[1,1] not < 1, B1 t1[0,1] not < 1 -> new,
    # w2 [2,2]: B0 (w1 end 1 < 2) and B1 (t1 end 1 < 2) reusable, last wins -> B1. Total 3 x 512.
    assert size == 1536


def test_null_workspace_with_nonzero_size_rejected_and_freed(ctx):
    ex, size = _three_launcher_executor(ctx)
    assert size > 0
    launchers = list(ex.kernel_launch_obj_list)
    assert common_op_executor_run(0, size, ex, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert not ex.alive
    assert all(l.args.destroy_count == 1 for l in launchers)


def test_null_executor(ctx):
    assert common_op_executor_run(0, 0, None, None) == S.ACLNN_ERR_PARAM_NULLPTR
    assert set_repeatable(None) == S.ACLNN_ERR_INNER_NULLPTR
    assert destroy_executor(None) == S.ACLNN_ERR_INNER_NULLPTR


def test_explicit_workspace_path_has_no_phase1_tiling(ctx):
    x, out = Tensor([8, 16]), Tensor([8, 16])
    phases(ctx)
    st, size, ex = aclnn_softmax_get_workspace_size(x, -1, out)
    assert st == S.ACLNN_SUCCESS
    assert "tiling" not in phases(ctx)
    launcher = ex.kernel_launch_obj_list[0]
    ws = launcher.args.get_op_arg(OpArgDef.OP_WORKSPACE_ARG)
    assert ws.count == 1 and ws.args[0].value is not None  # the op's own scratch tensor, not a list
    assert size == 512  # 8 rows x 2 floats = 64 bytes -> Align 512
    assert aclnn_softmax(0x2000, size, ex, None) == S.ACLNN_SUCCESS
    assert "tiling" in phases(ctx)  # tiling happens at launch on the explicit path


def test_tiling_workspace_path_appends_sizes(ctx):
    x, out = Tensor([64, 8192]), Tensor([64])
    phases(ctx)
    st, size, ex = aclnn_reduce_sum_get_workspace_size(x, IntArray([1]), False, DataType.DT_FLOAT, out)
    assert st == S.ACLNN_SUCCESS
    assert "tiling" in phases(ctx)
    ws = ex.kernel_launch_obj_list[0].args.get_op_arg(OpArgDef.OP_WORKSPACE_ARG)
    assert ws.count == 1
    lst = ws.args[0].value
    assert isinstance(lst, TensorList) and len(lst) == 1
    assert lst[0].dtype == DataType.DT_UINT8 and lst[0].storage.from_workspace


def test_no_workspace_declared_appends_null_entry(ctx):
    a, b, out = Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    args = ex.kernel_launch_obj_list[0].args
    assert args.contains_op_arg_type(OpArgDef.OP_WORKSPACE_ARG)
    assert args.workspaces()[0].value is None
    assert size == 0


def test_outshape_forces_unrepeatable(ctx):
    ue = create_executor("aclnnX")
    ex = ue.get()
    shape_t = Tensor([9], DataType.DT_INT64)
    add_to_launcher_list_aicore("TestA", ex, op_input(Tensor([4])), op_output(Tensor([4])), op_outshape(shape_t, 0))
    assert ex.repeat_mode == RepeatMode.UNREPEATABLE
    assert ex.op_exec_cache is None or not ex.op_exec_cache.valid
    ue.close()


def test_repeat_mode_state_machine(ctx):
    a, b, out = Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert ex.repeat_mode == RepeatMode.DEFAULT
    ex.abandon_cache()  # no replay, repeat still allowed
    assert ex.repeat_mode == RepeatMode.DEFAULT
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    assert ex.repeat_mode == RepeatMode.REPEAT and ex.is_repeatable()
    assert set_repeatable(ex) == S.ACLNN_SUCCESS  # may be called again
    ex.abandon_cache(True)
    assert ex.repeat_mode == RepeatMode.UNREPEATABLE
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER  # sticky
    assert destroy_executor(ex) == S.ACLNN_SUCCESS
    assert not ex.alive


def test_abandon_true_before_set_repeatable_fails(ctx):
    a, b, out = Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    ex.abandon_cache(True)
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER
    assert not ex.is_repeatable()


def test_repeatable_checker_rejects_foreign_device_tensor(ctx):
    a, b, out = Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    # Another L2 phase 1 on this thread replaces the TLS storage list: SetRepeatable captures the wrong call.
    aclnn_mul_get_workspace_size(Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3]))
    assert set_repeatable(ex) == S.ACLNN_ERR_INNER
    assert ex.check_launcher_repeatable() is False


def test_repeatable_executor_survives_runs_until_destroyed(ctx):
    a, b, out = Tensor([2, 3]), Tensor([2, 3]), Tensor([2, 3])
    st, size, ex = aclnn_add_get_workspace_size(a, b, Scalar(1.0), out)
    assert set_repeatable(ex) == S.ACLNN_SUCCESS
    for addr in (0x1000, 0x2000, 0x3000):
        assert set_tensor_addr(ex, out, addr) == S.ACLNN_SUCCESS
        assert aclnn_add(0, size, ex, None) == S.ACLNN_SUCCESS
        assert ex.alive
    destroy_executor(ex)
    assert not ex.alive


def test_set_tensor_addr_null_codes(ctx):
    t = Tensor([1])
    assert set_tensor_addr(object(), None, 1) == S.ACLNN_ERR_INNER_NULLPTR
    assert set_tensor_addr(None, t, 0x40) == S.ACLNN_ERR_INNER_NULLPTR
    assert t.storage_address == 0x40  # written before the executor check


def test_phase1_error_path_frees_executor(ctx, process):
    process.faults["executor.alloc_tensor"] = lambda shape: True
    st, size, ex = aclnn_addmm_get_workspace_size(Tensor([16]), Tensor([4, 8]), Tensor([8, 16]), Scalar(1.0),
                                                  Scalar(1.0), Tensor([4, 16]))
    assert st == S.ACLNN_ERR_INNER and ex is None


def test_create_executor_failure_code(ctx, process):
    process.faults["create_executor"] = lambda api: True
    st, size, ex = aclnn_add_get_workspace_size(Tensor([2]), Tensor([2]), Scalar(1.0), Tensor([2]))
    assert st == S.ACLNN_ERR_INNER_CREATE_EXECUTOR


@pytest.mark.parametrize("call, code", [
    (lambda: aclnn_add_get_workspace_size(None, Tensor([2]), Scalar(1.0), Tensor([2])), S.ACLNN_ERR_PARAM_NULLPTR),
    (lambda: aclnn_add_get_workspace_size(Tensor([2]), Tensor([3]), Scalar(1.0), Tensor([2])),
     S.ACLNN_ERR_PARAM_INVALID),
    (lambda: aclnn_add_get_workspace_size(Tensor([2]), Tensor([2], "int32"), Scalar(1.0), Tensor([2])),
     S.ACLNN_ERR_PARAM_INVALID),
    (lambda: aclnn_add_get_workspace_size(Tensor([2], "bool"), Tensor([2], "bool"), Scalar(1.0),
                                          Tensor([2], "bool")), S.ACLNN_ERR_PARAM_INVALID),
    (lambda: aclnn_addmm_get_workspace_size(Tensor([16]), Tensor([4, 8]), Tensor([7, 16]), Scalar(1.0), Scalar(1.0),
                                            Tensor([4, 16])), S.ACLNN_ERR_PARAM_INVALID),
    (lambda: aclnn_softmax_get_workspace_size(Tensor([2, 3]), 5, Tensor([2, 3])), S.ACLNN_ERR_PARAM_INVALID),
])
def test_bad_input_codes_and_log(ctx, call, code, caplog):
    with caplog.at_level("ERROR"):
        st, size, ex = call()
    assert st == code and ex is None
    assert any(w in caplog.text for w in ("self", "other", "mat", "dim", "out"))


def test_workspace_smaller_than_planned_runs_as_opbase_but_is_reported(ctx, process, caplog):
    ex, size = _three_launcher_executor(ctx)
    with caplog.at_level("WARNING"):
        assert common_op_executor_run(0x1000, size - 512, ex, None) == S.ACLNN_SUCCESS
    assert any("planned 1536 bytes" in w for w in process.warnings)
    assert "workspace" in caplog.text and not ex.alive
