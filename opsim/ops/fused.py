"""Fused operators registered through DirectInvoke (aclnnAddRmsNorm, aclnnFusedBiasRelu).

They are written the way a producer writes DirectInvoke code: the L2 two-phase API checks parameters and calls
an L0 function; the L0 function opens its L0_DFX scope, builds the OpArgContext and calls AddDirectInvokeTask
with three callbacks. Prepare picks the implementation and the workspace from the arguments only (equivalent
arguments, equivalent preparation); launch reads every address from the arguments on every run and submits
its own device dispatches on the run's stream; destroy releases the launch state.

- AddRmsNorm (stateful): x = x1 + x2 (rounded to the dtype), rstd = 1 / sqrt(mean(x^2) + eps) over gamma's
  dims, y = x * rstd * gamma. Prepare selects "single-pass" (a row fits the vector core's buffer: one float32
  sum of squares per row handed from the first dispatch to the second) or "two-pass" (long rows split into
  chunks: per-chunk partial sums plus cross-core sync flags). Launch submits two dispatches: add + reduce, then
  normalize. The partial sums live in the planned workspace on the device; the numerics of the second pass
  recompute them from x, so only the outputs carry values.
- FusedBiasRelu (stateless: null launch state, no workspace): out = relu(self + bias), one dispatch whose
  cost is computed from the arguments at each launch.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor
from opsim.opdev import rt
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.direct_invoke import DirectInvokeWorkspaceRequest, add_direct_invoke_task
from opsim.opdev.op_args import OpArgContext, make_op_arg_context, op_attr, op_input, op_output
from opsim.opdev.op_types import register_op_type
from opsim.opdev.thread_local import current
from opsim.ops import _common as common
from opsim.ops._common import S

#: longest row (bytes of the input dtype) the single-pass kernel keeps on chip next to its float32 copy; longer
#: rows use the two-pass kernel (assumed)
SINGLE_PASS_MAX_ROW_BYTES = 32 * 1024
#: columns per chunk of the two-pass kernel (assumed)
CHUNK_COLS = 8192
#: bytes of cross-core sync flags per block of the two-pass kernel (one 32-byte block, assumed)
SYNC_BYTES_PER_BLOCK = 32
ADD_REDUCE = "AddRmsNormAddReduce"
NORMALIZE = "AddRmsNormNormalize"
BIAS_RELU = "FusedBiasRelu"


def _K():
    from opsim.kernels import numerics  # lazy: keeps Numba out of importing opsim.ops.fused
    return numerics


def _all_bound(*tensors: Tensor) -> bool:
    return all(t.has_data() for t in tensors)


# ---- AddRmsNorm ---------------------------------------------------------------------------------------

@dataclass
class AddRmsNormPlan:
    """The launch state: what prepare decided. Address independent; it owns the requested workspace sizes."""

    impl: str
    rows: int
    cols: int
    chunks: int
    block_dim: int
    workspace_sizes: tuple[int, ...]
    add_reduce_us: float
    normalize_us: float
    alive: bool = True


def add_rms_norm_shapes(x_shape: list[int] | tuple[int, ...], norm_dims: int = 1) -> dict[str, list[int]]:
    """Argument shapes of aclnnAddRmsNorm for an input shape normalised over its last `norm_dims` dims."""
    x = list(x_shape)
    lead = x[:len(x) - norm_dims]
    return {"x1": x, "x2": x, "gamma": x[len(x) - norm_dims:], "y": x, "rstd": lead + [1] * norm_dims, "x": x}


def select_add_rms_norm(rows: int, cols: int, dtype: DataType, block_dim: int) -> tuple[str, int, tuple[int, ...]]:
    """Implementation, chunk count and workspace sizes for a [rows, cols] normalisation."""
    if cols * dtype.itemsize <= SINGLE_PASS_MAX_ROW_BYTES:
        return "single-pass", 1, (rows * 4,)
    chunks = math.ceil(cols / CHUNK_COLS)
    return "two-pass", chunks, (rows * chunks * 4, block_dim * SYNC_BYTES_PER_BLOCK)


def _add_rms_norm_prepare(args: OpArgContext, request: DirectInvokeWorkspaceRequest) -> tuple[AclnnStatus, Any]:
    x1, _x2, gamma = (a.value for a in args.inputs())
    dtype = x1.dtype
    cols = gamma.numel()
    rows = x1.numel() // cols
    block_dim = max(1, min(common.aiv_num(), rows))
    impl, chunks, sizes = select_add_rms_norm(rows, cols, dtype, block_dim)
    cost = current().process.cost
    n = rows * cols
    item = dtype.itemsize
    ws = sum(sizes)
    passes = 1 if impl == "single-pass" else 2  # the two-pass kernel reads x again per chunk group
    add_reduce = cost.kernel(ADD_REDUCE, "AI_VECTOR_CORE", 3.0 * n, 3.0 * n * item + ws, block_dim)
    normalize = cost.kernel(NORMALIZE, "AI_VECTOR_CORE", 3.0 * n,
                            (passes + 1) * n * item + cols * item + rows * 4 + ws, block_dim)
    plan = AddRmsNormPlan(impl, rows, cols, chunks, block_dim, sizes, add_reduce, normalize)
    request.sizes = plan.workspace_sizes
    request.count = len(plan.workspace_sizes)
    return S.ACLNN_SUCCESS, plan


def _add_rms_norm_launch(plan: AddRmsNormPlan, args: OpArgContext, stream: Any) -> AclnnStatus:
    if plan is None or not plan.alive:
        return S.ACLNN_ERR_INNER
    ctx = current()
    x1, x2, gamma = (a.value for a in args.inputs())
    y, rstd, x_out = (a.value for a in args.outputs())
    workspaces = args.workspaces()[0].value.tensors
    if len(workspaces) != len(plan.workspace_sizes):
        return S.ACLNN_ERR_INNER
    numerics = ctx.process.numerics and _all_bound(x1, x2, gamma, y, rstd, x_out)
    if rt.fault_status(ctx, "rt.launch_kernel", ADD_REDUCE) != S.ACLNN_SUCCESS:
        return S.ACLNN_ERR_RUNTIME_ERROR
    if numerics:
        _K().add(x1.numpy(), x2.numpy(), 1, x_out.numpy(), x1.dtype)
    rt.submit_kernel(ctx, stream, ADD_REDUCE, "AI_VECTOR_CORE", plan.block_dim, plan.add_reduce_us)
    if rt.fault_status(ctx, "rt.launch_kernel", NORMALIZE) != S.ACLNN_SUCCESS:
        return S.ACLNN_ERR_RUNTIME_ERROR
    if numerics:
        epsilon = float(args.attrs()[0].value)
        _K().rms_norm(x_out.numpy(), gamma.numpy(), epsilon, y.numpy(), rstd.numpy(), x1.dtype, gamma.dtype)
    rt.submit_kernel(ctx, stream, NORMALIZE, "AI_VECTOR_CORE", plan.block_dim, plan.normalize_us)
    return S.ACLNN_SUCCESS


_add_rms_norm_launch.state_only = True  # type: ignore[attr-defined]
"""With numerics off, what the launch submits depends on its launch state alone (and the length of its
workspace list), not on the argument descriptors: a phase-2 template need not check them."""


def _add_rms_norm_destroy(plan: AddRmsNormPlan) -> None:
    plan.alive = False
    plan.workspace_sizes = ()


def add_rms_norm_l0(x1: Tensor, x2: Tensor, gamma: Tensor, epsilon: float, y: Tensor, rstd: Tensor, x_out: Tensor,
                    executor) -> AclnnStatus:
    """l0op::AddRmsNorm as a DirectInvoke task."""
    with l0_dfx("AddRmsNorm", executor):
        current().charge("add io and attr", "AddRmsNorm")
        args = make_op_arg_context(op_input(x1, x2, gamma), op_output(y, rstd, x_out), op_attr(float(epsilon)))
        return add_direct_invoke_task("AddRmsNorm", register_op_type("AddRmsNorm"), _add_rms_norm_prepare,
                                      _add_rms_norm_launch, _add_rms_norm_destroy, executor, args)


def _check_add_rms_norm(api: str, x1, x2, gamma, y, rstd, x_out) -> AclnnStatus:
    st = (common.check_not_null(api, x1=x1, x2=x2, gamma=gamma, yOut=y, rstdOut=rstd, xOut=x_out)
          or common.check_dtype(api, "x1", x1, common.FLOAT_TYPES)
          or common.check_same_dtype(api, x1=x1, x2=x2, gamma=gamma, yOut=y, xOut=x_out)
          or common.check_dtype(api, "rstdOut", rstd, (DataType.DT_FLOAT,)))
    if st:
        return st
    shape = list(x1.view_shape)
    g = len(gamma.view_shape)
    if not 1 <= g <= len(shape) or list(gamma.view_shape) != shape[len(shape) - g:]:
        common.log.error("%s: gamma shape %s must equal the last dims of x1 shape %s (ACLNN_ERR_PARAM_INVALID)", api,
                    list(gamma.view_shape), shape)
        return S.ACLNN_ERR_PARAM_INVALID
    expected = add_rms_norm_shapes(shape, g)
    return (common.check_shape(api, "x2", x2, expected["x2"]) or common.check_shape(api, "yOut", y, expected["y"])
            or common.check_shape(api, "xOut", x_out, expected["x"]) or common.check_shape(api, "rstdOut", rstd, expected["rstd"])
            or S.ACLNN_SUCCESS)


def aclnn_add_rms_norm_get_workspace_size(x1: Tensor, x2: Tensor, gamma: Tensor, epsilon: float, y_out: Tensor,
                                          rstd_out: Tensor, x_out: Tensor):
    """aclnnAddRmsNormGetWorkspaceSize: x = x1 + x2, y = RmsNorm(x) * gamma, rstd per row."""
    api = "aclnnAddRmsNorm"

    def build(ex):
        if x1.is_empty():
            return S.ACLNN_SUCCESS
        return add_rms_norm_l0(x1, x2, gamma, epsilon, y_out, rstd_out, x_out, ex)

    return common.l2_phase_1(api, (x1, x2, gamma, float(epsilon)), (y_out, rstd_out, x_out),
                        lambda: _check_add_rms_norm(api, x1, x2, gamma, y_out, rstd_out, x_out), build)


def aclnn_add_rms_norm(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnAddRmsNorm", workspace, workspace_size, executor, stream)


# ---- FusedBiasRelu (stateless) -------------------------------------------------------------------------

def _bias_relu_prepare(args: OpArgContext, request: DirectInvokeWorkspaceRequest) -> tuple[AclnnStatus, Any]:
    """Nothing to decide ahead of time: no workspace, no state."""
    return S.ACLNN_SUCCESS, None


def _bias_relu_launch(state: None, args: OpArgContext, stream: Any) -> AclnnStatus:
    ctx = current()
    x, bias = (a.value for a in args.inputs())
    (out,) = (a.value for a in args.outputs())
    n = out.numel()
    block_dim = max(1, min(common.aiv_num(), math.ceil(n / common.ELEMENTS_PER_BLOCK)))
    duration = ctx.process.cost.kernel(BIAS_RELU, "AI_VECTOR_CORE", 2.0 * n, float(common.total_bytes(x, bias, out)),
                                       block_dim)
    if rt.fault_status(ctx, "rt.launch_kernel", BIAS_RELU) != S.ACLNN_SUCCESS:
        return S.ACLNN_ERR_RUNTIME_ERROR
    if ctx.process.numerics and _all_bound(x, bias, out):
        K = _K()
        K.add(x.numpy(), bias.numpy(), 1, out.numpy(), out.dtype)
        K.relu(out.numpy(), out.numpy(), out.dtype)
    rt.submit_kernel(ctx, stream, BIAS_RELU, "AI_VECTOR_CORE", block_dim, duration)
    return S.ACLNN_SUCCESS


def _bias_relu_destroy(state: Any) -> None:
    """Required by the contract, never called: the task has no launch state."""


def fused_bias_relu_l0(x: Tensor, bias: Tensor, out: Tensor, executor) -> AclnnStatus:
    with l0_dfx("FusedBiasRelu", executor):
        current().charge("add io and attr", "FusedBiasRelu")
        args = make_op_arg_context(op_input(x, bias), op_output(out))
        return add_direct_invoke_task("FusedBiasRelu", register_op_type("FusedBiasRelu"), _bias_relu_prepare,
                                      _bias_relu_launch, _bias_relu_destroy, executor, args)


def aclnn_fused_bias_relu_get_workspace_size(self: Tensor, bias: Tensor, out: Tensor):
    """aclnnFusedBiasReluGetWorkspaceSize: out = relu(self + bias), bias broadcast over self's last dim."""
    api = "aclnnFusedBiasRelu"

    def check():
        st = (common.check_not_null(api, self=self, bias=bias, out=out) or common.check_dtype(api, "self", self, common.FLOAT_TYPES)
              or common.check_same_dtype(api, self=self, bias=bias, out=out))
        if st:
            return st
        last = list(self.view_shape[-1:])
        return common.check_shape(api, "bias", bias, last) or common.check_shape(api, "out", out, self.view_shape) \
            or S.ACLNN_SUCCESS

    def build(ex):
        if self.is_empty():
            return S.ACLNN_SUCCESS
        return fused_bias_relu_l0(self, bias, out, ex)

    return common.l2_phase_1(api, (self, bias), (out,), check, build)


