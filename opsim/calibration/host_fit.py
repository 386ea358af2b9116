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
import dataclasses
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

CALL_COLUMNS = ("profile", "source", "row", "api", "kind", "dur_us", "n_tensors", "n_launches")
#: the tensor-count slope is kept within these bounds (a doubling of tensors at most doubles the host time).
SLOPE_BOUNDS = (0.0, 1.0)
#: the per-launch cost is kept within these bounds (us per device task).
LAUNCH_BOUNDS = (0.0, 20.0)


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
    #: device tasks the call launched (HostToDevice flows of a trace, TASK rows of a db), when known.
    n_launches: int | None = None


def api_tensors(records: Iterable[KernelRecord]) -> dict[str, int]:
    """API -> tensor count, from kernels named after their API (torch_npu names them 'aclnnXxx_Op_Op')."""
    out: dict[str, int] = {}
    for r in records:
        if r.name.startswith("aclnn") and "_" in r.name:
            api = r.name.split("_", 1)[0]
            out[api] = max(out.get(api, 0), len(r.input_shapes) + len(r.output_shapes))
    return out


def host_calls(events: Iterable[AclApiEvent], profile: str, source: str, tensors: dict[str, int] | None = None,
               launches: dict[int, int] | None = None) -> list[HostCall]:
    """The ACLNN calls of one profile's host events, classified, in API then time order; `launches` maps a
    call's row (event index + 1) to the device tasks it launched (absent: none)."""
    tensors = tensors or {}
    return [HostCall(profile, source, a.event.index + 1, a.api, kind, a.event.dur / 1000.0, tensors.get(a.api),
                     None if launches is None or kind == "phase1" else launches.get(a.event.index + 1, 0))
            for a, kind in classify_calls(events)]


def trace_launch_counts(trace) -> dict[int, int]:
    """Row (event index + 1) of each host call of a TraceView -> the device kernels its flows point at."""
    out: dict[int, int] = {}
    for link in trace.launch_links():
        out[link.host.index + 1] = out.get(link.host.index + 1, 0) + len(link.kernels)
    return out


