"""Read torch_npu's host API table ``api_statistic.csv`` (ASCEND_PROFILER_OUTPUT/) as typed rows, streamed.

One row per host API and level: ``Level,API Name,Time(us),Count,Avg(us),Min(us),Max(us),Variance``. The
``acl`` rows name ACLNN APIs (``aclnnAdd``: phase 2, ``aclnnAddGetWorkspaceSize``: phase 1), runtime calls
(``aclrt*``), tilings (``Add_Tiling``) and others; ``node``, ``hccl`` and ``runtime`` rows are kept too.
The table has no per-call times, so it gives each API's mean, count and spread, not hit and miss apart.

Cells follow the kernel tables' rules (``opsim.ingest.kernels``): ``N/A`` and empty cells are missing,
columns in any order, extra columns ignored; a missing required column, a number that cannot be read
(not a number, NaN, infinite, beyond 1e20, a negative count or time) raise ``ProfileFormatError`` naming the
file, the row and the column.
"""
from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterator

from opsim.errors import ProfileFormatError
from opsim.ingest.csv_stream import CsvRecord, iter_csv
from opsim.ingest.kernels import _MISSING, MAX_MAGNITUDE, _unquote
from opsim.ingest.trace_view import classify_acl_name

EXPECTED = "api_statistic.csv"
#: canonical column -> header spellings.
COLUMNS: dict[str, tuple[str, ...]] = {
    "level": ("Level",),
    "api_name": ("API Name", "Api Name", "Name"),
    "time": ("Time(us)", "Total Time(us)"),
    "count": ("Count",),
    "avg": ("Avg(us)", "Average(us)"),
    "min": ("Min(us)",),
    "max": ("Max(us)",),
    "variance": ("Variance",),
}
REQUIRED = ("api_name", "count", "avg")


@dataclass(frozen=True)
class ApiStatistic:
    """One row of api_statistic.csv; ``api`` and ``kind`` classify the name as trace_view's AscendCL events
    are (``kind``: phase1, phase2, runtime, tiling or other)."""

    source: str
    row: int
    level: str
    api_name: str
    count: int
    avg_us: float
    time_us: float | None = None
    min_us: float | None = None
    max_us: float | None = None
    variance: float | None = None

    @property
    def api(self) -> str:
        return classify_acl_name(self.api_name)[0]

    @property
    def kind(self) -> str:
        return classify_acl_name(self.api_name)[1]

    @property
    def is_aclnn(self) -> bool:
        """An ACLNN phase-1 or phase-2 row (what host timing is fitted on and predicted for)."""
        return self.kind in ("phase1", "phase2")


def _columns(path: Path, header: list[str]) -> dict[str, int]:
    by_name: dict[str, int] = {}
    for i, h in enumerate(header):
        by_name.setdefault(h.strip(), i)
    out = {key: by_name[n] for key, names in COLUMNS.items() for n in reversed(names) if n in by_name}
    missing = [COLUMNS[k][0] for k in REQUIRED if k not in out]
    if missing:
        raise ProfileFormatError(
            f"{path}: row 1: missing column(s) {', '.join(repr(m) for m in missing)}; an api_statistic.csv needs "
            f"{', '.join(COLUMNS[k][0] for k in REQUIRED)}")
    return out


def _cell(path: Path, header: list[str], columns: dict[str, int], rec: CsvRecord, key: str) -> str | None:
    i = columns.get(key)
    if i is None or i >= len(rec.cells):
        return None
    v = _unquote(rec.cells[i])
    return None if v.upper() in _MISSING else v


def _number(path: Path, header: list[str], columns: dict[str, int], rec: CsvRecord, key: str,
            integer: bool = False) -> float | int | None:
    v = _cell(path, header, columns, rec, key)
    if v is None:
        return None
    what = "a whole number" if integer else "a number"
    try:
        d = Decimal(v)
    except (InvalidOperation, ValueError):
        d = None
    bad = (d is None or not d.is_finite() or d.copy_abs() > MAX_MAGNITUDE or (key != "variance" and d < 0)
           or (integer and d != d.to_integral_value()))
    if bad:
        raise ProfileFormatError(
            f"{path}: row {rec.line}, column {header[columns[key]]!r}: not {what} in [0, {MAX_MAGNITUDE:.0e}] "
            f"(got {v[:40]!r}); fix the cell or drop the row")
    return int(d) if integer else float(d)


def iter_api_statistic(path: str | Path, skipped: dict[str, int] | None = None) -> Iterator[ApiStatistic]:
    """The rows of an api_statistic.csv in file order; rows without a name, count or mean are counted in
    `skipped` by reason."""
    p = Path(path)
    records = iter_csv(p, EXPECTED)
    head = next(records, None)
    if head is None:
        raise ProfileFormatError(f"{p}: empty file; give an {EXPECTED} with its header row")
    header = head.cells
    columns = _columns(p, header)
    for rec in records:
        if not rec.cells or all(c.strip() == "" for c in rec.cells):
            continue
        row = _row(p, header, columns, rec)
        if isinstance(row, str):
            if skipped is not None:
                skipped[row] = skipped.get(row, 0) + 1
            continue
        yield row


def _row(p: Path, header: list[str], columns: dict[str, int], rec: CsvRecord) -> ApiStatistic | str:
    name = _cell(p, header, columns, rec, "api_name")
    count = _number(p, header, columns, rec, "count", integer=True)
    avg = _number(p, header, columns, rec, "avg")
    if name is None:
        return "no API name"
    if count is None or avg is None:
        return "no count or mean"
    return ApiStatistic(
        source=str(p), row=rec.line, level=_cell(p, header, columns, rec, "level") or "", api_name=name,
        count=int(count), avg_us=float(avg), time_us=_number(p, header, columns, rec, "time"),
        min_us=_number(p, header, columns, rec, "min"), max_us=_number(p, header, columns, rec, "max"),
        variance=_number(p, header, columns, rec, "variance"))


def read_api_statistic(path: str | Path) -> tuple[list[CsvRecord], list[ApiStatistic | None]]:
    """Every record of the file (header first, raw text kept, so a writer can append a column) and, parallel
    to the data records, the typed row or None for rows that are skipped (a blank record included)."""
    p = Path(path)
    raw = list(iter_csv(p, EXPECTED))
    if not raw:
        raise ProfileFormatError(f"{p}: empty file; give an {EXPECTED} with its header row")
    header = raw[0].cells
    columns = _columns(p, header)
    rows: list[ApiStatistic | None] = []
    for rec in raw[1:]:
        if not rec.cells or all(c.strip() == "" for c in rec.cells):
            rows.append(None)
            continue
        row = _row(p, header, columns, rec)
        rows.append(None if isinstance(row, str) else row)
    return raw, rows


__all__ = ["ApiStatistic", "iter_api_statistic", "read_api_statistic"]
