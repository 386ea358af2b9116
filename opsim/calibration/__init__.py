"""Calibrated timing from real Ascend profiles.

    cal = opsim.calibration.calibrate(["run_ascend_pt"])     # kernel_details.csv / op_summary + trace_view
    cal.save("calibration.yaml")
    cal = opsim.calibration.Calibration.load("calibration.yaml")
    cal.host_api("aclnnInplaceAdd").phase2_us()              # measured host timing of any API in the profile
    opsim.run("scenario.yaml", calibration="calibration.yaml")

Device: per op type and accelerator core a robust fit on bytes moved, flops and block dim, per core a fit over
all its kernels, and per kernel signature seen in the profile its median duration (see
``opsim.device.fitted``). Host: per ACLNN API the medians of phase 1 and phase 2 (hits and misses apart).
Links: when a profile has communication.json / communication_matrix.json, per transport type (HCCS, RDMA,
LOCAL...) the link's bandwidth and per-message latency (``opsim.calibration.comm_fit``), saved as the YAML's
``links:`` section and loaded as ``Calibration.links`` ({transport: {bandwidth_gbps, latency_us, ...}}), which
``opsim.cluster.links.get_link(preset, **cal.link_overrides(transport))`` applies. A profile without those files
calibrates as before, and its YAML has no ``links:`` key.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from opsim.calibration.features import record_features, record_signature, record_work
from opsim.calibration.fit import Sample, fit_kernels, provenance_of
from opsim.calibration.host import HostCalls, host_table_from_statistics, host_table_of, queue_phases
from opsim.calibration.soc_evidence import match_preset, soc_evidence
from opsim.device.fitted import FittedTiming, HostApiTiming, SignatureTime
from opsim.device.fitted_io import fitted_from_dict, fitted_to_dict
from opsim.errors import CalibrationError, ProfileFormatError
from opsim.ingest import KernelRecord, iter_api_statistic, iter_db_api_events, iter_db_kernels, locate_profiles, \
    read_kernels, read_trace_view
from opsim.ingest.sources import is_db
from opsim.calibration.comm_fit import calibrate_links, links_from_yaml
from opsim.calibration.family_fit import WorkSample, fit_factors
from opsim.device.cost import default_family
from opsim.device.soc import get_soc
from opsim.outputs import write_text_atomic

FORMAT_VERSION = 1
#: op types with fewer measured kernels get no op-type fit: their core's fit (or a signature) answers.
MIN_OP_TYPE_KERNELS = 3
_HEADER = ("# opsim calibration: fitted kernel durations and measured host timings.\n"
           "# Every fit lists n (kernels), median_error (median |predicted/real - 1| on the fitted rows) and the\n"
           "# file rows it came from. Kernel fit: duration_us = overhead_us + us_per_byte*bytes + "
           "us_per_flop*flops\n#   + us_per_byte_per_block*bytes/block_dim. Host medians in microseconds.\n")


@dataclass
class Calibration:
    """Fitted timing plus where it came from; ``name`` is what runs report (the file it was loaded from)."""

    timing: FittedTiming
    soc: str | None = None
    sources: list[dict] = field(default_factory=list)
    links: dict[str, dict] = field(default_factory=dict)
    """Per transport type, the fitted link (bandwidth_gbps, latency_us, messages, samples, median_error,
    source, provenance); empty when no profile had communication files."""

    @property
    def name(self) -> str:
        return self.timing.name

    def host_api(self, api: str) -> HostApiTiming | None:
        """Measured host timing of `api`, for any API the profile called (opsim need not model it)."""
        return self.timing.host_api(api)

    def link_overrides(self, transport: str) -> dict:
        """The LinkSpec fields the fit of `transport` replaces ({} when it was not measured)."""
        fit = self.links.get(transport) or {}
        return {k: fit[k] for k in ("bandwidth_gbps", "latency_us") if k in fit}

    def to_dict(self) -> dict:
        out = {"opsim_calibration": FORMAT_VERSION, "soc": self.soc, "sources": self.sources,
               **fitted_to_dict(self.timing)}
        if self.links:
            out["links"] = self.links
        return out

    def to_yaml(self) -> str:
        import yaml  # lazy: keeps PyYAML out of importing opsim.calibration
        return _HEADER + yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None, width=110)

    def save(self, path: str | Path) -> Path:
        """Write the YAML atomically (a temporary file renamed over `path`)."""
        return write_text_atomic(path, self.to_yaml())

    @classmethod
    def load(cls, path: str | Path) -> "Calibration":
        """Read a calibration YAML; a bad file raises CalibrationError naming the file and the field."""
        # lazy: keeps PyYAML out of importing opsim.calibration
        from opsim.yamlio.files import read_yaml_file  # the one bounded YAML reader
        p = Path(path)
        data = read_yaml_file(path, "a calibration YAML", "calibration", CalibrationError,
                              missing=f"no such calibration file; create one with `opsim calibrate PROFILE -o "
                                      f"{p.name}`")
        if not isinstance(data, dict) or "opsim_calibration" not in data:
            raise CalibrationError(f"{p}: field opsim_calibration: missing; this is not an opsim calibration "
                                   f"file (create one with `opsim calibrate`)")
        if data["opsim_calibration"] != FORMAT_VERSION:
            raise CalibrationError(f"{p}: field opsim_calibration: version {data['opsim_calibration']!r} is not "
                                   f"supported (this opsim reads version {FORMAT_VERSION}); regenerate the file")
        soc = data.get("soc")
        if soc is not None and not isinstance(soc, str):
            raise CalibrationError(f"{p}: field soc: must be a SoC name or null, got {soc!r}")
        sources = data.get("sources") or []
        if not isinstance(sources, list):
            raise CalibrationError(f"{p}: field sources: must be a list")
        return cls(timing=fitted_from_dict(data, str(p)), soc=soc, sources=sources,
                   links=links_from_yaml(data.get("links"), str(p)))


def load_calibration(value: "str | Path | Calibration | None") -> Calibration | None:
    """A Calibration from a path (or one already loaded); None stays None."""
    if value is None or isinstance(value, Calibration):
        return value
    return Calibration.load(value)


def samples_of(records: Iterable[KernelRecord]) -> list[tuple[KernelRecord, Sample]]:
    """Rows with a positive measured duration, with their fit features."""
    out = []
    for r in records:
        if r.duration_us is None or r.duration_us <= 0:
            continue
        flops, nbytes, bd = record_features(r)
        out.append((r, Sample(flops=flops, nbytes=nbytes, block_dim=bd, duration_us=r.duration_us,
                              file=r.source, row=r.row)))
    return out


def fit_device(records: Iterable[KernelRecord], *, signatures: bool = True, name: str = "") -> FittedTiming:
    """Core fits, op-type fits and (optionally) signature medians from measured kernel rows."""
    pairs = samples_of(records)
    by_core: dict[str, list[Sample]] = {}
    by_op: dict[tuple[str, str], list[Sample]] = {}
    by_sig: dict[str, list[Sample]] = {}
    for rec, s in pairs:
        by_core.setdefault(rec.core, []).append(s)
        by_op.setdefault((rec.op_type, rec.core), []).append(s)
        if signatures:
            by_sig.setdefault(record_signature(rec), []).append(s)
    t = FittedTiming(name=name)
    t.cores = {c: fit_kernels(v) for c, v in sorted(by_core.items())}
    t.op_types = {k: fit_kernels(v) for k, v in sorted(by_op.items()) if len(v) >= MIN_OP_TYPE_KERNELS}
    t.signatures = {k: SignatureTime(median_us=float(statistics.median(s.duration_us for s in v)), n=len(v),
                                     provenance=provenance_of(v)) for k, v in sorted(by_sig.items())}
    return t


def read_profiles(paths: Iterable[str | Path]) -> tuple[list[KernelRecord], list[Any], list[dict]]:
    """(kernel records, trace views, source descriptions) of every profile path. A kernel source's
    description names the SoC preset its own PMU clock and block dims match (``soc``, ``clock_mhz``)."""
    records: list[KernelRecord] = []
    traces = []
    sources: list[dict] = []
    for path in paths:
        for files in locate_profiles(path):
            _read_profile(files, records, traces, sources)
    return records, traces, sources


def _read_profile(files: Any, records: list[KernelRecord], traces: list[Any], sources: list[dict]) -> None:
    """Append one profile's kernel rows, host-call source and source descriptions (db and api_statistic.csv
    included: a profile with no per-call host times gives its api_statistic.csv means instead)."""
    for k in files.kernel_sources:
        if is_db(k):
            skipped: dict[str, int] = {}
            rows = list(iter_db_kernels(k, skipped))
            evidence = None  # the db's kernel rows carry no PMU cycle columns to read a clock from
        else:
            table = read_kernels(k)
            rows, skipped = table.rows, table.skipped
            evidence = soc_evidence(table)
        records.extend(rows)
        source = {"file": str(k), "kind": "kernels", "kernels": len(rows), "skipped": dict(skipped)}
        if evidence is not None:
            source.update(soc=match_preset(evidence),
                          clock_mhz=None if evidence.clock_mhz is None else round(evidence.clock_mhz, 1))
        sources.append(source)
    if files.trace_view is not None:
        tv = read_trace_view(files.trace_view)
        traces.append(tv)
        sources.append({"file": str(files.trace_view), "kind": "trace_view", "acl_events": len(tv.acl_api_events())})
    elif files.db is not None:
        calls = HostCalls(files.db, list(iter_db_api_events(files.db)))
        traces.append(calls)
        sources.append({"file": str(files.db), "kind": "db CANN_API", "acl_events": len(calls.events)})
    elif files.api_statistic is not None:
        stats = list(iter_api_statistic(files.api_statistic))
        traces.append(stats)
        sources.append({"file": str(files.api_statistic), "kind": "api_statistic", "rows": len(stats)})


def calibrate(paths: "Iterable[str | Path] | str | Path", soc: str | None = None, *,
              signatures: bool = True) -> Calibration:
    """Fit a Calibration from profile directories or files (kernel tables and/or trace_view.json)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    paths = list(paths)
    if not paths:
        raise ProfileFormatError("calibrate needs at least one profile (a *_ascend_pt directory or a file)")
    if soc is not None:
        soc = get_soc(soc).name
    name = ", ".join(str(p) for p in paths)
    kernel_paths, links, comm_sources = calibrate_links(paths)
    records, traces, sources = read_profiles(kernel_paths)
    sources.extend(comm_sources)
    timing = fit_device(records, signatures=signatures, name=name)
    socs = socs_of(sources)
    if soc is None:
        found = sorted(set(socs.values()))
        soc = found[0] if len(found) == 1 else None
    timing.soc = soc
    builtin = default_family()
    if builtin is not None and records:
        timing.family = fit_factors(builtin, work_samples(records, socs, soc))
    for tv in traces:  # api_statistic.csv rows (per-API means) answer only for APIs no per-call source has
        if isinstance(tv, list):
            timing.host_apis.update(host_table_from_statistics(tv))
        elif not isinstance(tv, HostCalls):
            timing.host_phases.update(queue_phases(tv))
    timing.host_apis.update(host_table_of([tv for tv in traces if not isinstance(tv, list)]))
    if not timing.cores and not timing.host_apis and not links:
        raise ProfileFormatError(
            f"{', '.join(str(p) for p in paths)}: no kernel with a duration and no AscendCL API event found; give a "
            f"kernel_details.csv with Duration(us), a trace_view.json with AscendCL@aclnn* events, an "
            f"ascend_pytorch_profiler_*.db or an api_statistic.csv")
    return Calibration(timing=timing, soc=soc, sources=sources, links=links)


def socs_of(sources: list[dict]) -> dict[str, str]:
    """Kernel file -> the SoC preset its own evidence names (from ``read_profiles``' descriptions)."""
    return {d["file"]: d["soc"] for d in sources if d.get("kind") == "kernels" and d.get("soc")}


def work_samples(records: Iterable[KernelRecord], socs: dict[str, str], soc: str | None = None) -> list:
    """Measured rows as the family model sees them, each on the SoC of its own file (else ``soc``)."""
    specs: dict[str, Any] = {}
    out = []
    for r in records:
        if r.duration_us is None or r.duration_us <= 0:
            continue
        name = socs.get(r.source) or soc or "Ascend910B2"
        spec = specs.get(name) or specs.setdefault(name, get_soc(name))
        fam, flops, nbytes, bd, size = record_work(r)
        out.append(WorkSample(r.op_type, r.core, fam, flops, nbytes, bd, size, r.duration_us, spec))
    return out


__all__ = ["Calibration", "socs_of", "work_samples", "calibrate", "fit_device", "load_calibration", "read_profiles", "samples_of"]
