"""The family model: a kernel's duration from the SoC's resources and the kernel's work.

Kernels fall into op families (``family_of``): cube (matrix multiplies, convolutions, attention), vector
elementwise, reductions and norms, data movement, MemSet, AI CPU, other (DSA, unknown cores). For a kernel of
``flops`` (cube: multiply-add work x 2; vector families: elements processed), ``nbytes`` read and written,
``block_dim`` blocks and a dtype element size, on a SoC with ``n`` cores of the family's type at ``clock``:

    waves    = ceil(block_dim / n)                      (blocks beyond the cores run in further waves)
    per_core = waves / block_dim                        (share of the work the busiest core does)
    compute  = flops x per_core / (rate per core-cycle x clock x compute_eff)
    memory   = nbytes / min(HBM bandwidth x hbm_eff, cores used x core_bw)
    launch   = overhead + block_us x block_dim + mix_us (MIX_AIC / MIX_AIV kernels)
    duration = launch + max(compute, memory)

Rate per core-cycle: cube 16^3 multiply-adds (2 flops each) for 16-bit dtypes, twice that for 8-bit, a
quarter for 32-bit (assumed: fp32 runs as several 16-bit passes), half for fp32 convolutions (HF32,
``cube_rate_factor``); vector 256 bytes per cycle / element size
(assumed: 128 fp16 lanes). The efficiency numbers per family (``FamilyParams``) are fitted on real
profiles pooled (``opsim.calibration.family_fit``); SoC numbers come from the preset, so the same parameters
predict another SoC. Op types with enough evidence carry a factor over their family (``OpTypeFactor``),
applied only near the sizes it was measured on. This module is pure Python: predictions are a few float
operations (``opsim run`` also memoises them per signature).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

FAMILIES = ("cube", "vector", "reduce", "move", "memset", "aicpu", "other")

_CUBE_PREFIXES = ("MatMul", "BatchMatMul", "Conv", "FlashAttention", "GroupedMatmul", "QuantBatchMatmul",
                  "WeightQuantBatchMatmul", "GEMM", "Gemm", "IncreFlashAttention", "PromptFlashAttention",
                  "FusedInferAttention", "Deconvolution", "Addmm", "Baddbmm", "Matmul")
_REDUCE_WORDS = ("Reduce", "Norm", "Softmax", "ArgMax", "ArgMin", "TopK", "NLLLoss", "Cumsum", "CumSum",
                 "Sort", "Mean", "Var", "Moments", "CrossEntropy", "LpNorm", "Sum")
_MOVE_NAMES = frozenset({
    "Transpose", "TransposeD", "TransData", "Cast", "Slice", "SliceD", "StridedSlice", "StridedSliceD",
    "Concat", "ConcatD", "ConcatV2", "ConcatV2D", "Pack", "Unpack", "Split", "SplitD", "SplitV", "SplitVD",
    "TensorMove", "AsStrided", "BroadcastTo", "BroadcastToD", "Tile", "TileD", "Pad", "PadD", "PadV3", "Fill",
    "ZerosLike", "OnesLike", "Identity", "ViewCopy", "Expand", "ExpandD", "Reshape", "ScatterUpdate",
    "ScatterNdUpdate", "IndexPut", "InplaceIndexAdd", "Index", "IndexByTensor", "Range", "Tril", "Triu",
    "MaskedFill", "Select", "ReverseV2", "Roll", "DropOutDoMask", "DropOutGenMask", "Im2col", "Col2im",
})
_MOVE_PREFIXES = ("Gather", "Scatter", "Concat", "Slice", "Split", "Transpose", "Broadcast", "Index", "Copy")


def family_of(op_type: str, core: str) -> str:
    """The op family of a kernel (one of ``FAMILIES``), from its op type and accelerator core."""
    if core == "AI_CPU":
        return "aicpu"
    if op_type == "MemSet":
        return "memset"
    if core not in ("AI_CORE", "MIX_AIC", "AI_VECTOR_CORE", "MIX_AIV"):
        return "other"
    if op_type.startswith(_CUBE_PREFIXES) or "Matmul" in op_type or "MatMul" in op_type:
        return "cube"
    if core in ("AI_CORE", "MIX_AIC") and not op_type.startswith(("Trans", "Cast")):
        return "cube"  # a kernel using the cube units on a SoC with separate vector cores
    if op_type in _MOVE_NAMES or op_type.startswith(_MOVE_PREFIXES):
        return "move"
    if any(w in op_type for w in _REDUCE_WORDS):
        return "reduce"
    return "vector"


#: cube multiply-adds per core-cycle relative to the 16^3 fractal of 16-bit dtypes (element size -> factor).
CUBE_DTYPE_FACTOR = {1: 2.0, 2: 1.0, 4: 0.25}
#: fp32 convolutions run as HF32 by default (torch_npu's ``torch_npu.npu.conv.allow_hf32`` defaults to True,
#: ``npu.matmul.allow_hf32`` to False): assumed at half the 16-bit rate. Evidence: the public AlexNet fp32
#: profile's Conv2DBackpropFilter kernels reach 137 TFLOP/s on a 910B2, 1.55x a quarter-rate peak.
HF32_FACTOR = 0.5


def cube_rate_factor(op_type: str, itemsize: float) -> float:
    """The cube's rate for a kernel relative to 16-bit dtypes (``CUBE_DTYPE_FACTOR``; HF32 convolutions)."""
    size = int(itemsize) if itemsize in (1, 2, 4) else 2
    if size == 4 and op_type.startswith(("Conv", "Deconvolution")):
        return HF32_FACTOR
    return CUBE_DTYPE_FACTOR[size]
