"""AI Core kernel descriptions: what opbase finds in an op's kernel package (binaries, tiling).

A simulated "binary" is a Python description: a tiling function (shapes and attrs -> block dim, workspace
sizes, tiling-data size, work), optional numerics, and the atomic-clean (memset) outputs it declares. Binary
selection and tiling internals are abstracted, as the fidelity policy allows; where tiling happens, what it
returns and which status a failure gives are not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from opsim.errors import InvalidArgumentError


@dataclass
class TilingResult:
    """What a tiling run yields. `duration` (us) wins over the roofline work (flops, bytes) when given."""

    block_dim: int = 1
    workspace_sizes: list[int] = field(default_factory=list)
    tiling_data_size: int = 256
    flops: float = 0.0
    bytes: float = 0.0
    duration: float | None = None
    task_type: str = "AI_CORE"  # AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV
    memset_outputs: tuple[int, ...] = ()  # indices of outputs cleaned by a MemSet pre-launch


TilingFn = Callable[[list, list, list], "TilingResult | int"]
ComputeFn = Callable[[list, list, list, list], None]


@dataclass
class AiCoreKernel:
    """One op type's kernel package. `static` binaries report `static_workspace` without tiling."""

    op_type: str
    tiling: TilingFn
    compute: ComputeFn | None = None
    static: bool = False
    static_workspace: list[int] = field(default_factory=list)
    declares_workspace: bool = True
    has_binaries: bool = True
    tiling_by_shape: bool = False
    """The tiling reads only its tensors' descriptors (shapes, strides, offsets, dtypes, formats, placement),
    the attribute values and the core counts, and has no side effect: the fast path may then reuse a launch's
    tiling, duration and tensor description while those are unchanged (opsim.opdev.memo)."""

    def select(self, inputs: list, outputs: list, attrs: list) -> bool:
        """Binary selection by dtypes/formats: the default accepts every combination tiling accepts."""
        return self.has_binaries


_KERNELS: dict[str, AiCoreKernel] = {}


def register_aicore_kernel(kernel: AiCoreKernel) -> AiCoreKernel:
    _KERNELS[kernel.op_type] = kernel
    return kernel


def find_aicore_kernel(op_type: str) -> AiCoreKernel | None:
    return _KERNELS.get(op_type)


def aicore_kernels() -> dict[str, AiCoreKernel]:
    return dict(_KERNELS)


def require_kernel(op_type: str) -> AiCoreKernel:
    k = _KERNELS.get(op_type)
    if k is None:
        raise InvalidArgumentError(f"no AI Core kernel registered for op type {op_type!r}; "
                                   f"known: {', '.join(sorted(_KERNELS))}")
    return k


def kernel_args(*tensors: Any) -> list:
    """Drop None entries (a convenience for compute functions)."""
    return [t for t in tensors if t is not None]
