"""aclnnInit / aclnnFinalize (aclnn_init.cpp): process-level start and teardown of the ACLNN library."""
from __future__ import annotations

from typing import Any

from opsim.acl.status import AclnnStatus
from opsim.opdev.aicpu.task_space import aclnn_aicpu_finalize
from opsim.opdev.thread_local import current


def aclnn_init(config_path: str | None = None) -> AclnnStatus:
    """aclnnInit: nothing to load in the simulator; the process context already holds the switches."""
    return AclnnStatus.ACLNN_SUCCESS


def aclnn_finalize(process: Any = None) -> AclnnStatus:
    """aclnnFinalize: aclnnAicpuFinalize (drop every cached AI CPU task, empty the registry), then release
    tiling-parse contexts (nothing to release here)."""
    aclnn_aicpu_finalize(process or current().process)
    return AclnnStatus.ACLNN_SUCCESS