#: bytes the vector unit of one core processes per cycle (assumed: 128 fp16 lanes).
VECTOR_BYTES_PER_CYCLE = 256.0
#: op-type factors answer within this factor of the byte range they were measured on (beyond: the family).
FACTOR_RANGE = 8.0


@dataclass(frozen=True)
class FamilyParams:
    """Fitted efficiencies of one family (see the module docstring) and its residual spread."""

    overhead_us: float
    compute_eff: float = 1.0
    hbm_eff: float = 1.0
    core_bw: float = 1e9
    """bytes per microsecond one core streams."""
    n: int = 0
    log_p10: float = -0.3
    log_p90: float = 0.3
    """10th and 90th percentile of log(real / predicted) on the fitted kernels (the interval)."""
    bytes_range: tuple[float, float] | None = None
    block_us: float = 0.0
    """launch cost per block of the kernel (the task scheduler hands blocks to cores one by one)."""
    mix_us: float = 0.0
    """extra launch cost of a mixed (MIX_AIC / MIX_AIV) kernel, which starts cube and vector cores together."""

    def launch_us(self, core: str, block_dim: int) -> float:
        """Fixed cost of one kernel of this family: overhead, per-block dispatch and the mixed-core start."""
        extra = self.mix_us if core in ("MIX_AIC", "MIX_AIV") else 0.0
        return self.overhead_us + self.block_us * (block_dim if block_dim > 0 else 1) + extra


@dataclass(frozen=True)
class OpTypeFactor:
    """real / family prediction for one op type (median over its kernels), near the sizes it saw."""

    factor: float
    n: int
    log_p10: float = -0.2
    log_p90: float = 0.2
    bytes_range: tuple[float, float] = (0.0, 0.0)
    itemsizes: tuple[float, ...] = ()
    """element sizes of the kernels it was measured on (empty: any); a factor measured on fp32 kernels does
    not answer for bf16 ones (another regime of the same op type: cube passes, bandwidth per element)."""

    def covers(self, nbytes: float, itemsize: float | None = None) -> bool:
        lo, hi = self.bytes_range
        if itemsize is not None and self.itemsizes and itemsize not in self.itemsizes:
            return False
        return lo / FACTOR_RANGE - 65536.0 <= nbytes <= hi * FACTOR_RANGE + 65536.0


@dataclass
class FamilyModel:
    """Per-family parameters and per-op-type factors (``op_types`` keyed by (op type, family))."""

    families: dict[str, FamilyParams] = field(default_factory=dict)
    op_types: dict[tuple[str, str], OpTypeFactor] = field(default_factory=dict)
    n: int = 0


def cores_for(family: str, core: str, soc: object) -> int:
    """Cores of the type a family's kernels run on (vector cores for vector families when the SoC has them)."""
    cube = soc.aicore_count  # type: ignore[attr-defined]
    if family == "cube" or core in ("AI_CORE", "MIX_AIC"):
        return cube
    return soc.vector_core_count or cube  # type: ignore[attr-defined]


def physical_time(p: FamilyParams, family: str, core: str, flops: float, nbytes: float, block_dim: int,
                  itemsize: float, soc: object, op_type: str = "") -> float:
    """Duration (us) of one kernel under family parameters ``p`` on ``soc`` (see the module docstring)."""
    n = cores_for(family, core, soc)
    bd = block_dim if block_dim > 0 else 1
    used = bd if bd < n else n
    per_core = math.ceil(bd / n) / bd
    clock = soc.clock_mhz  # type: ignore[attr-defined]  # cycles per microsecond
    size = int(itemsize) if itemsize in (1, 2, 4) else 2
    if family == "cube":
        rate = 2.0 * 4096.0 * cube_rate_factor(op_type, size) * clock
    else:
        rate = VECTOR_BYTES_PER_CYCLE / size * clock
    compute = flops * per_core / (rate * p.compute_eff)
    bw = soc.hbm_bandwidth_gbps * 1e3 * p.hbm_eff  # type: ignore[attr-defined]
    core_bw = used * p.core_bw
    memory = nbytes / (bw if bw < core_bw else core_bw)
    return p.launch_us(core, bd) + (compute if compute > memory else memory)


__all__ = ["CUBE_DTYPE_FACTOR", "FAMILIES", "HF32_FACTOR", "cube_rate_factor", "FamilyModel", "FamilyParams", "OpTypeFactor", "cores_for",
           "family_of", "physical_time"]
