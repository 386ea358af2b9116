"""Softmax (aclnnSoftmax): the op allocates its own scratch and declares it with OP_WORKSPACE explicitly.

The explicit workspace wins over the framework's GetWorkspace path: no tiling in phase 1, tiling at launch,
and the kernel gets the declared tensor.
"""
from __future__ import annotations


from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_attr, op_input, op_output, op_workspace
from opsim.ops import _common as common
from opsim.ops._common import S


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.softmax
    return numerics


def _softmax_tiling(ins, outs, attrs):
    x = ins[0]
    n = x.numel()
    rows = n // max(x.view_shape[attrs[0]] if x.view_shape else 1, 1) if x.view_shape else 1
    blocks = max(1, min(common.aiv_num(), rows))
    return TilingResult(block_dim=blocks, workspace_sizes=[], tiling_data_size=128, flops=5.0 * n,
                        bytes=float(common.total_bytes(x, outs[0])), task_type="AI_VECTOR_CORE")


def _softmax_compute(ins, outs, attrs, wss):
    _K().softmax(ins[0].numpy(), int(attrs[0]), outs[0].numpy(), ins[0].dtype)


register_aicore_kernel(AiCoreKernel("SoftmaxV2", _softmax_tiling, _softmax_compute, tiling_by_shape=True))


def softmax_l0(x: Tensor, dim: int, out: Tensor, executor) -> AclnnStatus:
    """l0op::SoftmaxV2 with an explicit scratch: max and sum per row in float32."""
    rows = x.numel() // max(x.view_shape[dim], 1) if x.view_shape else 1
    scratch = executor.alloc_tensor([max(rows, 1) * 2], DataType.DT_FLOAT)
    if scratch is None:
        return S.ACLNN_ERR_INNER
    with l0_dfx("SoftmaxV2", executor):
        return add_to_launcher_list_aicore("SoftmaxV2", executor, op_input(x), op_output(out), op_attr(int(dim)),
                                           op_workspace(scratch))


def aclnn_softmax_get_workspace_size(self: Tensor, dim: int, out: Tensor):
    """aclnnSoftmaxGetWorkspaceSize: softmax along `dim`."""
    api = "aclnnSoftmax"

    def check():
        st = (common.check_not_null(api, self=self, out=out) or common.check_dtype(api, "self", self, common.FLOAT_TYPES) or
              common.check_same_dtype(api, self=self, out=out) or common.check_shape(api, "out", out, self.view_shape))
        if st:
            return st
        nd = max(len(self.view_shape), 1)
        if not -nd <= int(dim) < nd:
            common.log.error("%s: dim %d out of range for %d dims (ACLNN_ERR_PARAM_INVALID)", api, dim, nd)
            return S.ACLNN_ERR_PARAM_INVALID
        return S.ACLNN_SUCCESS

    def build(ex):
        d = int(dim) % max(len(self.view_shape), 1)
        return softmax_l0(self, d, out, ex)

    return common.l2_phase_1(api, (self, int(dim)), (out,), check, build)


def aclnn_softmax(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnSoftmax", workspace, workspace_size, executor, stream)


