"""Elementwise AI Core operators: Add, Mul, Abs, Relu, Cast (aclnnAdd, aclnnMul, aclnnAbs, aclnnRelu, aclnnCast)."""
from __future__ import annotations

import numpy as np

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Scalar, Tensor
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.kernel import AiCoreKernel, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_attr, op_input, op_output
from opsim.ops import _common as common
from opsim.ops._common import S

CAST_TYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16, DataType.DT_INT32, DataType.DT_INT64,
              DataType.DT_INT8, DataType.DT_UINT8, DataType.DT_BOOL)


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.elementwise
    return numerics


# ---- kernels (tiling + numerics) ------------------------------------------------------------------

def _binary_tiling(ins, outs, attrs):
    out = outs[0]
    return common.vector_tiling(common.aiv_num(), out.numel(), common.total_bytes(*ins, out))


def _add_compute(ins, outs, attrs, wss):
    alpha = float(attrs[0]) if attrs else 1.0
    _K().add(ins[0].numpy(), ins[1].numpy(), alpha, outs[0].numpy(), outs[0].dtype)


def _mul_compute(ins, outs, attrs, wss):
    _K().mul(ins[0].numpy(), ins[1].numpy(), outs[0].numpy(), outs[0].dtype)


def _unary_tiling(ins, outs, attrs):
    out = outs[0]
    return common.vector_tiling(common.aiv_num(), out.numel(), common.total_bytes(ins[0], out))


def _abs_compute(ins, outs, attrs, wss):
    _K().abs_(ins[0].numpy(), outs[0].numpy(), outs[0].dtype)


def _relu_compute(ins, outs, attrs, wss):
    _K().relu(ins[0].numpy(), outs[0].numpy(), outs[0].dtype)


def _cast_compute(ins, outs, attrs, wss):
    _K().cast(ins[0].numpy(), outs[0].numpy(), ins[0].dtype, outs[0].dtype)


register_aicore_kernel(AiCoreKernel("Add", _binary_tiling, _add_compute,
                                   declares_workspace=False, tiling_by_shape=True))
register_aicore_kernel(AiCoreKernel("Mul", _binary_tiling, _mul_compute,
                                   declares_workspace=False, tiling_by_shape=True))
register_aicore_kernel(AiCoreKernel("Abs", _unary_tiling, _abs_compute,
                                   declares_workspace=False, tiling_by_shape=True))
register_aicore_kernel(AiCoreKernel("Relu", _unary_tiling, _relu_compute,
                                   declares_workspace=False, tiling_by_shape=True))
register_aicore_kernel(AiCoreKernel("Cast", _unary_tiling, _cast_compute,
                                   declares_workspace=False, tiling_by_shape=True))


# ---- L0 -------------------------------------------------------------------------------------------

def add_l0(self: Tensor, other: Tensor, alpha: float, out: Tensor, executor) -> AclnnStatus:
    """l0op::Add (alpha carried as a float attribute: Axpy semantics when alpha != 1)."""
    with l0_dfx("Add", executor):
        return add_to_launcher_list_aicore("Add", executor, op_input(self, other), op_output(out),
                                           op_attr(np.float32(alpha)))


