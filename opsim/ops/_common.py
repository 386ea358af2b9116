"""What every operator shares: the L2 two-phase skeleton, parameter checks, shape inference, tiling helpers.

Operators are written the way opbase operator code is: an L2 `aclnn_xxx_get_workspace_size` (phase 1: DFX
and cache lookup, parameter checks, CREATE_EXECUTOR, L0 calls that register launchers, GetWorkspaceSize,
ReleaseTo) and `aclnn_xxx` (phase 2: CommonOpExecutorRun).
"""
from __future__ import annotations

import logging
import math
from typing import Any, Callable, Iterable, Sequence

from opsim.acl.dtypes import DataType
from opsim.acl.status import AclnnStatus
from opsim.acl.tensor import Tensor, broadcast_shapes as broadcast_shape
from opsim.opdev.executor import AclOpExecutor, common_op_executor_run, create_executor
from opsim.opdev.kernel import TilingResult
from opsim.opdev.op_exec_cache import l2_dfx_phase_1, l2_dfx_phase_2, l2_dfx_phase_end
from opsim.opdev.thread_local import current

log = logging.getLogger("opsim.ops")
S = AclnnStatus

FLOAT_TYPES = (DataType.DT_FLOAT, DataType.DT_FLOAT16, DataType.DT_BF16)
NUMERIC_TYPES = FLOAT_TYPES + (DataType.DT_INT32, DataType.DT_INT64)
#: elements one vector core handles per block in the default elementwise tiling (assumed)
ELEMENTS_PER_BLOCK = 4096


def l2_phase_1(api: str, dfx_in: tuple, dfx_out: tuple, check: Callable[[], AclnnStatus],
               build: Callable[[AclOpExecutor], AclnnStatus]) -> tuple[AclnnStatus, int, Any]:
    """The standard phase-1 body. Returns (status, workspace size, executor or cache wrapper)."""
    try:
        return _l2_phase_1(api, dfx_in, dfx_out, check, build)
    finally:
        l2_dfx_phase_end()  # the L2 guard's report, on every return path (op_dfx.cpp ~OpDfxGuard)


def _l2_phase_1(api: str, dfx_in: tuple, dfx_out: tuple, check: Callable[[], AclnnStatus],
                build: Callable[[AclOpExecutor], AclnnStatus]) -> tuple[AclnnStatus, int, Any]:
    wrap = l2_dfx_phase_1(api, dfx_in, dfx_out)
    if wrap is not None:
        return S.ACLNN_SUCCESS, wrap.get_workspace_size(), wrap
    status = check()
    if status != S.ACLNN_SUCCESS:
        return status, 0, None
    ctx = current()
    p = ctx.process
    if p.faults and p.fault("create_executor", api):
        return S.ACLNN_ERR_INNER_CREATE_EXECUTOR, 0, None
    unique = create_executor(api)
    try:
        status = build(unique.get())
        if status != S.ACLNN_SUCCESS:
            return status, 0, None
        ctx.charge("plan workspace")
        size = unique.get().get_workspace_size()
        return S.ACLNN_SUCCESS, size, unique.release_to()
    finally:
        unique.close()


def l2_phase_2(api: str, workspace: int, workspace_size: int, executor: Any, stream: Any) -> AclnnStatus:
    """The standard phase-2 body; the L2 guard reports after the run (op_dfx.cpp ~OpDfxGuard)."""
    l2_dfx_phase_2(api, executor)
    try:
        return common_op_executor_run(workspace, workspace_size, executor, stream)
    finally:
        l2_dfx_phase_end()


def check_not_null(api: str, **named: Any) -> AclnnStatus:
    for name, value in named.items():
        if value is None:
            log.error("%s: %s must not be null (ACLNN_ERR_PARAM_NULLPTR)", api, name)
            return S.ACLNN_ERR_PARAM_NULLPTR
    return S.ACLNN_SUCCESS


def check_dtype(api: str, name: str, t: Tensor, allowed: Iterable[DataType]) -> AclnnStatus:
    if type(allowed) is not tuple:
        allowed = tuple(allowed)
    if t.dtype not in allowed:
        log.error("%s: %s dtype %s is not supported; supported: %s (ACLNN_ERR_PARAM_INVALID)", api, name,
                  t.dtype.name, ", ".join(d.name for d in allowed))
        return S.ACLNN_ERR_PARAM_INVALID
    return S.ACLNN_SUCCESS


def check_same_dtype(api: str, **named: Tensor) -> AclnnStatus:
    items = list(named.items())
    first_name, first = items[0]
    for name, t in items[1:]:
        if t.dtype != first.dtype:
            log.error("%s: %s dtype %s differs from %s dtype %s (ACLNN_ERR_PARAM_INVALID)", api, name, t.dtype.name,
                      first_name, first.dtype.name)
            return S.ACLNN_ERR_PARAM_INVALID
    return S.ACLNN_SUCCESS


def check_shape(api: str, name: str, t: Tensor, expected: Sequence[int]) -> AclnnStatus:
    shape = t.view_shape
    if shape != expected and tuple(shape) != tuple(expected):
        log.error("%s: %s shape %s must be %s (ACLNN_ERR_PARAM_INVALID)", api, name, list(t.view_shape),
                  list(expected))
        return S.ACLNN_ERR_PARAM_INVALID
    return S.ACLNN_SUCCESS


def first_error(*statuses: AclnnStatus) -> AclnnStatus:
    for s in statuses:
        if s != S.ACLNN_SUCCESS:
            return s
    return S.ACLNN_SUCCESS


def check_broadcast(api: str, self: Tensor, other: Tensor, out: Tensor) -> AclnnStatus:
    shape = _broadcast(self.view_shape, other.view_shape)
    if shape is None:
        log.error("%s: self shape %s and other shape %s cannot broadcast (ACLNN_ERR_PARAM_INVALID)", api,
                  list(self.view_shape), list(other.view_shape))
        return S.ACLNN_ERR_PARAM_INVALID
    return check_shape(api, "out", out, shape)


_BROADCASTS: dict[tuple, tuple[int, ...] | None] = {}
"""Broadcast results by the pair of shapes (a pure function of their dims)."""


def _broadcast(a: Sequence[int], b: Sequence[int]) -> tuple[int, ...] | None:
    key = (tuple(a), tuple(b))
    try:
        return _BROADCASTS[key]
    except KeyError:
        pass
    shape = broadcast_shape(a, b)
    if len(_BROADCASTS) >= 4096:
        _BROADCASTS.clear()
    _BROADCASTS[key] = shape
    return shape


# ---- tiling helpers --------------------------------------------------------------------------------

def vector_tiling(ctx_aiv: int, numel: int, nbytes: int, flops_per_element: float = 1.0,
                  workspace_sizes: list[int] | None = None) -> TilingResult:
    """Elementwise tiling: one block per ELEMENTS_PER_BLOCK elements, at most the vector core count."""
    blocks = max(1, min(ctx_aiv, math.ceil(numel / ELEMENTS_PER_BLOCK)))
    return TilingResult(block_dim=blocks, workspace_sizes=list(workspace_sizes or []), tiling_data_size=64,
                        flops=float(numel) * flops_per_element, bytes=float(nbytes), task_type="AI_VECTOR_CORE")


def aiv_num() -> int:
    ctx = current()
    return ctx.config.aiv_num or ctx.process.aiv_num


def aic_num() -> int:
    ctx = current()
    return ctx.config.aic_num or ctx.process.aic_num


def total_bytes(*tensors: Tensor | None) -> int:
    return sum(t.storage_nbytes for t in tensors if isinstance(t, Tensor))