def aclnn_fused_bias_relu(workspace: int, workspace_size: int, executor, stream) -> AclnnStatus:
    return common.l2_phase_2("aclnnFusedBiasRelu", workspace, workspace_size, executor, stream)


# ---- catalogue entries for the scenario layer (opsim.ops.registry.OpSpec fields) -----------------------------

def _infer_add_rms_norm(shapes: list[tuple[int, ...]], attrs: Mapping[str, Any]) -> list[tuple[int, ...]] | str:
    x1, x2, gamma = (tuple(s) for s in shapes)
    if x2 != x1:
        return f"x2 shape {list(x2)} must equal x1 shape {list(x1)}"
    g = len(gamma)
    if not 1 <= g <= len(x1) or x1[len(x1) - g:] != gamma:
        return f"gamma shape {list(gamma)} must equal the last dims of x1 shape {list(x1)}"
    shapes_out = add_rms_norm_shapes(x1, g)
    return [tuple(shapes_out["y"]), tuple(shapes_out["rstd"]), tuple(shapes_out["x"])]


def _build_add_rms_norm(make, ins, dtype, attrs, out_shapes) -> tuple:
    y = make(out_shapes[0], dtype, "output")
    rstd = make(out_shapes[1], DataType.DT_FLOAT, "output")
    x_out = make(out_shapes[2], dtype, "output")
    return (ins[0], ins[1], ins[2], float(attrs["epsilon"]), y, rstd, x_out)


