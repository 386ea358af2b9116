"""Stream the kernel rows of an msprof ``op_summary_*.csv`` (or a torch_npu ``kernel_details.csv``: the same
columns under other names) as ``KernelRecord``s, in bounded memory.

``read_kernels`` reads a whole table and keeps every row's text so ``opsim predict`` can write it back; this
reader keeps nothing, so a table of millions of rows can feed a calibration. Rows are read by the same
rules (``opsim.ingest.kernels``): the same column spellings, skipped rows counted by reason, the same
errors naming the file, the row and the column.

    skipped: dict[str, int] = {}
    for rec in iter_op_summary("PROF_x/mindstudio_profiler_output/op_summary_0_1_1.csv", skipped):
        ...
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterator

from opsim.errors import ProfileFormatError
from opsim.ingest.csv_stream import iter_csv
from opsim.ingest.kernels import KernelRecord, _column_index, _parse_row

EXPECTED = "op_summary_*.csv or kernel_details.csv"


def iter_op_summary(path: str | Path, skipped: dict[str, int] | None = None) -> Iterator[KernelRecord]:
    """The kernel rows of `path` in file order; rows that are not kernels are counted in `skipped` by reason."""
    p = Path(path)
    records = iter_csv(p, EXPECTED)
    header_rec = next(records, None)
    if header_rec is None:
        raise ProfileFormatError(f"{p}: empty file; give an {EXPECTED} with its header row")
    header = header_rec.cells
    columns = _column_index(p, header)
    for rec in records:
        if not rec.cells or all(c.strip() == "" for c in rec.cells):
            continue
        row, reason = _parse_row(p, header, columns, rec.line, rec.cells)
        if row is None:
            if skipped is not None:
                skipped[reason] = skipped.get(reason, 0) + 1
            continue
        yield row


__all__ = ["iter_op_summary"]
