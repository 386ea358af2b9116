"""ReduceSum on the AI Core (aclnnReduceSum): the tiling reports a workspace, which the framework appends."""
from __future__ import annotations

import math


from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import IntArray, Tensor
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.ops import _common as common
from opsim.ops._common import S


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.reduce
    return numerics


def normalize_axes(axes, ndim: int) -> tuple[int, ...] | None:
    out = []
    for a in axes:
        a = int(a)
        if a < -max(ndim, 1) or a >= max(ndim, 1):
            return None
        out.append(a % ndim if ndim else 0)
    return tuple(sorted(set(out)))


def reduced_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if not axes:
        axes = tuple(range(len(shape)))
    if keepdims:
        return tuple(1 if i in axes else d for i, d in enumerate(shape))
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def _reduce_tiling(ins, outs, attrs):
    x, out = ins[0], outs[0]
    n = x.numel()
    blocks = max(1, min(common.aiv_num(), math.ceil(n / common.ELEMENTS_PER_BLOCK)))
    # Cross-core partial sums: one float32 partial per block per output element, plus a 32-byte sync area.
    ws = blocks * max(out.numel(), 1) * 4 + 32 if blocks > 1 else 0
    return TilingResult(block_dim=blocks, workspace_sizes=[ws] if ws else [], tiling_data_size=96,
                        flops=float(n), bytes=float(common.total_bytes(x, out)), task_type="AI_VECTOR_CORE")


def _reduce_compute(ins, outs, attrs, wss):
    axes = tuple(int(a) for a in attrs[0]) if attrs and attrs[0] is not None else ()
    keepdims = bool(attrs[1]) if len(attrs) > 1 else False
    _K().reduce_sum(ins[0].numpy(), axes, keepdims, outs[0].numpy(), ins[0].dtype)


register_aicore_kernel(AiCoreKernel("ReduceSum", _reduce_tiling, _reduce_compute, tiling_by_shape=True))


def reduce_sum_l0(x: Tensor, axes: IntArray, keepdims: bool, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("ReduceSum", executor):
        return add_to_launcher_list_aicore("ReduceSum", executor, op_input(x), op_output(out), op_attr(axes, keepdims))


def aclnn_reduce_sum_get_workspace_size(self: Tensor, dim: IntArray, keepdim: bool, dtype: DataType, out: Tensor):
    """aclnnReduceSumGetWorkspaceSize: sum over `dim` (all dims when empty)."""
    api = "aclnnReduceSum"

    def check():
        st = common.check_not_null(api, self=self, dim=dim, out=out) or common.check_dtype(api, "self", self, common.NUMERIC_TYPES)
        if st:
            return st
        axes = normalize_axes(dim, len(self.view_shape))
        if axes is None:
            common.log.error("%s: dim %s out of range for %d dims (ACLNN_ERR_PARAM_INVALID)", api, list(dim),
                        len(self.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        return common.check_shape(api, "out", out, reduced_shape(self.view_shape, axes, keepdim)) or \
            common.check_same_dtype(api, self=self, out=out)

    def build(ex):
        axes = normalize_axes(dim, len(self.view_shape)) or tuple(range(len(self.view_shape)))
        return reduce_sum_l0(self, ex.alloc_int_array(axes), bool(keepdim), out, ex)

    return common.l2_phase_1(api, (self, dim, bool(keepdim), DataType.parse(dtype)), (out,), check, build)


def aclnn_reduce_sum(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnReduceSum", workspace, workspace_size, executor, stream)
