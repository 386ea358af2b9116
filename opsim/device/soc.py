"""SoC presets: the hardware numbers the device model and the cost model read.

Every number carries its provenance in ``SocSpec.provenance`` (field name -> text that starts with one of
"measured", "vendor table", "derived" or "assumed"), and docs/device.md prints the same table. "vendor table"
means CANN's platform configuration file ``data/platform_config/<SoC>.ini`` (``[SoCInfo]`` ai_core_cnt,
vector_core_cnt, ai_cpu_cnt, memory_size; ``[AICoreSpec]`` cube_freq) as published. Peak FP16 throughput is
always derived: cube cores x 16^3 MACs per cycle x 2 FLOP per MAC x clock.

Units: sizes in bytes, clock in MHz, FLOP/s for peak, bandwidths in GB/s (1 GB/s = 1e9 bytes/s =
1000 bytes/us; ``*_bytes_per_us`` properties convert), latencies in microseconds.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Mapping

from opsim.errors import InvalidArgumentError

GiB = 1 << 30
MiB = 1 << 20
CUBE_MACS_PER_CYCLE = 16 * 16 * 16
"""FP16 multiply-accumulates one cube unit completes per cycle (16x16x16 fractal)."""

PROVENANCE_KINDS = ("measured", "vendor table", "derived", "assumed")

_NUMBER_FIELDS = (
    "aicore_count", "vector_core_count", "aicpu_count", "hbm_bytes", "l2_bytes", "clock_mhz", "max_streams",
    "stream_depth", "peak_fp16_flops", "hbm_bandwidth_gbps", "h2d_bandwidth_gbps", "d2h_bandwidth_gbps",
    "memcpy_latency_us", "memcpy_engines",
)
_INT_FIELDS = frozenset({"aicore_count", "vector_core_count", "aicpu_count", "hbm_bytes", "l2_bytes",
                         "max_streams", "stream_depth", "memcpy_engines"})
_MAY_BE_ZERO = frozenset({"vector_core_count", "l2_bytes", "memcpy_latency_us"})


@dataclass(frozen=True)
class SocSpec:
    """One SoC's numbers. ``vector_core_count`` 0 means no separate vector cores (vector work runs on the
    AI Cores, as on Ascend910A)."""

    name: str
    aicore_count: int
    """AI Core (cube) count: ai_core_cnt / cube_core_cnt."""
    vector_core_count: int
    aicpu_count: int
    hbm_bytes: int
    l2_bytes: int
    clock_mhz: float
    max_streams: int
    stream_depth: int
    """Tasks one stream holds before the host's submit would block."""
    peak_fp16_flops: float
    """FLOP/s (derived: aicore_count x 16^3 x 2 x clock)."""
    hbm_bandwidth_gbps: float
    h2d_bandwidth_gbps: float
    d2h_bandwidth_gbps: float
    memcpy_latency_us: float
    """Fixed cost of one async memcpy task on the device (added to bytes / bandwidth)."""
    memcpy_engines: int
    """Copy engines shared by all streams; memcpy tasks queue for one."""
    provenance: Mapping[str, str] = field(default_factory=dict, compare=False)

    # Unit conversions used on the hot path.
    @property
    def peak_flops_per_us(self) -> float:
        return self.peak_fp16_flops / 1e6

    @property
    def hbm_bytes_per_us(self) -> float:
        return self.hbm_bandwidth_gbps * 1e3

    @property
    def h2d_bytes_per_us(self) -> float:
        return self.h2d_bandwidth_gbps * 1e3

    @property
    def d2h_bytes_per_us(self) -> float:
        return self.d2h_bandwidth_gbps * 1e3

    @property
    def d2d_bytes_per_us(self) -> float:
        """A device-to-device copy reads and writes HBM, so it moves at half the HBM bandwidth (derived)."""
        return self.hbm_bandwidth_gbps * 1e3 / 2.0

    def provenance_kind(self, field_name: str) -> str:
        """The provenance category of ``field_name``: measured, vendor table, derived or assumed."""
        text = self.provenance.get(field_name, "")
        for kind in PROVENANCE_KINDS:
            if text.startswith(kind):
                return kind
        raise InvalidArgumentError(f"SoC field {field_name!r} has no provenance; fields: {', '.join(_NUMBER_FIELDS)}")

    def numbers(self) -> dict[str, Any]:
        """Field name -> value for every number (for tables and docs)."""
        return {f: getattr(self, f) for f in _NUMBER_FIELDS}


