"""What a profile's own numbers say about its SoC: the AI Core clock and the core counts.

The clock of a kernel is ``total cycles / (time x block dim)`` from the PMU columns of a kernel table
(``aic_total_cycles`` with ``aicore_time(us)``, ``aiv_total_cycles`` with ``aiv_time(us)``); the profile's
clock is the median over its kernels. The cube core count is the largest AI_CORE / MIX_AIC block dim, the
vector core count the largest MIX_AIV block dim (AI_VECTOR_CORE kernels may run more blocks than cores, in
waves), else twice the cube count. ``match_preset`` picks the preset with those counts and the nearest clock.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from opsim.ingest.kernels import KernelTable
from opsim.device.soc import SOC_PRESETS

#: the clock is the median over the first this many kernels (a long table says nothing more about it).
_CLOCK_ROWS = 5000
_PAIRS = (("aicore_time(us)", "aic_total_cycles"), ("aiv_time(us)", "aiv_total_cycles"))


@dataclass(frozen=True)
class SocEvidence:
    """Clock (MHz, None without PMU columns), kernels it is the median of, and core counts (0: unseen)."""

    clock_mhz: float | None
    n_clock: int
    cube_cores: int
    vector_cores: int


def _float(cells: list[str], i: int | None) -> float | None:
    if i is None or i >= len(cells):
        return None
    try:
        v = float(cells[i].strip().strip('"').strip())
    except ValueError:
        return None
    return v if v == v and 0 < v < 1e20 else None


def soc_evidence(table: KernelTable) -> SocEvidence:
    """The clock and core counts a kernel table's PMU columns and block dims show."""
    col = {name: i for i, name in reversed(list(enumerate(table.header)))}
    clocks: list[float] = []
    cube = vec = 0
    for rec in table.rows:
        if rec.core in ("AI_CORE", "MIX_AIC"):
            cube = max(cube, rec.block_dim)
        elif rec.core == "MIX_AIV":
            vec = max(vec, rec.block_dim)
    by_line = dict(zip(table.lines, table.cells))
    for rec in table.rows[:_CLOCK_ROWS]:
        cells = by_line.get(rec.row)
        if cells is None or rec.block_dim <= 0:
            continue
        for t_name, c_name in _PAIRS:
            t, c = _float(cells, col.get(t_name)), _float(cells, col.get(c_name))
            if t is not None and c is not None:
                clocks.append(c / (t * rec.block_dim))
    return SocEvidence(clock_mhz=statistics.median(clocks) if clocks else None, n_clock=len(clocks),
                       cube_cores=cube, vector_cores=max(vec, 2 * cube))


def match_preset(ev: SocEvidence, default: str = "Ascend910B2") -> str:
    """The preset whose cube core count equals the evidence's and whose clock is nearest (else ``default``)."""
    cands = [s for s in SOC_PRESETS.values() if s.aicore_count == ev.cube_cores] if ev.cube_cores else []
    if not cands:
        return default
    if ev.clock_mhz is None:
        return default if any(s.name == default for s in cands) else cands[0].name
    return min(cands, key=lambda s: (abs(s.clock_mhz - ev.clock_mhz), s.name)).name


__all__ = ["SocEvidence", "match_preset", "soc_evidence"]
