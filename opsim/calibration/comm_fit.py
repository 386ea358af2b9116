"""Link bandwidth and latency per transport type, fitted on real communication.json / communication_matrix.json.

The model is HCCL's alpha-beta step (`opsim.cluster.transfer`): one message of m bytes takes
latency_us + m / bandwidth. communication.json's ``Size Distribution`` gives, per op and transport, messages
of one size with their count and total time, so each bucket is a point (message bytes, mean message time);
the points are fitted with the same robust fit as kernel durations (`opsim.calibration.fit.fit_kernels`: L1
on relative error, non-negative, outliers capped), one point per bucket. A transport with no Size
Distribution (LOCAL copies appear only in communication_matrix.json) is fitted on its per-link rows, one
point per op and link: its latency is then that of a row (all of an op's messages on the link), said in
``source``. A transport whose sizes do not vary gets the ratio bytes / time and no latency.

``fit_links(...)`` returns {transport: LinkFit}; ``LinkFit.to_dict()`` is what a calibration YAML's
``links:`` section holds and what ``opsim.cluster.links.get_link(preset, **fit.overrides())`` takes.
"""
from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable

from opsim.calibration.comm_read import (MAX_BANDWIDTH_GBPS, MAX_LATENCY_US, TRANSPORTS, CommOp, LinkRow,
                                         read_communication, read_matrix)
from opsim.calibration.fit import Sample, fit_kernels
from opsim.errors import CalibrationError, ProfileFormatError, shown
from opsim.ingest import locate_profiles
from opsim.ingest.locate import profile_dirs

COMM_FILE = "communication.json"
MATRIX_FILE = "communication_matrix.json"
_OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"


@dataclass(frozen=True)
class LinkFit:
    """A transport's fitted link: what `opsim.cluster.links.get_link` takes as overrides, and its evidence."""

    transport: str
    bandwidth_gbps: float
    latency_us: float | None
    messages: int
    """Messages behind the fit (Size Distribution counts; link rows count one each)."""
    samples: int
    """Points fitted (buckets or link rows)."""
    median_error: float
    """Median |predicted / measured - 1| over the points (in-sample)."""
    source: str
    """"size distribution" | "link rows" | "ratio"."""
    provenance: str

    def overrides(self) -> dict:
        """The LinkSpec fields this fit replaces."""
        out = {"bandwidth_gbps": self.bandwidth_gbps}
        if self.latency_us is not None:
            out["latency_us"] = self.latency_us
        return out

    def to_dict(self) -> dict:
        out = {"bandwidth_gbps": round(self.bandwidth_gbps, 4)}
        if self.latency_us is not None:
            out["latency_us"] = round(self.latency_us, 3)
        out.update(messages=self.messages, samples=self.samples, median_error=round(self.median_error, 4),
                   source=self.source, provenance=self.provenance)
        return out


def is_comm_file(path: str | Path) -> bool:
    """A communication.json or communication_matrix.json given by name."""
    return Path(path).name in (COMM_FILE, MATRIX_FILE)


def comm_files(root: str | Path) -> list[Path]:
    """The communication files of a profile directory (or its ASCEND_PROFILER_OUTPUT), or the file itself."""
    p = Path(root)
    if is_comm_file(p):
        return [p]
    if p.is_file():
        p = p.parent  # a kernel table or trace named directly: its folder's communication files
    dirs = [p] if p.name == _OUTPUT_DIR else [p / _OUTPUT_DIR, p]
    for d in dirs:
        found = [d / name for name in (COMM_FILE, MATRIX_FILE) if (d / name).is_file()]
        if found:
            return found
    return []


def read_comm(files: Iterable[str | Path]) -> tuple[list[CommOp], list[LinkRow]]:
    """The ops and link rows of communication files (each read by its name)."""
    ops: list[CommOp] = []
    rows: list[LinkRow] = []
    for f in files:
        if Path(f).name == MATRIX_FILE:
            rows.extend(read_matrix(f))
        else:
            ops.extend(read_communication(f))
    return ops, rows


