"""Link presets: the bandwidth and per-step latency of the links collectives travel over.

A link is what msprof's communication files measure per transport type: ``Bandwidth(GB/s)`` of one peer link in
one direction (GB = 1e9 bytes, so 1 GB/s = 1000 bytes/us) and, from a ``Size Distribution``, the fixed time
each message costs. The transfer model (`opsim.cluster.transfer`) reads a `LinkSpec` as the alpha-beta
parameters of HCCL's cost formulas: alpha = ``latency_us`` per step, beta = 1 / ``bandwidth_gbps``.

Provenance of the numbers (each preset's ``provenance`` says the same):

- ``hccs-910b``: fitted on the shared real profile ``../shared/real-profiles/alexnet-910b`` (torch_npu, an
  8-NPU Atlas 800T A2-class server, ranks 0 and 1, profiler levels 1 and 2): 32 ``Size Distribution`` buckets
  (224 HCCS messages of 1.2 to 18.9 MB) of the four allreduces' ``communication.json``, robust fit
  (`opsim.calibration.comm_fit`). Compared against that same profile it is measured, in-sample. The nominal
  figure is far higher: 392 GB/s per NPU over 7 HCCS links, 56 GB/s per link (Atlas 800T A2 spec sheets as
  quoted in public hardware comparisons); msprof measures 12-18 GB/s per link per direction on SDMA.
- ``local-910b``: the ``LOCAL`` rows (a rank's copy of its own chunk) of the same profile's
  ``communication_matrix.json``, 16 rows; measured, in-sample on that profile.
- ``roce-100g`` / ``roce-200g``: derived from the Ethernet line rate (100 or 200 Gbit/s / 8 bits); an upper
  bound, no RDMA transfer was measured (the shared job ran on one server). Per-step latency assumed equal to
  the fitted HCCS per-step latency: HCCL's notify/wait handshake per step, not the wire, dominates it (public
  RoCE perftest latencies are 1-5 us).
- ``pcie-gen4``: derived from PCIe 4.0 x16 (16 GT/s x 16 lanes x 128/130 / 8 bits = 31.5 GB/s per direction);
  latency assumed as for RoCE.

Calibrate them on your own job with ``opsim calibrate PROFILE`` (its ``links:`` section), then
``get_link(preset, **calibration.links[transport])``.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from opsim.ingest.transports import MAX_BANDWIDTH_GBPS, MAX_LATENCY_US, TRANSPORTS

OVERRIDABLE = ("bandwidth_gbps", "latency_us", "provenance")
"""The LinkSpec fields a scenario or calibration may replace."""


@dataclass(frozen=True)
class LinkSpec:
    """One kind of link: its transport, per-peer per-direction bandwidth and per-step latency."""

    name: str
    """The preset's name, e.g. "hccs-910b"."""
    transport: str
    """"HCCS" | "RDMA" | "PCIE" | "SIO" | "LOCAL": the Transport Type msprof reports."""
    bandwidth_gbps: float
    """GB/s (1e9 bytes/s) per direction per peer link, as msprof's Bandwidth(GB/s)."""
    latency_us: float
    """Fixed time of one step (one message), microseconds: HCCL's alpha."""
    provenance: str
    """Where the two numbers come from."""

    @property
    def us_per_byte(self) -> float:
        """HCCL's beta in microseconds per byte."""
        return 1e-3 / self.bandwidth_gbps


_HCCS_FIT = ("measured, in-sample on ../shared/real-profiles/alexnet-910b: robust fit of 32 HCCS Size "
             "Distribution buckets (224 messages, 1.2-18.9 MB) of ranks 0-1, levels 1-2 (communication.json); "
             "nominal 56 GB/s per HCCS link (392 GB/s over 7 links, Atlas 800T A2 spec)")
_ASSUMED_LATENCY = "latency assumed equal to the fitted hccs-910b per-step latency (HCCL's per-step handshake)"

