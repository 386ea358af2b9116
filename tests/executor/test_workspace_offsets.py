"""Executor workspace offsets (SetWorkspaceOffsets / GetWorkspaceOffsets) and the aclnnContiguous path that
records them for an individual-op executor (op_executor.cpp, aclnn_kernels/contiguous.cpp, UT
NnopContiguousExecutorCheckOffsetSuccess)."""
from __future__ import annotations

from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor, TensorList
from opsim.opdev.executor import AclOpExecutor
from opsim.ops.contiguous import (STRIDED_COPY, aclnn_contiguous, aclnn_contiguous_get_workspace_size,
                                  contiguous_input_addresses)

S = AclnnStatus
WS = 0x200000


def test_set_then_get(ctx):
    """UT NnopContiguousExecutorCheckOffsetSuccess: a new executor has none; {1, 2, 3} round-trips (a copy)."""
    ex = AclOpExecutor(ctx)
    assert ex.get_workspace_offsets() == []
    src = [1, 2, 3]
    ex.set_workspace_offsets(src)
    src.append(4)
    assert ex.get_workspace_offsets() == [1, 2, 3]


def transposed(rows, cols, address):
    return Tensor([cols, rows], strides=[1, cols], storage_shape=[rows * cols], address=address)


def test_contiguous_records_the_linear_offsets_of_the_converted_inputs(ctx):
    """Given a list with a contiguous tensor and two transposed views, when aclnnContiguous phase 1 runs, then
    the contiguous one is passed through (offset 0, no launcher), each view gets a strided-copy launcher writing a
    workspace tensor, the linear planner gives back-to-back slots, and the offsets are on the executor."""
    a = Tensor([4, 8], address=0x1000)
    b = transposed(4, 8, 0x2000)   # 32 float32 = 128 B -> slot of 512
    c = transposed(16, 64, 0x3000)  # 1024 float32 = 4096 B -> slot of 4608
    status, size, ex = aclnn_contiguous_get_workspace_size(TensorList([a, b, c]))
    assert status == S.ACLNN_SUCCESS
    assert [l.op_type_name for l in ex.kernel_launch_obj_list] == [STRIDED_COPY, STRIDED_COPY]
    assert ex.get_workspace_offsets() == [0, 0, 512] and size == 512 + 4608
    assert ex.op_exec_cache is None or not ex.op_exec_cache.valid  # AbandonCache(): never cached
    outs = [l.args.outputs()[0].value for l in ex.kernel_launch_obj_list]
    assert aclnn_contiguous(WS, size, ex, None) == S.ACLNN_SUCCESS
    addrs = contiguous_input_addresses(ex, WS)
    assert addrs[1:] == [o.data_address for o in outs] == [WS, WS + 512]


def test_null_list_is_param_nullptr(ctx):
    assert aclnn_contiguous_get_workspace_size(None)[0] == S.ACLNN_ERR_PARAM_NULLPTR
