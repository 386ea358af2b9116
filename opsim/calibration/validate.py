"""Cross-validation of the kernel predictor: k interleaved folds, errors per op type.

Fold i holds the kernels at positions i, i+k, i+2k, ... of the profile (in file order), so every fold sees
the whole run; each fold is predicted by a calibration fitted on the other k-1 folds, through the same
``CostModel.kernel`` that ``opsim run`` and ``opsim predict`` use.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from opsim.device.cost import CostModel
from opsim.device.soc import get_soc
from opsim.ingest.kernels import KernelRecord
from opsim.calibration import fit_device, work_samples
from opsim.calibration.family_fit import fit_family_model
from opsim.calibration.predict import predict_full
from opsim.device.family import family_of


@dataclass(frozen=True)
class Prediction:
    record: KernelRecord
    predicted_us: float
    level: str = ""
    low_us: float = 0.0
    high_us: float = 0.0

    @property
    def real_us(self) -> float:
        return float(self.record.duration_us or 0.0)

    @property
    def rel_error(self) -> float:
        return abs(self.predicted_us / self.real_us - 1.0)


@dataclass(frozen=True)
class ErrorRow:
    """Error figures of one group of kernels (an op type and core, or all)."""

    op_type: str
    core: str
    n: int
    median_error: float
    p90_error: float
    within_25: float


def predict_records(cost: CostModel, records: list[KernelRecord]) -> list[Prediction]:
    """Predictions for measured rows (rows without a positive duration are left out)."""
    out = []
    for r in records:
        if r.duration_us is None or r.duration_us <= 0:
            continue
        p = predict_full(cost, r)
        out.append(Prediction(r, p.us, p.level, p.low, p.high))
    return out


def cross_validate(records: list[KernelRecord], k: int = 5, soc: str | None = None, *,
                   signatures: bool = True) -> list[Prediction]:
    """Out-of-fold predictions for every measured row."""
    measured = [r for r in records if r.duration_us is not None and r.duration_us > 0]
    if k < 2:
        raise ValueError(f"k-fold cross-validation needs k >= 2, got {k}")
    spec = get_soc(soc) if soc is not None else get_soc()
    out: list[Prediction] = []
    for fold in range(k):
        train = [r for i, r in enumerate(measured) if i % k != fold]
        test = [r for i, r in enumerate(measured) if i % k == fold]
        if not test:
            continue
        cost = CostModel(spec, fitted=fit_device(train, signatures=signatures, name=f"fold {fold}"))
        out.extend(predict_records(cost, test))
    order = {id(r): i for i, r in enumerate(measured)}
    out.sort(key=lambda p: order[id(p.record)])
    return out


def _row(op: str, core: str, preds: list[Prediction]) -> ErrorRow:
    e = np.array([p.rel_error for p in preds])
    return ErrorRow(op, core, len(preds), float(np.median(e)), float(np.percentile(e, 90)),
                    float(np.mean(e <= 0.25)))


def error_table(preds: list[Prediction]) -> list[ErrorRow]:
    """One row per (op type, core), most kernels first, then an 'all' row."""
    groups: dict[tuple[str, str], list[Prediction]] = {}
    for p in preds:
        groups.setdefault((p.record.op_type, p.record.core), []).append(p)
    rows = [_row(op, core, ps) for (op, core), ps in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]
    if preds:
        rows.append(_row("all", "", preds))
    return rows


def render_error_table(rows: list[ErrorRow], markdown: bool = False) -> str:
    """A text (or markdown) table: op type, core, n, median |error|, p90 |error|, share within 25%."""
    head = ("op type", "core", "n", "median |err|", "p90 |err|", "within 25%")
    body = [(r.op_type, r.core, str(r.n), f"{100 * r.median_error:.1f}%", f"{100 * r.p90_error:.1f}%",
             f"{100 * r.within_25:.0f}%") for r in rows]
    return _render(head, body, markdown)


def fit_held_in(records: list[KernelRecord], socs: dict[str, str], *, signatures: bool = True) -> "Any":
    """A calibration-like FittedTiming from ``records`` alone: signatures and op-type lines (when they all
    come from one SoC), plus family parameters and op-type factors refitted on them (nothing built in)."""
    t = fit_device(records, signatures=signatures, name="held-in profiles")
    found = sorted({socs.get(r.source, "") for r in records})
    t.soc = found[0] if len(found) == 1 and found[0] else "(mixed)"
    t.family = fit_family_model(work_samples(records, socs))
    return t


def leave_one_out(groups: dict[str, list[KernelRecord]], socs: dict[str, str], *,
                  signatures: bool = True, bands: bool = True) -> dict[str, list[Prediction]]:
    """Leave-one-profile-out: each group (a profile, or every profile of one workload) predicted by a model
    fitted on the other groups only (family parameters included), on the held-out group's own SoC. With
    ``bands`` and two or more groups left to fit on, the family intervals come from the held-in groups' own
    leave-one-out residuals (``out_of_sample_bands``), so the band is an out-of-sample spread."""
    out: dict[str, list[Prediction]] = {}
    for name, held in groups.items():
        rest = {g: rs for g, rs in groups.items() if g != name}
        train = [r for rs in rest.values() for r in rs]
        if not train:
            continue
        fitted = fit_held_in(train, socs, signatures=signatures)
        if bands and len(rest) >= 2:
            fitted.family = with_bands(fitted.family, out_of_sample_bands(rest, socs))
        by_soc: dict[str, list[KernelRecord]] = {}
        for r in held:
            by_soc.setdefault(socs.get(r.source, "Ascend910B2"), []).append(r)
        preds: list[Prediction] = []
        for soc, rs in by_soc.items():
            cost = CostModel(get_soc(soc), fitted=fitted, defaults=False)
            preds.extend(predict_records(cost, rs))
        out[name] = preds
    return out


#: a family needs this many held-out residuals for an out-of-sample band (else it keeps its fit's own).
MIN_BAND_RESIDUALS = 10
#: at most this many refits per band estimate (more groups are dealt into this many folds), so a
#: leave-one-profile-out over G profiles costs O(G) fits, not O(G^2).
MAX_BAND_FOLDS = 3


#: the key of the band every family without enough evidence of its own gets (all residuals pooled).
POOLED = "pooled"


def _quantile_band(r: list[float]) -> tuple[float, float]:
    """The p10 and p90 of log residuals, widened to include 0 (the band always holds the prediction)."""
    return min(float(np.percentile(r, 10)), 0.0), max(float(np.percentile(r, 90)), 0.0)


def out_of_sample_bands(groups: dict[str, list[KernelRecord]], socs: dict[str, str]
                        ) -> dict[str, tuple[float, float]]:
    """Per family, the p10 and p90 of log(real / predicted) of a leave-one-group-out over ``groups`` (no
    signatures; roofline answers left out). A family gets its own band only when at least two held-out groups
    gave ``MIN_BAND_RESIDUALS`` residuals of it between them: the spread of one group is mostly that group's
    bias, which another workload does not share. Every other family gets the ``POOLED`` band, the quantiles of
    all residuals pooled (also returned, for families the groups lack)."""
    if len(groups) > MAX_BAND_FOLDS:  # bounded cost: groups dealt round-robin into MAX_BAND_FOLDS folds
        folds: dict[str, list[KernelRecord]] = {}
        for i, rs in enumerate(groups.values()):
            folds.setdefault(f"fold {i % MAX_BAND_FOLDS}", []).extend(rs)
        groups = folds
    residuals: dict[str, list[float]] = {}
    seen_in: dict[str, set[str]] = {}
    for name, preds in leave_one_out(groups, socs, signatures=False, bands=False).items():
        for p in preds:
            if p.level == "roofline":  # the family was absent from the other groups: no evidence
                continue
            fam = family_of(p.record.op_type, p.record.core)
            residuals.setdefault(fam, []).append(float(np.log(p.real_us / p.predicted_us)))
            seen_in.setdefault(fam, set()).add(name)
    pooled = [x for r in residuals.values() for x in r]
    if len(pooled) < MIN_BAND_RESIDUALS:
        return {}
    bands = {POOLED: _quantile_band(pooled)}
    for fam, r in residuals.items():
        own = len(r) >= MIN_BAND_RESIDUALS and len(seen_in[fam]) >= 2
        bands[fam] = _quantile_band(r) if own else bands[POOLED]
    return bands


def with_bands(model: Any, bands: dict[str, tuple[float, float]]) -> Any:
    """``model`` (a FamilyModel) with the intervals ``bands`` gives: each family's own, else the pooled one
    (``POOLED``); an op-type factor takes its family's band (its own residuals are in-sample: the factor
    corrects a bias, not the spread another workload shows)."""
    if not bands:
        return model
    pooled = bands.get(POOLED)
    for fam, params in model.families.items():
        band = bands.get(fam, pooled)
        if band is not None:
            model.families[fam] = dataclasses.replace(params, log_p10=band[0], log_p90=band[1])
    for key, factor in model.op_types.items():
        band = bands.get(key[1], pooled)
        if band is not None:
            model.op_types[key] = dataclasses.replace(factor, log_p10=band[0], log_p90=band[1])
    return model


@dataclass(frozen=True)
class HeldOutRow:
    """Errors of one held-out profile (and op family, '' for all): median |error|, share within 25%, the
    error of the summed device time, and the share of kernels whose real time lies in the predicted
    p10-p90 band (80% when the band is honest)."""

    profile: str
    family: str
    n: int
    median_error: float
    within_25: float
    sum_error: float
    in_band: float = 0.0


def held_out_table(results: dict[str, list[Prediction]]) -> list[HeldOutRow]:
    """Per held-out profile an 'all' row, then one row per op family."""
    rows = []
    for name, preds in results.items():
        groups: dict[str, list[Prediction]] = {"all": preds}
        for p in preds:
            groups.setdefault(family_of(p.record.op_type, p.record.core), []).append(p)
        for fam, ps in groups.items():
            if not ps:
                continue
            e = np.array([p.rel_error for p in ps])
            real = sum(p.real_us for p in ps)
            band = float(np.mean([p.low_us <= p.real_us <= p.high_us for p in ps]))
            rows.append(HeldOutRow(name, fam, len(ps), float(np.median(e)), float(np.mean(e <= 0.25)),
                                   sum(p.predicted_us for p in ps) / real - 1.0 if real > 0 else 0.0, band))
    return rows


def render_held_out(rows: list[HeldOutRow], markdown: bool = False) -> str:
    """A text (or markdown) table of ``held_out_table`` rows."""
    head = ("held-out profile", "family", "n", "median |err|", "within 25%", "summed time err", "in p10-p90")
    body = [(r.profile, r.family, str(r.n), f"{100 * r.median_error:.1f}%", f"{100 * r.within_25:.0f}%",
             f"{100 * r.sum_error:+.1f}%", f"{100 * r.in_band:.0f}%") for r in rows]
    return _render(head, body, markdown)


def _render(head: tuple[str, ...], body: list[tuple[str, ...]], markdown: bool) -> str:
    """A table as markdown, or as text: the first two columns left-aligned, the figures right-aligned."""
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(b) + " |" for b in body]) + "\n"
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(head)]
    fmt = "  ".join(f"{{:<{w}}}" if i < 2 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join([fmt.format(*head)] + [fmt.format(*b) for b in body]) + "\n"
