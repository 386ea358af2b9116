"""AI Core kernel descriptions: what opbase finds in an op's kernel package (binaries, tiling).

A simulated "binary" is a Python description: a tiling function (shapes and attrs -> block dim, workspace
sizes, tiling-data size, work), optional numerics, and the atomic-clean (memset) outputs it declares. Binary
selection and tiling internals are abstracted, as the fidelity policy allows; where tiling happens, what it
returns and which status a failure gives are not.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable



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
    tiling_key: int = 0  # selects the kernel function in the binary
    schedule_mode: int = 0  # the tiling's scheduleMode output
    local_memory_size: int = 0  # the tiling's local-memory (dynamic UB) size in bytes


@dataclass(frozen=True)
class KernelLaunchConfig:
    """What an AI Core launch is made with and what the OpExecCache's launch record keeps to run it again
    (rts_arg.h KernelLaunchConfig). The handles are opsim's stand-ins: the binary is the kernel description,
    the function is the (op type, tiling key) the binary resolves. The block offset is 0 for every launch opsim
    makes (op_kernel.h sets blockdimAic only when it splits a mix kernel)."""

    bin_handle: Any
    func_handle: Any
    tiling_key: int = 0
    num_blocks: int = 1
    is_fat_bin: bool = False
    schedule_mode: int = 0
    dyn_ubuf_size: int = 0
    block_dim_offset: int = 0


def launch_config(kernel: "AiCoreKernel | None", op_type: str, tiling: TilingResult) -> KernelLaunchConfig:
    """The launch configuration of one launch of `kernel` (None: an internal kernel such as MemSet, which has no
    kernel description) with `tiling`."""
    return KernelLaunchConfig(kernel, (op_type, tiling.tiling_key), tiling.tiling_key, tiling.block_dim,
                              kernel is not None and kernel.is_fat_bin, tiling.schedule_mode,
                              tiling.local_memory_size)


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
    is_fat_bin: bool = False
    """Whether the binary is a fat binary (functions found by tiling key) rather than one kernel by name."""

    def select(self, inputs: list, outputs: list, attrs: list) -> bool:
        """Binary selection by dtypes/formats: the default accepts every combination tiling accepts."""
        return self.has_binaries


_KERNELS: dict[str, AiCoreKernel] = {}


def register_aicore_kernel(kernel: AiCoreKernel) -> AiCoreKernel:
    _KERNELS[kernel.op_type] = kernel
    return kernel


def find_aicore_kernel(op_type: str) -> AiCoreKernel | None:
    return _KERNELS.get(op_type)


