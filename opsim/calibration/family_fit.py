"""Fitting the family model (``opsim.device.family``) on measured kernels, pooled over profiles and SoCs.

Per family, the four parameters (overhead, compute efficiency, HBM efficiency, per-core bandwidth) minimise
the mean soft-L1 loss of log(predicted / real) (robust: one slow outlier barely moves them), by a
Nelder-Mead search over their logarithms (numpy only). Each kernel is predicted on the SoC of its own
profile, so the parameters are SoC-independent. Op types with at least ``MIN_FACTOR_KERNELS`` kernels get a
factor over their family: the median of real / family prediction, with the byte range it saw.
"""
from __future__ import annotations

import dataclasses
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


#: the shared launch terms (block_us, mix_us), fitted on the pooled vector-like kernels: start, bounds (log).
_LAUNCH_START = (math.log(0.03), math.log(2.0))
_LAUNCH_LO = (math.log(1e-4), math.log(1e-3))
_LAUNCH_HI = (math.log(1.0), math.log(50.0))


def _params(x: np.ndarray, n: int = 0, launch: tuple[float, float] = (0.0, 0.0)) -> FamilyParams:
    """Family parameters from a search point: 4 log values (launch terms given), or 6 (launch terms last)."""
    if len(x) > 4:
        launch = tuple(float(math.exp(v)) for v in np.clip(x[4:], _LAUNCH_LO, _LAUNCH_HI))  # type: ignore[assignment]
    x = np.clip(x[:4], _LO, _HI)
    return FamilyParams(overhead_us=float(math.exp(x[0])), compute_eff=float(math.exp(x[1])),
                        hbm_eff=float(math.exp(x[2])), core_bw=float(math.exp(x[3])), n=n,
                        block_us=launch[0], mix_us=launch[1])


def _log_ratios(p: FamilyParams, samples: list[WorkSample]) -> np.ndarray:
    pred = np.array([physical_time(p, s.family, s.core, s.flops, s.nbytes, s.block_dim, s.itemsize, s.soc,
                                   s.op_type)
                     for s in samples])
    real = np.array([s.duration_us for s in samples])
    return np.log(pred / real)


def _loss(x: np.ndarray, samples: list[WorkSample], weights: np.ndarray | None = None,
          prior: np.ndarray | None = None, strength: float = 0.0,
          launch: tuple[float, float] = (0.0, 0.0)) -> float:
    """Weighted mean soft-L1 loss of the log ratios, plus a ridge pull of ``x`` towards ``prior``."""
    r = _log_ratios(_params(x, launch=launch), samples) / _SCALE
    loss = np.sqrt(1.0 + r * r) - 1.0
    value = float(np.average(loss, weights=weights)) if weights is not None else float(np.mean(loss))
    if prior is not None and strength > 0.0:
        value += strength * float(np.sum((np.clip(x[:4], _LO, _HI) - prior[:4]) ** 2))
    return value


#: op types weigh 1 / n ** WEIGHT_POWER per kernel (0.5: between one vote per kernel and one per op type).
WEIGHT_POWER = 0.5


def op_type_weights(samples: list[WorkSample]) -> np.ndarray:
    """1 / sqrt(kernels of the op type): a frequent op type (a step's 100 TransData) does not set a family's
    parameters alone, so the family answers for an unseen op type as for a typical one of its kind."""
    counts: dict[str, int] = {}
    for s in samples:
        counts[s.op_type] = counts.get(s.op_type, 0) + 1
    return np.array([1.0 / counts[s.op_type] ** WEIGHT_POWER for s in samples])


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


#: families whose kernels stream through the vector units: they share a pooled fit that answers for a family
#: the evidence lacks and that each family's own fit is pulled towards (``PRIOR_STRENGTH``).
VECTOR_LIKE = ("vector", "reduce", "move", "memset")
#: weight of the pull towards the pooled parameters (per unit of log-parameter distance, against the mean loss).
PRIOR_STRENGTH = 0.02


def _search(samples: list[WorkSample], prior: np.ndarray | None = None, strength: float = 0.0,
            launch: tuple[float, float] | None = None) -> np.ndarray:
    """The best search point: 4 log parameters with ``launch`` fixed, or 6 (launch terms fitted) without."""
    w = op_type_weights(samples)
    if prior is not None:
        x = np.array(prior[:4])
    else:
        x = np.array(_START + (_LAUNCH_START if launch is None else ()))
    fixed = launch if launch is not None else (0.0, 0.0)
    for _ in range(2):  # a restart escapes an early collapse of the simplex
        x = nelder_mead(lambda v: _loss(v, samples, w, prior, strength, fixed), x)
    if len(x) > 4:
        return np.concatenate([np.clip(x[:4], _LO, _HI), np.clip(x[4:], _LAUNCH_LO, _LAUNCH_HI)])
    return np.clip(x, _LO, _HI)


def _finish(x: np.ndarray, samples: list[WorkSample], launch: tuple[float, float] = (0.0, 0.0)) -> FamilyParams:
    """Parameters ``x`` with the p10/p90 of their log residuals on ``samples`` and the byte range."""
    p = _params(x, len(samples), launch)
    r = _log_ratios(p, samples)
    nb = [s.nbytes for s in samples]
    return dataclasses.replace(p, log_p10=float(np.percentile(-r, 10)), log_p90=float(np.percentile(-r, 90)),
                               bytes_range=(float(min(nb)), float(max(nb))))


def fit_family(samples: list[WorkSample], prior: np.ndarray | None = None,
               launch: tuple[float, float] = (0.0, 0.0)) -> FamilyParams:
    """The parameters of one family on its kernels (pulled towards ``prior``, log space, when given; the
    launch terms fixed), with the p10/p90 of the log residuals."""
    x = _search(samples, prior, PRIOR_STRENGTH if prior is not None else 0.0, launch)
    return _finish(x, samples, launch)


def fit_family_model(samples: list[WorkSample], *, op_types: bool = True) -> FamilyModel:
    """The pooled fit of the vector-like kernels gives the launch terms every family shares and the prior
    each vector-like family is pulled towards (and that answers for one without kernels); then every family
    with kernels is fitted, then op-type factors over them."""
    model = FamilyModel(n=len(samples))
    by_fam: dict[str, list[WorkSample]] = {}
    for s in samples:
        by_fam.setdefault(s.family, []).append(s)
    pooled = [s for s in samples if s.family in VECTOR_LIKE]
    prior = _search(pooled) if pooled else None
    launch = (_params(prior).block_us, _params(prior).mix_us) if prior is not None else (0.0, 0.0)
    for fam, group in sorted(by_fam.items()):
        model.families[fam] = fit_family(group, prior if fam in VECTOR_LIKE else None, launch)
    if prior is not None:
        for fam in VECTOR_LIKE:
            if fam not in model.families:
                model.families[fam] = _finish(prior[:4], pooled, launch)
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
            log_p90=float(np.percentile(r - med, 90)), bytes_range=(float(min(nb)), float(max(nb))),
            itemsizes=tuple(sorted({float(s.itemsize) for s in group})))
    return out


__all__ = ["MIN_FACTOR_KERNELS", "PRIOR_STRENGTH", "VECTOR_LIKE", "WorkSample", "op_type_weights", "fit_factors", "fit_family", "fit_family_model", "nelder_mead"]