def mul_l0(self: Tensor, other: Tensor, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("Mul", executor):
        return add_to_launcher_list_aicore("Mul", executor, op_input(self, other), op_output(out))


def unary_l0(op: str, x: Tensor, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx(op, executor):
        return add_to_launcher_list_aicore(op, executor, op_input(x), op_output(out))


def cast_l0(x: Tensor, dtype: DataType, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("Cast", executor):
        return add_to_launcher_list_aicore("Cast", executor, op_input(x), op_output(out), op_attr(dtype))


# ---- L2 -------------------------------------------------------------------------------------------

def _scalar_value(alpha: Scalar | None) -> float:
    if alpha is None:
        return 1.0
    key = (alpha.raw, alpha.dtype)
    value = _SCALAR_VALUES.get(key)
    if value is None:
        value = float(alpha.value)
        if len(_SCALAR_VALUES) >= 4096:
            _SCALAR_VALUES.clear()
        _SCALAR_VALUES[key] = value
    return value


_SCALAR_VALUES: dict[tuple, float] = {}
"""A scalar's value as a float, by its raw bytes and dtype (what `Scalar.value` decodes)."""


def aclnn_add_get_workspace_size(self: Tensor, other: Tensor, alpha: Scalar, out: Tensor):
    """aclnnAddGetWorkspaceSize: out = self + alpha * other (broadcasting)."""
    api = "aclnnAdd"

    def check():
        return common.first_error(
            common.check_not_null(api, self=self, other=other, alpha=alpha, out=out) or
            common.check_dtype(api, "self", self, common.NUMERIC_TYPES) or common.check_same_dtype(api, self=self, other=other, out=out)
            or common.check_broadcast(api, self, other, out))

    return common.l2_phase_1(api, (self, other, alpha), (out,), check,
                        lambda ex: add_l0(self, other, _scalar_value(alpha), out, ex))


def aclnn_add(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnAdd", workspace, workspace_size, executor, stream)


def aclnn_mul_get_workspace_size(self: Tensor, other: Tensor, out: Tensor):
    """aclnnMulGetWorkspaceSize: out = self * other (broadcasting)."""
    api = "aclnnMul"

    def check():
        return (common.check_not_null(api, self=self, other=other, out=out) or
                common.check_dtype(api, "self", self, common.NUMERIC_TYPES) or
                common.check_same_dtype(api, self=self, other=other, out=out) or common.check_broadcast(api, self, other, out))

    return common.l2_phase_1(api, (self, other), (out,), check, lambda ex: mul_l0(self, other, out, ex))


def aclnn_mul(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnMul", workspace, workspace_size, executor, stream)


def _unary_l2(api: str, op: str, x: Tensor, out: Tensor):
    def check():
        return (common.check_not_null(api, self=x, out=out) or common.check_dtype(api, "self", x, common.NUMERIC_TYPES) or
                common.check_same_dtype(api, self=x, out=out) or common.check_shape(api, "out", out, x.view_shape))

    return common.l2_phase_1(api, (x,), (out,), check, lambda ex: unary_l0(op, x, out, ex))


def aclnn_abs_get_workspace_size(self: Tensor, out: Tensor):
    return _unary_l2("aclnnAbs", "Abs", self, out)


def aclnn_abs(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnAbs", workspace, workspace_size, executor, stream)


def aclnn_relu_get_workspace_size(self: Tensor, out: Tensor):
    return _unary_l2("aclnnRelu", "Relu", self, out)


def aclnn_relu(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnRelu", workspace, workspace_size, executor, stream)


def aclnn_cast_get_workspace_size(self: Tensor, dtype: DataType, out: Tensor):
    """aclnnCastGetWorkspaceSize: out = self converted to `dtype`."""
    api = "aclnnCast"

    def check():
        return (common.check_not_null(api, self=self, out=out) or common.check_dtype(api, "self", self, CAST_TYPES) or
                common.check_dtype(api, "out", out, CAST_TYPES) or common.check_shape(api, "out", out, self.view_shape) or
                (S.ACLNN_SUCCESS if out.dtype == dtype else _bad_cast(api, dtype, out)))

    return common.l2_phase_1(api, (self, DataType.parse(dtype)), (out,), check, lambda ex: cast_l0(self, dtype, out, ex))


def _bad_cast(api: str, dtype: DataType, out: Tensor) -> AclnnStatus:
    common.log.error("%s: out dtype %s differs from dtype %s (ACLNN_ERR_PARAM_INVALID)", api, out.dtype.name,
                DataType.parse(dtype).name)
    return S.ACLNN_ERR_PARAM_INVALID


def aclnn_cast(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnCast", workspace, workspace_size, executor, stream)
