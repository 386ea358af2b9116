"""Robust fits of kernel durations: minimise the mean relative error with non-negative coefficients.

duration = overhead + a*bytes + b*flops + c*bytes/block_dim. Each subset of the three slopes, with an overhead
and through the origin, is fitted by iteratively reweighted least squares on relative residuals (an L1 fit of
pred/real - 1, so a 2 us kernel weighs as much as a 2 ms one); subsets with a negative coefficient are
discarded and the subset with the lowest mean relative error (capped at 100% per kernel so one outlier
cannot decide) wins. With n kernels at most n-1 slopes are tried, so one kernel gives its own duration.

A slope is only tried when its feature really varies among the kernels (the largest value at least twice the
smallest and at least ``MIN_SLOPE_FEATURE``): a slope fitted on scalar-sized kernels is timing noise and
would explode when applied to a large tensor. Slopes slower than ``MAX_US_PER_UNIT`` (1 GB/s, 1 GFLOP/s) are
rejected for the same reason.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from opsim.device.fitted import KernelFit, Provenance

_IRLS_STEPS = 30
_EPS = 1e-3
#: a feature (bytes, flops, bytes per block) must reach this value somewhere for its slope to be fitted.
MIN_SLOPE_FEATURE = 4096.0
#: the largest accepted slope, us per byte or per flop (1e-3 us/byte = 1 GB/s).
MAX_US_PER_UNIT = 1e-3


@dataclass(frozen=True, slots=True)
class Sample:
    """One measured kernel: features, duration and where it came from."""

    flops: float
    nbytes: float
    block_dim: int
    duration_us: float
    file: str
    row: int


def _design(samples: list[Sample]) -> np.ndarray:
    x = np.array([[1.0, s.nbytes, s.flops, s.nbytes / max(s.block_dim, 1)] for s in samples], dtype=np.float64)
    return x


def _irls(a: np.ndarray) -> np.ndarray:
    """min sum |a @ c - 1| by IRLS (rows already divided by the measured duration)."""
    w = np.ones(a.shape[0])
    coef = np.zeros(a.shape[1])
    for _ in range(_IRLS_STEPS):
        sw = np.sqrt(w)
        coef, *_ = np.linalg.lstsq(a * sw[:, None], sw, rcond=None)
        w = 1.0 / np.maximum(np.abs(a @ coef - 1.0), _EPS)
    return coef


def _varies(col: np.ndarray) -> bool:
    hi, lo = float(col.max()), float(col.min())
    return hi >= MIN_SLOPE_FEATURE and hi >= 2.0 * lo


def provenance_of(samples: list[Sample]) -> tuple[Provenance, ...]:
    by_file: dict[str, list[int]] = {}
    for s in samples:
        by_file.setdefault(s.file, []).append(s.row)
    return tuple(Provenance(file=f, rows=tuple(sorted(rows))) for f, rows in by_file.items())


def fit_kernels(samples: list[Sample]) -> KernelFit:
    """The robust fit of `samples` (at least one), with n, median relative error and provenance."""
    if not samples:
        raise ValueError("fit_kernels needs at least one sample")
    x = _design(samples)
    y = np.array([s.duration_us for s in samples], dtype=np.float64)
    # scale columns so lstsq is well conditioned; coefficients are scaled back below
    scale = np.maximum(np.abs(x).max(axis=0), 1e-30)
    xs = x / scale
    a_all = xs / y[:, None]
    n = len(samples)
    best: tuple[float, np.ndarray] | None = None
    for k in range(0, min(3, n - 1) + 1):
        for sub in itertools.combinations((1, 2, 3), k):
            if any(not _varies(x[:, c]) for c in sub):
                continue
            for cols in ((0,) + sub, sub) if sub else ((0,),):  # with an overhead, and through the origin
                coef = _irls(a_all[:, cols])
                slopes = coef[1:] if cols[0] == 0 else coef
                if (coef < 0).any() or any(s / scale[c] > MAX_US_PER_UNIT for s, c in zip(slopes, sub)):
                    continue
                rel = np.abs(a_all[:, cols] @ coef - 1.0)
                obj = float(np.mean(np.minimum(rel, 1.0)))
                if best is None or obj < best[0] - 1e-12:
                    full = np.zeros(4)
                    full[list(cols)] = coef
                    best = (obj, full)
    assert best is not None  # the overhead-only fit (k = 0) is a weighted median of positive durations
    coef = best[1] / scale
    pred = x @ coef
    med = float(np.median(np.abs(pred / y - 1.0)))
    return KernelFit(overhead_us=float(coef[0]), us_per_byte=float(coef[1]), us_per_flop=float(coef[2]),
                     us_per_byte_per_block=float(coef[3]), n=n, median_error=med, provenance=provenance_of(samples),
                     bytes_range=(float(x[:, 1].min()), float(x[:, 1].max())),
                     flops_range=(float(x[:, 2].min()), float(x[:, 2].max())))