def _infer_bias_relu(shapes: list[tuple[int, ...]], attrs: Mapping[str, Any]) -> list[tuple[int, ...]] | str:
    x, bias = (tuple(s) for s in shapes)
    if not x or bias != x[-1:]:
        return f"bias shape {list(bias)} must be [{x[-1] if x else '?'}] (the last dim of self {list(x)})"
    return [x]


def _build_bias_relu(make, ins, dtype, attrs, out_shapes) -> tuple:
    return (ins[0], ins[1], make(out_shapes[0], dtype, "output"))


_FLOAT_NAMES = ("float", "float16", "bf16")

DIRECT_INVOKE_OPS: dict[str, dict[str, Any]] = {
    "AddRmsNorm": {
        "api": "aclnnAddRmsNorm", "launchers": ("DIRECT_INVOKE",), "dtypes": _FLOAT_NAMES,
        "inputs": ("x1", "x2", "gamma"), "attrs": {"epsilon": 1e-6}, "attr_types": {"epsilon": (int, float)},
        "infer": _infer_add_rms_norm, "build": _build_add_rms_norm,
        "get_workspace_size": aclnn_add_rms_norm_get_workspace_size, "run": aclnn_add_rms_norm,
        "description": "x = x1 + x2, y = x * rstd * gamma (rstd float32 per row); a DirectInvoke task with a "
                       "planned workspace and two dispatches (add + reduce, normalize)",
    },
    "FusedBiasRelu": {
        "api": "aclnnFusedBiasRelu", "launchers": ("DIRECT_INVOKE",), "dtypes": _FLOAT_NAMES,
        "inputs": ("self", "bias"), "attrs": {}, "infer": _infer_bias_relu, "build": _build_bias_relu,
        "get_workspace_size": aclnn_fused_bias_relu_get_workspace_size, "run": aclnn_fused_bias_relu,
        "description": "out = relu(self + bias); a stateless DirectInvoke task (null state, no workspace, "
                       "one dispatch)",
    },
}
"""Scenario op name -> OpSpec fields (see opsim.ops.registry): API, launcher kind, dtypes, shape rule, builder."""