def write_calls_csv(calls: Iterable[HostCall]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(CALL_COLUMNS)
    for c in calls:
        w.writerow([c.profile, c.source, c.row, c.api, c.kind, f"{c.dur_us:.3f}",
                    "" if c.n_tensors is None else c.n_tensors, "" if c.n_launches is None else c.n_launches])
    return buf.getvalue()


def read_calls_csv(path: str | Path) -> list[HostCall]:
    """The calls of a host_calls CSV (the format ``write_calls_csv`` writes)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [HostCall(r["profile"], r["source"], int(r["row"]), r["api"], r["kind"], float(r["dur_us"]),
                     int(r["n_tensors"]) if r["n_tensors"] else None,
                     int(r["n_launches"]) if r.get("n_launches") else None) for r in rows]


def _kinds(c: HostCall) -> tuple[str, ...]:
    return (c.kind, "phase2") if c.kind != "phase1" else (c.kind,)


def _per_api(calls: list[HostCall]) -> dict[tuple[str, str], tuple[float, list[str], int | None, float | None]]:
    """(api, kind) -> (median over profiles of each profile's median, the profiles, tensor count, median
    launched tasks per call)."""
    per_profile: dict[tuple[str, str, str], list[float]] = {}
    launches: dict[tuple[str, str], list[int]] = {}
    tensors: dict[str, int] = {}
    for c in calls:
        for kind in _kinds(c):
            per_profile.setdefault((c.api, kind, c.profile), []).append(c.dur_us)
            if c.n_launches is not None:
                launches.setdefault((c.api, kind), []).append(c.n_launches)
        if c.n_tensors:
            tensors[c.api] = max(tensors.get(c.api, 0), c.n_tensors)
    by_api: dict[tuple[str, str], dict[str, float]] = {}
    for (api, kind, prof), durs in per_profile.items():
        by_api.setdefault((api, kind), {})[prof] = statistics.median(durs)
    return {k: (statistics.median(v.values()), sorted(v), tensors.get(k[0]),
                statistics.median(launches[k]) if k in launches else None) for k, v in by_api.items()}


def _launch_slope(calls: list[HostCall]) -> float:
    """Microseconds per launched device task: over the (API, kind) measured with several launch counts, the
    least-squares slope of (median time at the most launches - at the fewest) on the launch difference (a
    wide difference says more than run-to-run noise between 2 and 3 launches)."""
    by: dict[tuple[str, str], dict[int, list[float]]] = {}
    for c in calls:
        if c.kind != "phase1" and c.n_launches is not None:
            by.setdefault((c.api, c.kind), {}).setdefault(c.n_launches, []).append(c.dur_us)
    sxx = sxy = 0.0
    for counts in by.values():
        if len(counts) >= 2:
            lo, hi = min(counts), max(counts)
            sxx += (hi - lo) ** 2
            sxy += (hi - lo) * (statistics.median(counts[hi]) - statistics.median(counts[lo]))
    return min(max(sxy / sxx, LAUNCH_BOUNDS[0]), LAUNCH_BOUNDS[1]) if sxx else 0.0


def _slope(apis: dict, families: dict[tuple[str, str], HostEstimate]) -> float:
    """Least-squares log2 slope of an API's time over its family's against its tensor count over the family's."""
    sxx = sxy = 0.0
    for (api, kind), (us, _src, nt, _nl) in apis.items():
        fam = families.get((api_family(api), kind))
        if nt and fam is not None and fam.tensors and us > 0:
            x = math.log2(nt / fam.tensors)
            sxx += x * x
            sxy += x * math.log2(us / fam.median_us)
    if sxx == 0.0:
        return 0.0
    return min(max(sxy / sxx, SLOPE_BOUNDS[0]), SLOPE_BOUNDS[1])


def observed_medians(calls: Iterable[HostCall]) -> dict[tuple[str, str], float]:
    """(api, kind) -> median duration (us) of ``calls`` (one profile's), phase-2 kinds also pooled as
    'phase2': what ``HostModel.machine_factor`` compares with a model."""
    by: dict[tuple[str, str], list[float]] = {}
    for c in calls:
        for kind in _kinds(c):
            by.setdefault((c.api, kind), []).append(c.dur_us)
    return {k: statistics.median(v) for k, v in by.items()}


def fit_host_model(calls: Iterable[HostCall], name: str = "", tensors: bool = True,
                   launches: bool = True, machines: bool = False) -> HostModel:
    """API, family and per-kind medians (each profile and each API weighing the same), the tensor slope and
    the cost per launched task. With ``machines``, every profile's calls are first divided by its machine
    factor against a first fit (``HostModel.machine_factor``), so profiles of slower and faster hosts agree
    and the model describes a typical one of them."""
    calls = list(calls)
    if machines:
        first = fit_host_model(calls, name, tensors, launches)
        by_prof: dict[str, list[HostCall]] = {}
        for c in calls:
            by_prof.setdefault(c.profile, []).append(c)
        calls = []
        for cs in by_prof.values():
            f = first.machine_factor(observed_medians(cs)) or 1.0
            calls.extend(dataclasses.replace(c, dur_us=c.dur_us / f) for c in cs)
    apis = _per_api(calls)
    model = HostModel(name=name, profiles={c.profile: c.source for c in calls})
    model.apis = {k: HostEstimate(us, len(src), tuple(Provenance(file=s) for s in sorted(set(src))), nt, nl)
                  for k, (us, src, nt, nl) in sorted(apis.items())}
    groups: dict[tuple[str, str], list[tuple[float, list[str], int | None, float | None]]] = {}
    for (api, kind), v in apis.items():
        groups.setdefault((api_family(api), kind), []).append(v)
        groups.setdefault(("", kind), []).append(v)
    for (fam, kind), vs in sorted(groups.items()):
        known = [v[2] for v in vs if v[2]]
        known_l = [v[3] for v in vs if v[3] is not None]
        est = HostEstimate(statistics.median(v[0] for v in vs), len(vs),
                           tuple(Provenance(file=s) for s in sorted({s for v in vs for s in v[1]})),
                           statistics.median(known) if known else None,
                           statistics.median(known_l) if known_l else None)
        if fam:
            model.families[(fam, kind)] = est
        else:
            model.kinds[kind] = est
    model.tensor_slope = _slope(apis, model.families) if tensors else 0.0
    model.launch_us = _launch_slope(calls) if launches else 0.0
    return model


__all__ = ["CALL_COLUMNS", "HostCall", "api_tensors", "fit_host_model", "host_calls", "observed_medians",
           "read_calls_csv",
           "write_calls_csv", "KINDS"]