def derive_peak_fp16_flops(aicore_count: int, clock_mhz: float) -> float:
    """Peak FP16 FLOP/s: cube cores x 16^3 MACs x 2 FLOP x clock."""
    return float(aicore_count * CUBE_MACS_PER_CYCLE * 2 * clock_mhz * 1e6)


_INI = "vendor table (CANN platform_config {soc}.ini, {key})"
_PEAK = "derived (aicore_count x 16^3 MACs x 2 x clock)"
_STREAMS = "assumed (runtime stream limit; not checked against a vendor table)"
_DEPTH = "assumed (runtime task-queue depth per stream; not checked against a vendor table)"
_MEMCPY_LAT = "assumed (typical async-copy launch-to-start latency)"
_ENGINES = "assumed (one copy engine: concurrent copies share the link bandwidth)"
_PCIE = "assumed (PCIe 4.0 x16 effective host<->device bandwidth)"


def _preset(name: str, values: dict[str, Any], provenance: dict[str, str]) -> SocSpec:
    values = dict(values)
    values["peak_fp16_flops"] = derive_peak_fp16_flops(values["aicore_count"], values["clock_mhz"])
    prov = dict(provenance)
    prov["peak_fp16_flops"] = _PEAK
    missing = [f for f in _NUMBER_FIELDS if f not in prov]
    if missing:  # a table bug, caught at import time
        raise AssertionError(f"preset {name} lacks provenance for {missing}")
    return SocSpec(name=name, provenance=MappingProxyType(prov), **values)


def _ascend910b(soc: str, cores: int, hbm_gib: int, l2_mib: int, clock: float, clock_prov: str,
                hbm_bw: float, cores_prov: str, hbm_prov: str, aicpu_prov: str, l2_prov: str) -> SocSpec:
    return _preset(soc, dict(
        aicore_count=cores, vector_core_count=2 * cores, aicpu_count=6, hbm_bytes=hbm_gib * GiB,
        l2_bytes=l2_mib * MiB, clock_mhz=clock, max_streams=1024, stream_depth=1024,
        hbm_bandwidth_gbps=hbm_bw, h2d_bandwidth_gbps=25.0, d2h_bandwidth_gbps=25.0, memcpy_latency_us=2.0,
        memcpy_engines=1,
    ), dict(
        aicore_count=cores_prov, vector_core_count=cores_prov, aicpu_count=aicpu_prov, hbm_bytes=hbm_prov,
        l2_bytes=l2_prov, clock_mhz=clock_prov, max_streams=_STREAMS, stream_depth=_DEPTH,
        hbm_bandwidth_gbps="assumed (HBM2e, 1.2-1.6 TB/s class)", h2d_bandwidth_gbps=_PCIE,
        d2h_bandwidth_gbps=_PCIE, memcpy_latency_us=_MEMCPY_LAT, memcpy_engines=_ENGINES,
    ))


