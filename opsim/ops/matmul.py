"""MatMul (aclnnMatmul), Muls, and the composite Addmm (aclnnAddmm = MatMul, Muls, Muls, Add).

Addmm's intermediates come from the executor's workspace; MatMul's result dies after the first Muls, so the
planner puts beta*self in the same bucket (lifetime reuse).
"""
from __future__ import annotations

import math

import numpy as np

from opsim.acl.dtypes import from_compute
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.kernel import AiCoreKernel, TilingResult, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.ops import _common as common
from opsim.ops._common import S
from opsim.ops.elementwise import add_l0

CUBE_TILE = 128  # output tile edge one cube core computes per block (assumed)


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.matmul
    return numerics


def _matmul_tiling(ins, outs, attrs):
    a, b, out = ins[0], ins[1], outs[0]
    m, n = out.view_shape[-2], out.view_shape[-1]
    k = a.view_shape[-1] if not (attrs and attrs[0]) else a.view_shape[-2]
    batch = out.numel() // max(m * n, 1) if m * n else 0
    tiles = max(1, batch * math.ceil(m / CUBE_TILE) * math.ceil(n / CUBE_TILE))
    return TilingResult(block_dim=max(1, min(common.aic_num(), tiles)), workspace_sizes=[], tiling_data_size=256,
                        flops=2.0 * batch * m * n * k, bytes=float(common.total_bytes(a, b, out)), task_type="AI_CORE")


def _matmul_compute(ins, outs, attrs, wss):
    ta = bool(attrs[0]) if attrs else False
    tb = bool(attrs[1]) if len(attrs) > 1 else False
    _K().matmul(ins[0].numpy(), ins[1].numpy(), outs[0].numpy(), outs[0].dtype, ta, tb)


def _muls_tiling(ins, outs, attrs):
    return common.vector_tiling(common.aiv_num(), outs[0].numel(), common.total_bytes(ins[0], outs[0]))


def _muls_compute(ins, outs, attrs, wss):
    """Muls: out = x * value, x broadcast to out's shape (Addmm scales a bias row this way)."""
    out = outs[0].numpy()
    scalar = from_compute(np.array(float(attrs[0]), dtype=np.float32), outs[0].dtype)
    _K().mul(np.broadcast_to(ins[0].numpy(), out.shape), scalar, out, outs[0].dtype)


register_aicore_kernel(AiCoreKernel("MatMulV2", _matmul_tiling, _matmul_compute,
                                   declares_workspace=False, tiling_by_shape=True))
register_aicore_kernel(AiCoreKernel("Muls", _muls_tiling, _muls_compute,
                                   declares_workspace=False, tiling_by_shape=True))


def matmul_shape(a, b, trans_a: bool = False, trans_b: bool = False) -> tuple[int, ...] | None:
    if len(a) != 2 or len(b) != 2:
        return None
    m, k = (a[1], a[0]) if trans_a else (a[0], a[1])
    k2, n = (b[1], b[0]) if trans_b else (b[0], b[1])
    return (m, n) if k == k2 else None


def matmul_l0(a: Tensor, b: Tensor, out: Tensor, executor, trans_a: bool = False, trans_b: bool = False):
    with l0_dfx("MatMulV2", executor):
        return add_to_launcher_list_aicore("MatMulV2", executor, op_input(a, b), op_output(out),
                                           op_attr(bool(trans_a), bool(trans_b)))


def muls_l0(x: Tensor, value: float, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("Muls", executor):
        return add_to_launcher_list_aicore("Muls", executor, op_input(x), op_output(out), op_attr(np.float32(value)))


def aclnn_matmul_get_workspace_size(self: Tensor, mat2: Tensor, out: Tensor, cube_math_type: int = 0):
    """aclnnMatmulGetWorkspaceSize for 2-D operands."""
    api = "aclnnMatmul"

    def check():
        st = (common.check_not_null(api, self=self, mat2=mat2, out=out) or
              common.check_dtype(api, "self", self, common.FLOAT_TYPES) or common.check_same_dtype(api, self=self, mat2=mat2, out=out))
        if st:
            return st
        shape = matmul_shape(self.view_shape, mat2.view_shape)
        if shape is None:
            common.log.error("%s: self %s and mat2 %s are not 2-D with matching inner dims (ACLNN_ERR_PARAM_INVALID)", api,
                        list(self.view_shape), list(mat2.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        return common.check_shape(api, "out", out, shape)

    return common.l2_phase_1(api, (self, mat2, np.int8(cube_math_type)), (out,), check,
                        lambda ex: matmul_l0(self, mat2, out, ex))


def aclnn_matmul(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnMatmul", workspace, workspace_size, executor, stream)


def aclnn_addmm_get_workspace_size(self: Tensor, mat1: Tensor, mat2: Tensor, beta: Scalar, alpha: Scalar,
                                   out: Tensor, cube_math_type: int = 0):
    """aclnnAddmmGetWorkspaceSize: out = beta * self + alpha * (mat1 @ mat2), self broadcast to [m, n]."""
    api = "aclnnAddmm"

    def check():
        st = (common.check_not_null(api, self=self, mat1=mat1, mat2=mat2, beta=beta, alpha=alpha, out=out) or
              common.check_dtype(api, "mat1", mat1, common.FLOAT_TYPES) or
              common.check_same_dtype(api, self=self, mat1=mat1, mat2=mat2, out=out))
        if st:
            return st
        shape = matmul_shape(mat1.view_shape, mat2.view_shape)
        if shape is None:
            common.log.error("%s: mat1 %s and mat2 %s are not 2-D with matching inner dims (ACLNN_ERR_PARAM_INVALID)", api,
                        list(mat1.view_shape), list(mat2.view_shape))
            return S.ACLNN_ERR_PARAM_INVALID
        if common.broadcast_shape(self.view_shape, shape) != tuple(shape):
            common.log.error("%s: self %s does not broadcast to %s (ACLNN_ERR_PARAM_INVALID)", api, list(self.view_shape),
                        list(shape))
            return S.ACLNN_ERR_PARAM_INVALID
        return common.check_shape(api, "out", out, shape)

    def build(ex):
        shape = list(out.view_shape)
        mm = ex.alloc_tensor(shape, out.dtype)
        scaled = ex.alloc_tensor(shape, out.dtype)
        beta_self = ex.alloc_tensor(shape, out.dtype)
        if mm is None or scaled is None or beta_self is None:
            return S.ACLNN_ERR_INNER
        return (matmul_l0(mat1, mat2, mm, ex) or muls_l0(mm, float(alpha.value), scaled, ex) or
                muls_l0(self, float(beta.value), beta_self, ex) or add_l0(beta_self, scaled, 1.0, out, ex))

    return common.l2_phase_1(api, (self, mat1, mat2, beta, alpha, np.int8(cube_math_type)), (out,), check, build)


def aclnn_addmm(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnAddmm", workspace, workspace_size, executor, stream)
