"""Fitting the family model (``opsim.device.family``) on measured kernels, pooled over profiles and SoCs.

Per family, the four parameters (overhead, compute efficiency, HBM efficiency, per-core bandwidth) minimise
the mean soft-L1 loss of log(predicted / real) (robust: one slow outlier barely moves them), by a
Nelder-Mead search over their logarithms (numpy only). Each kernel is predicted on the SoC of its own
profile, so the parameters are SoC-independent. Op types with at least ``MIN_FACTOR_KERNELS`` kernels get a
factor over their family: the median of real / family prediction, with the byte range it saw.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from opsim.device.family import FamilyModel, FamilyParams, OpTypeFactor, physical_time

MIN_FACTOR_KERNELS = 3
#: log-ratio scale of the soft-L1 loss: residuals beyond ~20% count linearly, not squared.
_SCALE = 0.2
#: starting point and bounds of the search (log space): overhead us, compute eff, hbm eff, core bytes/us.
_START = (math.log(3.0), math.log(0.6), math.log(0.6), math.log(60000.0))
_LO = (math.log(0.05), math.log(0.005), math.log(0.02), math.log(500.0))
_HI = (math.log(500.0), math.log(1.0), math.log(1.0), math.log(1e7))


@dataclass(frozen=True, slots=True)
class WorkSample:
    """One measured kernel as the family model sees it."""

    op_type: str
    core: str
    family: str
    flops: float
    nbytes: float
    block_dim: int
    itemsize: float
    duration_us: float
    soc: Any


def _params(x: np.ndarray, n: int = 0) -> FamilyParams:
    x = np.clip(x, _LO, _HI)
    return FamilyParams(overhead_us=float(math.exp(x[0])), compute_eff=float(math.exp(x[1])),
                        hbm_eff=float(math.exp(x[2])), core_bw=float(math.exp(x[3])), n=n)


def _log_ratios(p: FamilyParams, samples: list[WorkSample]) -> np.ndarray:
    pred = np.array([physical_time(p, s.family, s.core, s.flops, s.nbytes, s.block_dim, s.itemsize, s.soc)
                     for s in samples])
    real = np.array([s.duration_us for s in samples])
    return np.log(pred / real)


def _loss(x: np.ndarray, samples: list[WorkSample]) -> float:
    r = _log_ratios(_params(x), samples) / _SCALE
    return float(np.mean(np.sqrt(1.0 + r * r) - 1.0))


def nelder_mead(f: Any, x0: np.ndarray, steps: int = 400, step: float = 0.7) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (a small, dependable Nelder-Mead; numpy only)."""
    n = len(x0)
    pts = [np.array(x0, dtype=float)] + [np.array(x0, dtype=float) + step * np.eye(n)[i] for i in range(n)]
    vals = [f(p) for p in pts]
    for _ in range(steps):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = np.mean(pts[:-1], axis=0)
        refl = centre + (centre - pts[-1])
        fr = f(refl)
        if fr < vals[0]:
            exp = centre + 2.0 * (centre - pts[-1])
            fe = f(exp)
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = centre + 0.5 * (pts[-1] - centre)
            fc = f(con)
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
        if max(vals) - min(vals) < 1e-9:
            break
    return pts[int(np.argmin(vals))]


def fit_family(samples: list[WorkSample]) -> FamilyParams:
    """The parameters of one family on its kernels, with the p10/p90 of the log residuals."""
    x = np.array(_START)
    for _ in range(2):  # a restart escapes an early collapse of the simplex
        x = nelder_mead(lambda v: _loss(v, samples), x)
    p = _params(x, len(samples))
    r = _log_ratios(p, samples)
    nb = [s.nbytes for s in samples]
    return FamilyParams(p.overhead_us, p.compute_eff, p.hbm_eff, p.core_bw, n=len(samples),
                        log_p10=float(np.percentile(-r, 10)), log_p90=float(np.percentile(-r, 90)),
                        bytes_range=(float(min(nb)), float(max(nb))))


def fit_family_model(samples: list[WorkSample], *, op_types: bool = True) -> FamilyModel:
    """Family parameters for every family with kernels, then op-type factors over them."""
    model = FamilyModel(n=len(samples))
    by_fam: dict[str, list[WorkSample]] = {}
    for s in samples:
        by_fam.setdefault(s.family, []).append(s)
    for fam, group in sorted(by_fam.items()):
        model.families[fam] = fit_family(group)
    if op_types:
        model.op_types = fit_factors(model, samples).op_types
    return model


def fit_factors(base: FamilyModel, samples: list[WorkSample]) -> FamilyModel:
    """Op-type factors over ``base``'s family parameters (a model with factors only): a user calibration's
    refinement of the built-in family model, or the built-in model's own op-type level."""
    out = FamilyModel(n=len(samples))
    by_op: dict[tuple[str, str], list[WorkSample]] = {}
    for s in samples:
        if s.family in base.families:
            by_op.setdefault((s.op_type, s.family), []).append(s)
    for key, group in sorted(by_op.items()):
        if len(group) < MIN_FACTOR_KERNELS:
            continue
        r = -_log_ratios(base.families[key[1]], group)  # log(real / family)
        med = float(np.median(r))
        nb = [s.nbytes for s in group]
        out.op_types[key] = OpTypeFactor(
            factor=float(math.exp(med)), n=len(group), log_p10=float(np.percentile(r - med, 10)),
            log_p90=float(np.percentile(r - med, 90)), bytes_range=(float(min(nb)), float(max(nb))))
    return out


__all__ = ["MIN_FACTOR_KERNELS", "WorkSample", "fit_factors", "fit_family", "fit_family_model", "nelder_mead"]