def _build_presets() -> dict[str, SocSpec]:
    presets: dict[str, SocSpec] = {}
    b2 = "Ascend910B2"
    presets[b2] = _ascend910b(
        b2, 24, 64, 192, 1800.0, _INI.format(soc=b2, key="cube_freq") + "; measured 1800 MHz (median PMU "
        "clock of the public AlexNet 910B profile, 24 cube / 48 vector)", 1600.0,
        _INI.format(soc=b2, key="cube_core_cnt / vector_core_cnt"), _INI.format(soc=b2, key="memory_size"),
        _INI.format(soc=b2, key="ai_cpu_cnt"), _INI.format(soc=b2, key="l2_size"))
    b1 = "Ascend910B1"
    presets[b1] = _ascend910b(
        b1, 24, 64, 192, 1850.0, "measured (median aic_total_cycles / (aicore_time x block dim) of "
        "tests/data/real/kernel_details_910b_training.csv, 24 cube / 48 vector block dims: 1850 MHz)", 1600.0,
        _INI.format(soc=b1, key="cube_core_cnt / vector_core_cnt"), _INI.format(soc=b1, key="memory_size"),
        _INI.format(soc=b1, key="ai_cpu_cnt"), _INI.format(soc=b1, key="l2_size"))
    b3 = "Ascend910B3"
    presets[b3] = _ascend910b(
        b3, 20, 64, 192, 1800.0, "measured (median PMU clock of tests/data/real/kernel_details_910b_matmul.csv, "
        "a 20 cube / 40 vector profile: 1800 MHz)", 1600.0,
        "measured (largest AI_CORE / MIX_AIC block dim 20 and AI_VECTOR_CORE 40 in "
        "tests/data/real/kernel_details_910b_matmul.csv)", "assumed (64 GiB HBM like Ascend910B2)",
        "assumed (6 like the other 910B parts)", "assumed (192 MiB like Ascend910B2)")
    b4 = "Ascend910B4"
    presets[b4] = _ascend910b(
        b4, 20, 32, 96, 1650.0, "measured (median PMU clock of a real 910B4-class profile, 20 cube / 40 vector, "
        "CANN 8.3: 1650 MHz; ../shared/real-profiles/README.md 'Facts'; the 1500 MHz quoted before contradicted "
        "it)", 1200.0,
        _INI.format(soc=b4, key="cube_core_cnt / vector_core_cnt"), _INI.format(soc=b4, key="memory_size"),
        _INI.format(soc=b4, key="ai_cpu_cnt"), _INI.format(soc=b4, key="l2_size"))
    a = "Ascend910A"
    presets[a] = _preset(a, dict(
        aicore_count=32, vector_core_count=0, aicpu_count=14, hbm_bytes=32 * GiB, l2_bytes=32 * MiB,
        clock_mhz=1000.0, max_streams=1024, stream_depth=1024, hbm_bandwidth_gbps=1200.0,
        h2d_bandwidth_gbps=12.0, d2h_bandwidth_gbps=12.0, memcpy_latency_us=2.0, memcpy_engines=1,
    ), dict(
        aicore_count="vendor table (Ascend 910: 32 Da Vinci AI Cores)",
        vector_core_count="vendor table (no separate vector cores: vector units live in the AI Cores)",
        aicpu_count="assumed (14 of the 16 on-chip ARM cores serve as AI CPUs)",
        hbm_bytes="vendor table (32 GiB HBM2)", l2_bytes="assumed (32 MiB on-chip L2)",
        clock_mhz="assumed (1000 MHz; gives the vendor's ~256 TFLOPS FP16 class)",
        max_streams=_STREAMS, stream_depth=_DEPTH, hbm_bandwidth_gbps="assumed (HBM2, 1.2 TB/s class)",
        h2d_bandwidth_gbps="assumed (PCIe 3.0 x16 effective)", d2h_bandwidth_gbps="assumed (PCIe 3.0 x16 effective)",
        memcpy_latency_us=_MEMCPY_LAT, memcpy_engines=_ENGINES,
    ))
    p3 = "Ascend310P3"
    presets[p3] = _preset(p3, dict(
        aicore_count=8, vector_core_count=7, aicpu_count=7, hbm_bytes=24 * GiB, l2_bytes=16 * MiB,
        clock_mhz=1080.0, max_streams=1024, stream_depth=1024, hbm_bandwidth_gbps=204.8,
        h2d_bandwidth_gbps=12.0, d2h_bandwidth_gbps=12.0, memcpy_latency_us=2.0, memcpy_engines=1,
    ), dict(
        aicore_count=_INI.format(soc=p3, key="ai_core_cnt"), vector_core_count=_INI.format(soc=p3, key="vector_core_cnt"),
        aicpu_count=_INI.format(soc=p3, key="ai_cpu_cnt"),
        hbm_bytes="vendor table (24 GB LPDDR4X device memory, taken as 24 GiB)",
        l2_bytes=_INI.format(soc=p3, key="l2_size"),
        clock_mhz="assumed (1080 MHz; gives the ~70 TFLOPS FP16 class of an Atlas 300I Pro)",
        max_streams=_STREAMS, stream_depth=_DEPTH,
        hbm_bandwidth_gbps="assumed (LPDDR4X, 204.8 GB/s class; not HBM on this part)",
        h2d_bandwidth_gbps="assumed (PCIe 4.0 x16 at half efficiency)",
        d2h_bandwidth_gbps="assumed (PCIe 4.0 x16 at half efficiency)",
        memcpy_latency_us=_MEMCPY_LAT, memcpy_engines=_ENGINES,
    ))
    return presets