def _files(items: Iterable) -> str:
    names = sorted({i.file for i in items})
    return ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")


def _from_samples(transport: str, samples: list[Sample], messages: int, source: str) -> LinkFit:
    return _checked(_fit_samples(transport, samples, messages, source))


def _checked(fit: LinkFit) -> LinkFit:
    """A fit the calibration YAML can hold (what `links_from_yaml` loads back, after to_dict's rounding):
    otherwise `opsim calibrate` would write a file no run can read. Sizes of 1e15 MB moved in 1e-300 ms are
    damage, not a link."""
    d = fit.to_dict()
    bw, lat = d["bandwidth_gbps"], d.get("latency_us", 0.0)
    if not (0 < bw <= MAX_BANDWIDTH_GBPS and 0 <= lat <= MAX_LATENCY_US and math.isfinite(d["median_error"])):
        raise CalibrationError(f"{fit.provenance.partition(': ')[0].removeprefix('measured on ')}: the "
                               f"{fit.transport} link fitted on it ({fit.source}) is {fit.bandwidth_gbps:.4g} GB/s"
                               f"{f', {fit.latency_us:.4g} us latency' if fit.latency_us is not None else ''}, "
                               f"outside (0, {MAX_BANDWIDTH_GBPS:g}] GB/s and [0, {MAX_LATENCY_US:g}] us; its sizes "
                               f"or times are damaged: export the profile again or leave the file out")
    return fit


def _fit_samples(transport: str, samples: list[Sample], messages: int, source: str) -> LinkFit:
    fit = fit_kernels(samples)
    where = _files(samples)
    if fit.us_per_byte > 0:
        return LinkFit(transport, 1e-3 / fit.us_per_byte, fit.overhead_us, messages, len(samples),
                       fit.median_error, source, f"measured on {where}: {len(samples)} {source} point(s), "
                       f"{messages} message(s), robust alpha-beta fit")
    total_b = sum(s.nbytes for s in samples)
    total_us = sum(s.duration_us for s in samples)
    bw = 1e-3 * total_b / total_us
    errs = [abs(s.nbytes / (bw * 1e3) / s.duration_us - 1.0) for s in samples]
    return LinkFit(transport, bw, None, messages, len(samples), float(statistics.median(errs)), "ratio",
                   f"measured on {where}: bytes / time of {len(samples)} point(s) of one size (no latency fit)")


def fit_links(ops: Iterable[CommOp], rows: Iterable[LinkRow] = ()) -> dict[str, LinkFit]:
    """Per transport type, the link fit of the ops' Size Distributions, else of the matrix's link rows."""
    buckets: dict[str, list[Sample]] = {}
    counts: dict[str, int] = {}
    for i, op in enumerate(ops):
        for tr, stats in op.transports.items():
            for mb, count, total_ms in stats.buckets:
                if count > 0 and mb > 0 and total_ms > 0:
                    buckets.setdefault(tr, []).append(Sample(0.0, mb * 1e6, 1, total_ms * 1e3 / count, op.file, i))
                    counts[tr] = counts.get(tr, 0) + count
    by_rows: dict[str, list[Sample]] = {}
    for i, r in enumerate(rows):
        if r.transport not in buckets and r.size_mb > 0 and r.time_ms > 0:
            by_rows.setdefault(r.transport, []).append(Sample(0.0, r.size_mb * 1e6, 1, r.time_ms * 1e3, r.file, i))
    out = {tr: _from_samples(tr, s, counts[tr], "size distribution") for tr, s in sorted(buckets.items())}
    out.update({tr: _from_samples(tr, s, len(s), "link rows") for tr, s in sorted(by_rows.items())})
    return dict(sorted(out.items()))