_PRESETS = {
    "hccs-910b": LinkSpec("hccs-910b", "HCCS", 17.24, 14.85, _HCCS_FIT),
    "local-910b": LinkSpec("local-910b", "LOCAL", 436.6, 0.0,
                           "measured, in-sample on ../shared/real-profiles/alexnet-910b: robust fit of 16 LOCAL "
                           "rows (own-chunk copies, 2.5-37.8 MB) of communication_matrix.json; latency fitted "
                           "through the origin"),
    "roce-100g": LinkSpec("roce-100g", "RDMA", 12.5, 14.85,
                          f"derived: 100 Gbit/s Ethernet line rate / 8 (an upper bound, no RDMA measured); "
                          f"{_ASSUMED_LATENCY}"),
    "roce-200g": LinkSpec("roce-200g", "RDMA", 25.0, 14.85,
                          f"derived: 200 Gbit/s Ethernet line rate / 8 (the 200GE RoCE port of each NPU of an "
                          f"Atlas 800T A2; an upper bound, no RDMA measured); {_ASSUMED_LATENCY}"),
    "pcie-gen4": LinkSpec("pcie-gen4", "PCIE", 31.5, 14.85,
                          f"derived: PCIe 4.0 x16, 16 GT/s x 16 lanes x 128/130 / 8 per direction; "
                          f"{_ASSUMED_LATENCY}"),
}
LINK_PRESETS: Mapping[str, LinkSpec] = MappingProxyType(_PRESETS)
"""Every preset by name (read-only)."""


def _number(value: Any, field: str, name: str, *, zero_ok: bool, limit: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"link {name}: {field} must be a number, got {type(value).__name__} {value!r:.60}")
    try:
        out = float(value)
    except OverflowError:
        out = math.inf
    if not math.isfinite(out) or out < 0 or (out == 0 and not zero_ok) or out > limit:
        low = ">= 0" if zero_ok else "> 0"
        raise ValueError(f"link {name}: {field} must be finite, {low} and at most {limit:g}, got {value!r:.60}")
    return out


def check_link(spec: LinkSpec) -> LinkSpec:
    """`spec` when its numbers are usable (positive finite bandwidth, finite latency >= 0), else ValueError."""
    _number(spec.bandwidth_gbps, "bandwidth_gbps", spec.name, zero_ok=False, limit=MAX_BANDWIDTH_GBPS)
    _number(spec.latency_us, "latency_us", spec.name, zero_ok=True, limit=MAX_LATENCY_US)
    if spec.transport not in TRANSPORTS:
        raise ValueError(f"link {spec.name}: transport {spec.transport!r} is not one of {', '.join(TRANSPORTS)}")
    return spec


def get_link(name: str, **overrides: Any) -> LinkSpec:
    """The preset `name` with `overrides` (bandwidth_gbps, latency_us, provenance) replaced.

    Raises ValueError naming the known presets for an unknown name, the accepted fields for an unknown override
    and the allowed range for a bad number (callers wrap it in their own error with the file and field)."""
    spec = LINK_PRESETS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise ValueError(f"unknown link preset {name!r:.60}; known presets: {', '.join(LINK_PRESETS)}")
    if not overrides:
        return spec
    unknown = sorted(str(k) for k in overrides if k not in OVERRIDABLE)
    if unknown:
        raise ValueError(f"link {name}: unknown field(s) {', '.join(unknown)}; a link accepts preset and "
                         f"{', '.join(OVERRIDABLE)}")
    changes: dict[str, Any] = {}
    for key in ("bandwidth_gbps", "latency_us"):
        if key in overrides:
            changes[key] = _number(overrides[key], key, name, zero_ok=key == "latency_us",
                                   limit=MAX_BANDWIDTH_GBPS if key == "bandwidth_gbps" else MAX_LATENCY_US)
    if "provenance" in overrides:
        changes["provenance"] = str(overrides["provenance"])
    elif changes:
        said = ", ".join(f"{k}={v:g}" for k, v in changes.items())
        changes["provenance"] = f"{said} given (over preset {name}: {spec.provenance})"
    return dataclasses.replace(spec, **changes)


def resolve_link(spec: Mapping[str, Any], default: str, calibrated: Mapping[str, Any] | None = None) -> Any:
    """The LinkSpec of a scenario's link mapping: its preset, a calibration's fit for that transport over it,
    then the fields the scenario sets."""
    preset = str(spec.get("preset", default))
    fitted = (calibrated or {}).get(get_link(preset).transport) or {}
    overrides = {k: fitted[k] for k in ("bandwidth_gbps", "latency_us") if k in fitted}
    overrides.update({k: v for k, v in spec.items() if k != "preset"})
    return get_link(preset, **overrides)


__all__ = ["resolve_link", "LinkSpec", "LINK_PRESETS", "MAX_BANDWIDTH_GBPS", "MAX_LATENCY_US", "TRANSPORTS", "OVERRIDABLE",
           "check_link", "get_link"]
