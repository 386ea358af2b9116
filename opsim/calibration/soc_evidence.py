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
from pathlib import Path

from opsim.device.soc import SOC_PRESETS
from opsim.ingest.kernels import KernelRecord, KernelTable, open_table

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


class EvidenceReader:
    """`soc_evidence` fed one row at a time (`add(record, cells)`), so a table read as a stream is never held:
    it keeps the largest block dims and the clocks of the first _CLOCK_ROWS kernels."""

    def __init__(self, header: list[str]):
        self.col = {name: i for i, name in reversed(list(enumerate(header)))}
        self.clocks: list[float] = []
        self.kernels = 0
        self.cube = self.vec = 0

    def add(self, rec: KernelRecord, cells: list[str] | None) -> None:
        self.add_kernel(rec.core, rec.block_dim, cells)

    def add_kernel(self, core: str, block_dim: int, cells: list[str] | None) -> None:
        """`add` of a kernel row given its core and block dim (no record needed)."""
        if core in ("AI_CORE", "MIX_AIC"):
            self.cube = max(self.cube, block_dim)
        elif core == "MIX_AIV":
            self.vec = max(self.vec, block_dim)
        self.kernels += 1
        if self.kernels > _CLOCK_ROWS or cells is None or block_dim <= 0:
            return
        for t_name, c_name in _PAIRS:
            t, c = _float(cells, self.col.get(t_name)), _float(cells, self.col.get(c_name))
            if t is not None and c is not None:
                self.clocks.append(c / (t * block_dim))

    def evidence(self) -> SocEvidence:
        return SocEvidence(clock_mhz=statistics.median(self.clocks) if self.clocks else None,
                           n_clock=len(self.clocks), cube_cores=self.cube, vector_cores=max(self.vec, 2 * self.cube))


def soc_evidence(table: KernelTable) -> SocEvidence:
    """The clock and core counts a kernel table's PMU columns and block dims show."""
    reader = EvidenceReader(table.header)
    by_line = dict(zip(table.lines, table.cells))
    for rec in table.rows:
        reader.add(rec, by_line.get(rec.row))
    return reader.evidence()


def table_evidence(path: "str | Path") -> SocEvidence:
    """`soc_evidence` of the kernel table at `path`, read as a stream (one row held at a time); every row is
    checked as `iter_kernels` checks it (the same first error), but no record is made."""
    parse, _header, rows = open_table(path)
    reader = EvidenceReader(parse.header)
    for line, _raw, cells in rows:
        kernel, block_dim = parse.check(line, cells)
        if not kernel.reason:
            reader.add_kernel(kernel.core, block_dim, cells)
    return reader.evidence()


def match_preset(ev: SocEvidence, default: str = "Ascend910B2") -> str:
    """The preset whose cube core count equals the evidence's and whose clock is nearest (else ``default``)."""
    cands = [s for s in SOC_PRESETS.values() if s.aicore_count == ev.cube_cores] if ev.cube_cores else []
    if not cands:
        return default
    if ev.clock_mhz is None:
        return default if any(s.name == default for s in cands) else cands[0].name
    return min(cands, key=lambda s: (abs(s.clock_mhz - ev.clock_mhz), s.name)).name


__all__ = ["EvidenceReader", "SocEvidence", "match_preset", "soc_evidence", "table_evidence"]