def fit_files(files: Iterable[str | Path]) -> dict[str, LinkFit]:
    """`fit_links` of communication files."""
    ops, rows = read_comm(files)
    return fit_links(ops, rows)





def _profile_comm_files(path: Path) -> tuple[bool, list[Path]]:
    """(whether `path` holds a kernel/host profile, the communication files of its profiles)."""
    try:
        roots = [f.root for f in locate_profiles(path)]
        has_profile = True
    except ProfileFormatError:
        roots = (profile_dirs(path) or [path]) if path.is_dir() else []
        has_profile = False
    return has_profile, [f for r in roots for f in comm_files(r)]


def calibrate_links(paths: list) -> tuple[list, dict[str, dict], list[dict]]:
    """For `opsim calibrate`: (the paths left for kernel and host fits, the links: section, source entries).
    communication*.json given by name, and folders holding only communication files, are not kernel paths.
    Without any communication file the paths come back unchanged, with no links and no sources."""
    kernel_paths, files = [], []
    for p in paths:
        if is_comm_file(p):
            files.append(Path(p))
            continue
        has_profile, found = _profile_comm_files(Path(p))
        files.extend(found)
        if has_profile or not found:
            kernel_paths.append(p)
    ops, rows, sources = [], [], []
    for f in dict.fromkeys(files):  # each file once, in order
        o, r = read_comm([f])
        ops.extend(o)
        rows.extend(r)
        kind = "communication matrix" if f.name == MATRIX_FILE else "communication"
        sources.append({"file": str(f), "kind": kind, ("link_rows" if r else "ops"): len(r) if r else len(o)})
    links = {tr: fit.to_dict() for tr, fit in fit_links(ops, rows).items()}
    return kernel_paths, links, sources


_LINK_KEYS = {"bandwidth_gbps": (int, float), "latency_us": (int, float), "messages": int, "samples": int,
              "median_error": (int, float), "source": str, "provenance": str}


def links_from_yaml(value: object, file: str) -> dict[str, dict]:
    """A calibration YAML's ``links:`` section checked: {transport: {bandwidth_gbps, latency_us?, ...}}.
    A bad entry raises CalibrationError naming the file and the field."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise CalibrationError(f"{file}: field links: must be a mapping of transport type to link fit")
    out: dict[str, dict] = {}
    for tr, fit in value.items():
        where = f"{file}: field links.{shown(tr, 20, quote=False)}"
        if tr not in TRANSPORTS:
            raise CalibrationError(f"{where}: unknown transport; one of {', '.join(TRANSPORTS)}")
        if not isinstance(fit, dict) or "bandwidth_gbps" not in fit:
            raise CalibrationError(f"{where}: must be a mapping with bandwidth_gbps (GB/s)")
        for key, val in fit.items():
            kinds = _LINK_KEYS.get(key)
            if kinds is None:
                raise CalibrationError(f"{where}.{shown(key, 30, quote=False)}: unknown field; one of "
                                       f"{', '.join(_LINK_KEYS)}")
            if isinstance(val, bool) or not isinstance(val, kinds):
                raise CalibrationError(f"{where}.{key}: wrong type ({shown(val, 40)}); regenerate the file with "
                                       "`opsim calibrate`")
            if kinds != str and not (math.isfinite(val) and val >= 0):
                raise CalibrationError(f"{where}.{key}: must be a finite number >= 0, got {shown(val, 40)}")
        if not 0 < fit["bandwidth_gbps"] <= MAX_BANDWIDTH_GBPS or fit.get("latency_us", 0) > MAX_LATENCY_US:
            raise CalibrationError(f"{where}: bandwidth_gbps must be in (0, {MAX_BANDWIDTH_GBPS:g}] and "
                                   f"latency_us at most {MAX_LATENCY_US:g}")
        out[str(tr)] = dict(fit)
    return out


__all__ = ["LinkFit", "comm_files", "fit_files", "fit_links", "is_comm_file", "links_from_yaml", "read_comm"]
