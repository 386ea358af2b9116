"""Fit the default host model (``opsim.device.host_model``) on the ACLNN calls of real profiles.

Training data is one row per call (``HostCall``): the profile, the file and row it came from, the API, the
kind (phase1 / phase2_miss / phase2_hit, paired as ``opsim.calibration.host.classify_calls`` does), the
duration and, when the profile's kernel table names the API's kernels (``aclnnXxx_...``), the API's tensor
count (the largest inputs + outputs of one of its kernels). ``tests/data/real/host_calls_public.csv`` holds
the calls of every public profile opsim uses (written by docs/refit_host.py), so the fit and its
leave-one-profile-out benchmark need no large file.
"""
from __future__ import annotations

import csv
import io
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from opsim.calibration.host import classify_calls
from opsim.device.fitted import Provenance
from opsim.device.host_model import KINDS, HostEstimate, HostModel, api_family
from opsim.ingest.kernels import KernelRecord
from opsim.ingest.trace_view import AclApiEvent

CALL_COLUMNS = ("profile", "source", "row", "api", "kind", "dur_us", "n_tensors")
#: the tensor-count slope is kept within these bounds (a doubling of tensors at most doubles the host time).
SLOPE_BOUNDS = (0.0, 1.0)


@dataclass(frozen=True)
class HostCall:
    """One measured ACLNN host call of a profile."""

    profile: str
    source: str
    row: int
    api: str
    kind: str
    dur_us: float
    n_tensors: int | None = None


def api_tensors(records: Iterable[KernelRecord]) -> dict[str, int]:
    """API -> tensor count, from kernels named after their API (torch_npu names them 'aclnnXxx_Op_Op')."""
    out: dict[str, int] = {}
    for r in records:
        if r.name.startswith("aclnn") and "_" in r.name:
            api = r.name.split("_", 1)[0]
            out[api] = max(out.get(api, 0), len(r.input_shapes) + len(r.output_shapes))
    return out


def host_calls(events: Iterable[AclApiEvent], profile: str, source: str,
               tensors: dict[str, int] | None = None) -> list[HostCall]:
    """The ACLNN calls of one profile's host events, classified, in API then time order."""
    tensors = tensors or {}
    return [HostCall(profile, source, a.event.index + 1, a.api, kind, a.event.dur / 1000.0, tensors.get(a.api))
            for a, kind in classify_calls(events)]


def write_calls_csv(calls: Iterable[HostCall]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CALL_COLUMNS)
    for c in calls:
        w.writerow([c.profile, c.source, c.row, c.api, c.kind, f"{c.dur_us:.3f}",
                    "" if c.n_tensors is None else c.n_tensors])
    return buf.getvalue()


def read_calls_csv(path: str | Path) -> list[HostCall]:
    """The calls of a host_calls CSV (the format ``write_calls_csv`` writes)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [HostCall(r["profile"], r["source"], int(r["row"]), r["api"], r["kind"], float(r["dur_us"]),
                     int(r["n_tensors"]) if r["n_tensors"] else None) for r in rows]


def _per_api(calls: list[HostCall]) -> dict[tuple[str, str], tuple[float, list[str], int | None]]:
    """(api, kind) -> (median over profiles of each profile's median, the profiles, tensor count)."""
    per_profile: dict[tuple[str, str, str], list[float]] = {}
    tensors: dict[str, int] = {}
    for c in calls:
        for kind in (c.kind, "phase2") if c.kind != "phase1" else (c.kind,):
            per_profile.setdefault((c.api, kind, c.profile), []).append(c.dur_us)
        if c.n_tensors:
            tensors[c.api] = max(tensors.get(c.api, 0), c.n_tensors)
    by_api: dict[tuple[str, str], dict[str, float]] = {}
    for (api, kind, prof), durs in per_profile.items():
        by_api.setdefault((api, kind), {})[prof] = statistics.median(durs)
    return {k: (statistics.median(v.values()), sorted(v), tensors.get(k[0]))
            for k, v in by_api.items()}


def _slope(apis: dict, families: dict[tuple[str, str], HostEstimate]) -> float:
    """Least-squares log2 slope of an API's time over its family's against its tensor count over the family's."""
    sxx = sxy = 0.0
    for (api, kind), (us, _src, nt) in apis.items():
        fam = families.get((api_family(api), kind))
        if nt and fam is not None and fam.tensors and us > 0:
            x = math.log2(nt / fam.tensors)
            sxx += x * x
            sxy += x * math.log2(us / fam.median_us)
    if sxx == 0.0:
        return 0.0
    return min(max(sxy / sxx, SLOPE_BOUNDS[0]), SLOPE_BOUNDS[1])


def fit_host_model(calls: Iterable[HostCall], name: str = "", tensors: bool = True) -> HostModel:
    """API, family and per-kind medians (each profile and each API weighing the same) and the tensor slope."""
    calls = list(calls)
    apis = _per_api(calls)
    model = HostModel(name=name, profiles={c.profile: c.source for c in calls})
    model.apis = {k: HostEstimate(us, len(src), tuple(Provenance(file=s) for s in sorted(set(src))), nt)
                  for k, (us, src, nt) in sorted(apis.items())}
    groups: dict[tuple[str, str], list[tuple[float, list[str], int | None]]] = {}
    for (api, kind), v in apis.items():
        groups.setdefault((api_family(api), kind), []).append(v)
        groups.setdefault(("", kind), []).append(v)
    for (fam, kind), vs in sorted(groups.items()):
        known = [nt for _us, _s, nt in vs if nt]
        est = HostEstimate(statistics.median(us for us, _s, _nt in vs), len(vs),
                           tuple(Provenance(file=s) for s in sorted({s for _u, src, _n in vs for s in src})),
                           statistics.median(known) if known else None)
        if fam:
            model.families[(fam, kind)] = est
        else:
            model.kinds[kind] = est
    model.tensor_slope = _slope(apis, model.families) if tensors else 0.0
    return model


__all__ = ["CALL_COLUMNS", "HostCall", "api_tensors", "fit_host_model", "host_calls", "read_calls_csv",
           "write_calls_csv", "KINDS"]