SOC_PRESETS: Mapping[str, SocSpec] = MappingProxyType(_build_presets())
"""SoC name -> preset. Names are CANN's SoC version strings."""

DEFAULT_SOC = "Ascend910B2"


SOC_FIELD_MAX: Mapping[str, float] = MappingProxyType({
    "aicore_count": 4096, "vector_core_count": 4096, "aicpu_count": 4096, "memcpy_engines": 4096,
    "max_streams": 65536, "stream_depth": 1 << 20, "hbm_bytes": 1 << 50, "l2_bytes": 1 << 40,
    "clock_mhz": 1e5, "peak_fp16_flops": 1e18, "hbm_bandwidth_gbps": 1e6, "h2d_bandwidth_gbps": 1e6,
    "d2h_bandwidth_gbps": 1e6, "memcpy_latency_us": 1e6,
})
"""Largest value an override may give each SoC number: opsim's sanity bounds (not hardware facts), 50x or
more above every preset, so that counts stay small integers and rates and times stay far from float overflow."""


def _check_value(name: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidArgumentError(f"SoC field {name!r} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise InvalidArgumentError(f"SoC field {name!r} must be a finite number, got {value!r}")
    if value > SOC_FIELD_MAX[name]:
        raise InvalidArgumentError(f"SoC field {name!r} must be <= {SOC_FIELD_MAX[name]:g} (opsim's bound), "
                                   f"got {value!r}")
    if name in _INT_FIELDS:
        if value != int(value):
            raise InvalidArgumentError(f"SoC field {name!r} must be a whole number, got {value!r}")
        value = int(value)
    else:
        value = float(value)
    if value < 0 or (value == 0 and name not in _MAY_BE_ZERO) or value != value:
        bound = ">= 0" if name in _MAY_BE_ZERO else "> 0"
        raise InvalidArgumentError(f"SoC field {name!r} must be {bound}, got {value!r}")
    return value


def get_soc(name: str = DEFAULT_SOC, **overrides: Any) -> SocSpec:
    """The preset ``name`` (case-insensitive), with ``overrides`` applied.

    Overridden numbers get provenance "assumed (override)". ``peak_fp16_flops`` is re-derived from the
    core count and clock unless it is overridden itself.
    """
    spec = SOC_PRESETS.get(name) if isinstance(name, str) else None
    if spec is None and isinstance(name, str):
        folded = {k.lower(): v for k, v in SOC_PRESETS.items()}
        spec = folded.get(name.strip().lower())
    if spec is None:
        raise InvalidArgumentError(f"unknown SoC {name!r}; accepted names: {', '.join(SOC_PRESETS)}")
    if not overrides:
        return spec
    unknown = sorted(k for k in overrides if k not in _NUMBER_FIELDS)
    if unknown:
        raise InvalidArgumentError(
            f"unknown SoC field(s) {', '.join(unknown)}; fields that can be overridden: {', '.join(_NUMBER_FIELDS)}")
    values = {k: _check_value(k, v) for k, v in overrides.items()}
    prov = dict(spec.provenance)
    for k in values:
        prov[k] = "assumed (override)"
    if "peak_fp16_flops" not in values:
        values["peak_fp16_flops"] = derive_peak_fp16_flops(values.get("aicore_count", spec.aicore_count),
                                                           values.get("clock_mhz", spec.clock_mhz))
    return dataclasses.replace(spec, provenance=MappingProxyType(prov), **values)


def soc_table() -> list[dict[str, Any]]:
    """One row per preset: name plus every number (docs and the CLI print this)."""
    return [{"name": s.name, **s.numbers()} for s in SOC_PRESETS.values()]
