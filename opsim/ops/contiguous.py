"""aclnnContiguous: the non-contiguous-to-contiguous conversion an individual-op executor runs first.

Phase 1 converts every tensor of a list with `l0op::Contiguous` (a contiguous tensor is returned as is; any
other one gets a strided-copy kernel writing a fresh workspace tensor), sizes the workspace with the linear
planner (GetLinearWorkspaceSize, which this API still calls) and records each converted tensor's workspace
offset on the executor (SetWorkspaceOffsets). The individual-op executor reads them back
(GetWorkspaceOffsets) to find its contiguous inputs inside the workspace it passes to phase 2.
"""
from __future__ import annotations

import numpy as np

from opsim.acl.tensor import Tensor, TensorList
from opsim.opdev.dfx import l0_dfx
from opsim.opdev.executor import create_executor
from opsim.opdev.kernel import AiCoreKernel, register_aicore_kernel
from opsim.opdev.launchers import add_to_launcher_list_aicore
from opsim.opdev.op_args import op_input, op_output
from opsim.opdev.op_exec_cache import l2_dfx_phase_1, l2_dfx_phase_end
from opsim.ops import _common as common
from opsim.ops._common import S

STRIDED_COPY = "AsStrided"
"""Op type of the strided-copy kernel of the general Contiguous path."""


def _copy_tiling(ins, outs, attrs):
    out = outs[0]
    return common.vector_tiling(common.aiv_num(), out.numel(), 2 * out.nbytes)


def _copy_compute(ins, outs, attrs, wss):
    outs[0].numpy()[...] = np.asarray(ins[0].numpy())


register_aicore_kernel(AiCoreKernel(STRIDED_COPY, _copy_tiling, _copy_compute,
                                   declares_workspace=False, tiling_by_shape=True))


def contiguous_l0(x: Tensor | None, executor) -> Tensor | None:
    """l0op::Contiguous: `x` itself when already contiguous, else a workspace tensor filled by a strided copy;
    None on failure."""
    if x is None:
        return None
    if x.is_contiguous():
        return x
    with l0_dfx("Contiguous", executor):
        out = executor.alloc_tensor(list(x.view_shape), x.dtype, x.view_format)
        if out is None:
            return None
        if add_to_launcher_list_aicore(STRIDED_COPY, executor, op_input(x), op_output(out)) != S.ACLNN_SUCCESS:
            return None
        return out


def aclnn_contiguous_get_workspace_size(self: TensorList | None):
    """aclnnContiguousGetWorkspaceSize(self, workspaceSize, executor) -> (status, workspace size, executor)."""
    try:
        return _contiguous_phase_1(self)
    finally:
        l2_dfx_phase_end()  # the L2 guard's report, on every return path (op_dfx.cpp ~OpDfxGuard)


def _contiguous_phase_1(self: TensorList | None):
    api = "aclnnContiguous"
    wrap = l2_dfx_phase_1(api, (self,), ())
    if wrap is not None:
        return S.ACLNN_SUCCESS, wrap.get_workspace_size(), wrap
    if self is None:
        return S.ACLNN_ERR_PARAM_NULLPTR, 0, None
    unique = create_executor(api)
    try:
        ex = unique.get()
        ex.abandon_cache()
        outs = []
        for t in self:
            out = contiguous_l0(t, ex)
            if out is None:
                return S.ACLNN_ERR_INNER_NULLPTR, 0, None
            outs.append(out)
        size = ex.get_linear_workspace_size()
        ex.set_workspace_offsets([o.storage.workspace_offset for o in outs])  # GetWorkspaceOffset of each
        return S.ACLNN_SUCCESS, size, unique.release_to()
    finally:
        unique.close()


def aclnn_contiguous(workspace: int, workspace_size: int, executor, stream) -> S:
    return common.l2_phase_2("aclnnContiguous", workspace, workspace_size, executor, stream)


def contiguous_input_addresses(executor, workspace: int) -> list[int]:
    """What the individual-op executor's non-contiguous path binds: workspace base + each recorded offset."""
    return [workspace + off for off in executor.get_workspace_offsets()]


__all__ = ["aclnn_contiguous_get_workspace_size", "aclnn_contiguous", "contiguous_l0", "contiguous_input_addresses",
           "STRIDED_COPY"]
