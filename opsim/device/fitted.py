"""Fitted timing: kernel-duration fits and per-API host timings learnt from real profiles.

A ``FittedTiming`` is what ``opsim.calibration`` produces and what ``CostModel`` consults before its roofline:

* device, most specific first: a **signature** (op type, core, input/output shapes and dtypes seen in the
  profile) -> the median measured duration, a lookup in the manner of Vidur's profiled-operator tables; an
  **op type + core** fit; a **core** fit (every kernel of that core type); then the roofline.
  A fit is ``overhead + us_per_byte x bytes + us_per_flop x flops + us_per_byte_per_block x bytes / block_dim``
  with non-negative coefficients.
* host: named host phases of the cost model measured directly (the task queue's enqueue and dequeue costs),
  and per ACLNN API, the medians of ``aclnnXxxGetWorkspaceSize`` (phase 1, executor-cache misses only) and
  of ``aclnnXxx`` (phase 2: all calls, calls after a miss, calls without phase 1 = hits).

This module only holds and evaluates the numbers (no file reading), so the device layer can use it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from opsim.device.family import FamilyModel

#: accelerator cores of the profiler ("Accelerator Core" / "Task Type") -> the opsim task kind that runs them.
CORE_KIND = {
    "AI_CORE": "AI_CORE", "MIX_AIC": "AI_CORE", "AI_VECTOR_CORE": "AI_VECTOR", "MIX_AIV": "AI_VECTOR",
    "AI_CPU": "AI_CPU",
}


def shape_text(shapes: Iterable[Iterable[int]]) -> str:
    """Shapes as kernel_details.csv writes them without quotes: '4,1025;2;2' (a scalar is an empty entry)."""
    return ";".join(",".join(str(int(d)) for d in s) for s in shapes)


def signature_key(op_type: str, core: str, input_shapes: Iterable[Iterable[int]], input_dtypes: Iterable[str],
                  output_shapes: Iterable[Iterable[int]], output_dtypes: Iterable[str]) -> str:
    """The key of a signature-level entry: op type, core, shapes and canonical dtype names."""
    return "|".join((op_type, core, shape_text(input_shapes), ";".join(input_dtypes),
                     shape_text(output_shapes), ";".join(output_dtypes)))


@dataclass(frozen=True)
class Provenance:
    """Where a fitted number comes from: the file and the 1-based rows (or event indices) it was fitted on."""

    file: str
    rows: tuple[int, ...] = ()

    def rows_text(self) -> str:
        """Rows as compact ranges: '2-5,9,12-14'."""
        out: list[str] = []
        rows = sorted(set(self.rows))
        i = 0
        while i < len(rows):
            j = i
            while j + 1 < len(rows) and rows[j + 1] == rows[j] + 1:
                j += 1
            out.append(str(rows[i]) if i == j else f"{rows[i]}-{rows[j]}")
            i = j + 1
        return ",".join(out)


def parse_rows(text: str) -> tuple[int, ...]:
    """Inverse of ``Provenance.rows_text``; raises ValueError on a malformed range list."""
    rows: list[int] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        lo, _, hi = part.partition("-")
        a = int(lo)
        b = int(hi) if hi else a
        if b < a:
            raise ValueError(f"range {part!r} runs backwards")
        rows.extend(range(a, b + 1))
    return tuple(rows)


#: a fit answers for kernels up to this factor outside the bytes and flops range it was fitted on ...
RANGE_FACTOR = 2.0
#: ... plus this much (bytes or flops), so a fit on scalar-sized kernels still covers small tensors.
RANGE_SLACK = 65536.0


@dataclass(frozen=True)
class KernelFit:
    """duration_us = overhead + us_per_byte*bytes + us_per_flop*flops + us_per_byte_per_block*bytes/block_dim.

    A fit only answers for kernels near the sizes it was fitted on (``covers``): a constant measured on
    2 GB copies says nothing about a 4 KB one, so such a kernel goes to the next level."""

    overhead_us: float
    us_per_byte: float = 0.0
    us_per_flop: float = 0.0
    us_per_byte_per_block: float = 0.0
    n: int = 0
    median_error: float = 0.0
    provenance: tuple[Provenance, ...] = ()
    bytes_range: tuple[float, float] | None = None
    flops_range: tuple[float, float] | None = None

    def covers(self, flops: float, nbytes: float) -> bool:
        """Whether (flops, bytes) lies within RANGE_FACTOR (+ RANGE_SLACK) of the fitted ranges."""
        for value, rng in ((nbytes, self.bytes_range), (flops, self.flops_range)):
            if rng is not None and not (rng[0] / RANGE_FACTOR - RANGE_SLACK <= value
                                        <= rng[1] * RANGE_FACTOR + RANGE_SLACK):
                return False
        return True

    def predict(self, flops: float, nbytes: float, block_dim: int) -> float:
        bd = block_dim if block_dim > 0 else 1
        return (self.overhead_us + self.us_per_byte * nbytes + self.us_per_flop * flops
                + self.us_per_byte_per_block * nbytes / bd)


@dataclass(frozen=True)
class SignatureTime:
    """The median measured duration of one kernel signature."""

    median_us: float
    n: int
    provenance: tuple[Provenance, ...] = ()


@dataclass(frozen=True)
class Measured:
    """A host duration measured in a profile: the median over n events."""

    median_us: float
    n: int
    provenance: tuple[Provenance, ...] = ()


@dataclass(frozen=True)
class HostApiTiming:
    """Real host timings of one ACLNN API (any of them may be missing from a profile)."""

    phase1: Measured | None = None
    phase2: Measured | None = None
    phase2_miss: Measured | None = None
    phase2_hit: Measured | None = None

    def phase1_us(self) -> float | None:
        return self.phase1.median_us if self.phase1 is not None else None

    def phase2_us(self, hit: bool | None = None) -> float | None:
        """Phase-2 median for a hit (True), a miss (False) or any call (None), falling back to all calls."""
        pick = self.phase2_hit if hit is True else self.phase2_miss if hit is False else None
        if pick is None:
            pick = self.phase2
        return pick.median_us if pick is not None else None


@dataclass
class FittedTiming:
    """Fitted device and host timing; ``name`` says where it came from (a file, or the built-in defaults)."""

    name: str = ""
    soc: str | None = None
    cores: dict[str, KernelFit] = field(default_factory=dict)
    op_types: dict[tuple[str, str], KernelFit] = field(default_factory=dict)
    signatures: dict[str, SignatureTime] = field(default_factory=dict)
    host_apis: dict[str, HostApiTiming] = field(default_factory=dict)
    host_phases: dict[str, Measured] = field(default_factory=dict)
    """Measured host phases of the cost model by name (torch_npu's ``enqueue``, ``dequeue``, ``dequeue gap``)."""
    family: FamilyModel | None = None
    """Family parameters and op-type factors over the family model (SoC-independent; see opsim.device.family)."""

    def kernel_time(self, op_type: str, core: str, flops: float, nbytes: float, block_dim: int,
                    signature: str | None = None) -> float | None:
        """Fitted duration (us), or None when neither the signature, the op type nor the core was fitted."""
        if signature is not None and self.signatures:
            hit = self.signatures.get(signature)
            if hit is not None:
                return hit.median_us
        fit = self.fit_for(op_type, core, flops, nbytes)
        return fit.predict(flops, nbytes, block_dim) if fit is not None else None

    def fit_for(self, op_type: str, core: str, flops: float | None, nbytes: float | None) -> KernelFit | None:
        """The op type's line when it covers the sizes (core lines are reported, not used: beyond an op type's
        evidence the family model answers)."""
        fit = self.op_types.get((op_type, core))
        if fit is not None and (flops is None or fit.covers(flops, nbytes)):
            return fit
        return None

    def level(self, op_type: str, core: str, signature: str | None = None, flops: float | None = None,
              nbytes: float | None = None) -> str:
        """Which level of this file answers: 'signature', 'op type' or None (sizes given: range-checked)."""
        if signature is not None and signature in self.signatures:
            return "signature"
        return "op type" if self.fit_for(op_type, core, flops, nbytes) is not None else None

    def host_api(self, api: str) -> HostApiTiming | None:
        """The measured host timing of `api` ('aclnnInplaceAdd'), whether or not opsim models that API."""
        return self.host_apis.get(api)


def host_scale(spans_us: float, target_us: float | None) -> float:
    """The factor that makes host spans summing to `spans_us` sum to `target_us` (1.0 when unknown)."""
    if target_us is None or spans_us <= 0.0:
        return 1.0
    return target_us / spans_us


__all__ = ["CORE_KIND", "FittedTiming", "HostApiTiming", "KernelFit", "Measured", "Provenance", "SignatureTime",
           "host_scale", "parse_rows", "shape_text", "signature_key"]
