"""The C entry-point null checks that Python-level wrappers cannot reach.

opsim's L2 APIs return `(status, workspace size, executor)` instead of writing through
`uint64_t *workspaceSize` / `aclOpExecutor **executor`, so a caller can never pass a null out slot. This module
offers the C shape of the two phases for code that studies those paths: out slots are `OutSlot` objects (None
stands for a null pointer), and the checks and statuses are opbase's.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable

from opsim.acl.status import AclnnStatus

log = logging.getLogger("opsim.opdev")
S = AclnnStatus


@dataclass
class OutSlot:
    """A C out pointer (`uint64_t *` or `aclOpExecutor **`): the call writes `value`."""

    value: Any = None


def check_phase1_params(executor: OutSlot | None, workspace_size: OutSlot | None) -> AclnnStatus:
    """CheckPhase1Params: a null executor or workspace-size out slot is ACLNN_ERR_PARAM_NULLPTR."""
    if executor is None or workspace_size is None:
        log.error("executor or workspaceSize is nullptr (ACLNN_ERR_PARAM_NULLPTR)")
        return S.ACLNN_ERR_PARAM_NULLPTR
    return S.ACLNN_SUCCESS


def get_workspace_size(api: Callable[..., tuple], *args: Any, workspace_size: OutSlot | None,
                       executor: OutSlot | None) -> AclnnStatus:
    """`aclnnXxxGetWorkspaceSize(args..., workspaceSize, executor)`: the L2_DFX_PHASE_1 null check comes first,
    before any TLS initialisation, key construction or cache lookup (nothing else happens); then the API runs and
    its results are written through the slots."""
    status = check_phase1_params(executor, workspace_size)
    if status != S.ACLNN_SUCCESS:
        return status
    status, size, ex = api(*args)
    if status == S.ACLNN_SUCCESS:
        workspace_size.value = size
        executor.value = ex
    return status


def run(api: Callable[..., AclnnStatus], workspace: int | None, workspace_size: int, executor: Any,
        stream: Any) -> AclnnStatus:
    """`aclnnXxx(workspace, workspaceSize, executor, stream)`: a null workspace is address 0. CommonOpExecutorRun
    returns ACLNN_ERR_PARAM_NULLPTR for a null executor, and, by its own check before anything runs, for a null
    workspace with a non-zero size, after deleting the executor or cache wrapper (DeleteExecutorForError): no
    launch and no replay happen."""
    return api(workspace or 0, workspace_size, executor, stream)


__all__ = ["OutSlot", "check_phase1_params", "get_workspace_size", "run"]
