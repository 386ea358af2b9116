"""One kernel's predicted duration with its level, source and p10-p90 interval.

Most specific evidence first; each level answers only where it has evidence:

1. the calibration's **signature** (a measured median for these exact shapes and dtypes);
2. the calibration's **op type** line, only within the sizes it was fitted on (never extrapolated) and only
   on the SoC it was measured on (absolute times do not carry to other hardware);
3. an **op type** factor over the family model: the calibration's, else the built-in one, near the sizes it
   saw and in the element sizes it saw (``OpTypeFactor.covers``); factors are relative to the SoC-parameterised family model, so they carry
   to another SoC;
4. the **family** model (``opsim.device.family``) with the built-in parameters fitted on all public profiles;
5. the **roofline** (``CostModel.kernel_time``) for kernels no family parameters cover.

The interval is the level's p10-p90 of log(real / predicted) (from the fit's residuals; the built-in family
intervals come from leave-one-profile-out residuals), widened ``OUTSIDE_WIDEN`` times beyond the fitted byte
range. Sources: ``calibration`` (the file's name is reported separately), ``built-in fits`` (a built-in op-type
factor), ``family model``, ``roofline``.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from opsim.device.family import FACTOR_RANGE, FamilyParams, family_of, physical_time

LEVELS = ("signature", "op type", "family", "roofline")
SOURCES = ("calibration", "built-in fits", "family model", "roofline")
#: a signature's interval (assumed: run-to-run spread of one kernel is a few percent).
SIGNATURE_SPREAD = 0.08
#: the roofline's interval, a factor each way (assumed: the untuned roofline is off by up to ~3x, see fidelity).
ROOFLINE_SPREAD = 3.0
#: how much wider (in log space) an interval gets outside the fitted byte range.
OUTSIDE_WIDEN = 2.0


class Prediction(NamedTuple):
    """Predicted duration and its p10-p90 band in microseconds, the level and the source that answered."""

    us: float
    low: float
    high: float
    level: str
    source: str


def _band(us: float, lo: float, hi: float, level: str, source: str, widen: float = 1.0) -> Prediction:
    lo, hi = min(lo, 0.0) * widen, max(hi, 0.0) * widen
    return Prediction(us, us * math.exp(lo), us * math.exp(hi), level, source)


def _outside(p: FamilyParams, nbytes: float) -> bool:
    rng = p.bytes_range
    return rng is not None and not (rng[0] / FACTOR_RANGE - 65536.0 <= nbytes <= rng[1] * FACTOR_RANGE + 65536.0)


def predict(cost: object, op_type: str, core: str, flops: float, nbytes: float, block_dim: int,
            signature: str | None = None, itemsize: float = 2.0) -> Prediction:
    """The prediction of ``cost`` (a CostModel) for one kernel (see the module docstring)."""
    cal = cost.fitted  # type: ignore[attr-defined]
    soc = cost.soc  # type: ignore[attr-defined]
    if cal is not None:
        if signature is not None and cal.signatures:
            hit = cal.signatures.get(signature)
            if hit is not None:
                s = math.log1p(SIGNATURE_SPREAD)
                return _band(hit.median_us, -s, s, "signature", "calibration")
        if cal.soc is None or cal.soc == soc.name:
            fit = cal.fit_for(op_type, core, flops, nbytes)
            if fit is not None:
                s = math.log1p(max(2.0 * fit.median_error, SIGNATURE_SPREAD))
                return _band(fit.predict(flops, nbytes, block_dim), -s, s, "op type", "calibration")
    family = family_of(op_type, core)
    builtin = cost.default_family  # type: ignore[attr-defined]
    params = builtin.families.get(family) if builtin is not None else None
    if cal is not None and cal.family is not None and family in cal.family.families:
        params = cal.family.families[family]
    if params is None:
        kind = _KIND.get(core, "AI_CORE")
        us = cost.kernel_time(flops, nbytes, block_dim if block_dim > 0 else 1, kind)  # type: ignore[attr-defined]
        s = math.log(ROOFLINE_SPREAD)
        return _band(us, -s, s, "roofline", "roofline")
    base = physical_time(params, family, core, flops, nbytes, block_dim, itemsize, soc, op_type)
    for fam_model, source in ((cal.family if cal is not None else None, "calibration"), (builtin, "built-in fits")):
        if fam_model is None:
            continue
        factor = fam_model.op_types.get((op_type, family))
        if factor is not None and factor.covers(nbytes, itemsize):
            return _band(base * factor.factor, factor.log_p10, factor.log_p90, "op type", source)
    return _band(base, params.log_p10, params.log_p90, "family", "family model",
                 OUTSIDE_WIDEN if _outside(params, nbytes) else 1.0)


_KIND = {"AI_CORE": "AI_CORE", "MIX_AIC": "AI_CORE", "AI_VECTOR_CORE": "AI_VECTOR", "MIX_AIV": "AI_VECTOR",
         "AI_CPU": "AI_CPU"}

__all__ = ["LEVELS", "Prediction", "SOURCES", "predict"]
