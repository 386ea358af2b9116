"""Read kernel_details.csv (torch_npu) or op_summary_*.csv (msprof) into typed kernel records.

Real files are messy: shapes come triple-quoted (three double quotes around "4,1025;2;2"), a tensor entry may be empty (a
scalar), cells may say ``N/A``, Start Time may carry a trailing tab, and dtypes are spelled DT_BF16, BF16,
FLOAT16, FLOAT, ... Communication rows (HCCL) and rows without shapes are skipped and counted. The raw text of
every row is kept so a writer can reproduce the file byte for byte and append columns.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Iterator

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError, ProfileFormatError
from opsim.ingest.csv_stream import iter_csv

#: canonical column -> accepted header spellings (kernel_details.csv first, then msprof op_summary).
COLUMNS: dict[str, tuple[str, ...]] = {
    "step_id": ("Step Id",),
    "task_id": ("Task ID", "Task Id"),
    "stream_id": ("Stream ID", "Stream Id"),
    "name": ("Name", "Op Name"),
    "op_type": ("Type", "OP Type", "Op Type"),
    "core": ("Accelerator Core", "Task Type"),
    "start": ("Start Time(us)", "Task Start Time(us)"),
    "duration": ("Duration(us)", "Task Duration(us)"),
    "wait": ("Wait Time(us)", "Task Wait Time(us)"),
    "block_dim": ("Block Dim",),
    "mix_block_dim": ("Mix Block Dim",),
    "input_shapes": ("Input Shapes",),
    "input_dtypes": ("Input Data Types",),
    "input_formats": ("Input Formats",),
    "output_shapes": ("Output Shapes",),
    "output_dtypes": ("Output Data Types",),
    "output_formats": ("Output Formats",),
}
#: columns a kernel table must have (the rest are read when present). A profile collected at torch_npu's
#: default profiler_level Level0 has no tensor columns (shapes, dtypes, formats): its rows carry no tensors.
REQUIRED = ("op_type", "core")
TENSOR_COLUMNS = ("input_shapes", "input_dtypes", "output_shapes", "output_dtypes")

#: bound on any numeric cell (epoch times in us are ~1.7e15, ids, block dims): larger or non-finite values are damage, not data.
MAX_MAGNITUDE = Decimal("1e20")
#: bound on the elements of one tensor (2**63, the largest shape size a 64-bit int64_t dimension product holds).
MAX_ELEMENTS = 2 ** 63
_MISSING = {"", "N/A", "NA", "NONE", "NULL", "-"}
_CORE_ALIASES = {
    "AICORE": "AI_CORE", "AIC": "AI_CORE", "AI_CORE": "AI_CORE",
    "AIV": "AI_VECTOR_CORE", "AI_VECTOR_CORE": "AI_VECTOR_CORE", "AIVECTOR": "AI_VECTOR_CORE",
    "MIX_AIC": "MIX_AIC", "MIX_AIV": "MIX_AIV", "MIXAIC": "MIX_AIC", "MIXAIV": "MIX_AIV",
    "AICPU": "AI_CPU", "AI_CPU": "AI_CPU", "HCCL": "HCCL", "COMMUNICATION": "HCCL",
}
#: cores whose rows are communication, not kernels: skipped when reading.
COMMUNICATION_CORES = frozenset({"HCCL"})
#: profiler dtype spellings opsim's DataType.parse does not know by itself.
_DTYPE_SPELLINGS = {"FLOAT32": "float", "UNDEFINED": "undefined", "DT_UNDEFINED": "undefined"}


def canonical_core(text: str) -> str:
    """Normalise an Accelerator Core / Task Type cell: 'AI_VECTOR_CORE', 'MIX_AIC', 'AI_CPU', 'HCCL', ..."""
    key = text.strip().upper().replace(" ", "_").replace("-", "_")
    return _CORE_ALIASES.get(key, _CORE_ALIASES.get(key.replace("_", ""), key))


def canonical_dtype(text: str) -> str:
    """A profiler dtype spelling as opsim's dtype name ('DT_BF16' and 'BF16' -> 'bf16', 'FLOAT' -> 'float')."""
    key = text.strip()
    if key.upper() in _DTYPE_SPELLINGS:
        return _DTYPE_SPELLINGS[key.upper()]
    return DataType.parse(key).short_name


def dtype_itemsize(name: str) -> float:
    """Bytes per element of a canonical dtype name (0 for 'undefined' and types without a size)."""
    if name == "undefined":
        return 0.0
    return max(DataType.parse(name).itemsize, 0.0)


@dataclass(frozen=True, slots=True)
class KernelRecord:
    """One device kernel row of a kernel table, typed. Times in microseconds as the file gives them."""

    source: str
    row: int
    name: str
    op_type: str
    core: str
    block_dim: int
    input_shapes: tuple[tuple[int, ...], ...]
    input_dtypes: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    output_dtypes: tuple[str, ...]
    input_formats: tuple[str, ...] = ()
    output_formats: tuple[str, ...] = ()
    start_us: float | None = None
    start_ns: int | None = None
    duration_us: float | None = None
    wait_us: float | None = None
    mix_block_dim: int = 0
    stream_id: int | None = None
    task_id: int | None = None
    step_id: int | None = None

    @staticmethod
    def _elements(shape: tuple[int, ...]) -> int:
        return math.prod(max(d, 0) for d in shape)

    @property
    def input_elements(self) -> int:
        return sum(self._elements(s) for s in self.input_shapes)

    @property
    def output_elements(self) -> int:
        return sum(self._elements(s) for s in self.output_shapes)

    @staticmethod
    def _bytes(shapes: tuple[tuple[int, ...], ...], dtypes: tuple[str, ...]) -> float:
        if not shapes:
            return 0.0
        if len(dtypes) == 1 and len(shapes) > 1:  # one dtype written for all tensors
            dtypes = dtypes * len(shapes)
        return sum(KernelRecord._elements(s) * dtype_itemsize(d) for s, d in zip(shapes, dtypes))

    @property
    def input_bytes(self) -> float:
        return self._bytes(self.input_shapes, self.input_dtypes)

    @property
    def output_bytes(self) -> float:
        return self._bytes(self.output_shapes, self.output_dtypes)

    @property
    def bytes_moved(self) -> float:
        """Bytes read plus bytes written, from shapes and dtype sizes."""
        return self.input_bytes + self.output_bytes


@dataclass
class KernelTable:
    """A kernel table as read: typed rows, skip counts and the raw text to write rows back unchanged."""

    path: Path
    header: list[str]
    rows: list[KernelRecord]
    skipped: dict[str, int] = field(default_factory=dict)
    #: raw text of the header line (without its newline).
    raw_header: str = ""
    #: raw text of every data row in file order (without its newline), skipped rows included.
    raw_rows: list[str] = field(default_factory=list)
    #: parsed cells of every data row, parallel to raw_rows.
    cells: list[list[str]] = field(default_factory=list)
    #: 1-based file line of every data row, parallel to raw_rows.
    lines: list[int] = field(default_factory=list)
    newline: str = "\n"
    #: whether the file's last row ends with a newline.
    final_newline: bool = True

    @property
    def n_skipped(self) -> int:
        return sum(self.skipped.values())


class _UnknownDtype(Exception):
    """A dtype opsim has no size for: the row is skipped and counted, not fatal (newer CANN adds types)."""


#: parsed shape and dtype cells by their text: a long profile repeats the same few hundred (bounded memory).
_SHAPES_SEEN: dict[str, tuple] = {}
_DTYPES_SEEN: dict[str, tuple] = {}
_WORDS_SEEN: dict[str, tuple] = {}
_TEXT_SEEN: dict[str, str] = {}
_SEEN_LIMIT = 1 << 14


class _RowReader:
    """Parses the cells of one row, raising errors that name the file, row and column."""

    def __init__(self, path: Path, header: list[str], columns: dict[str, int], row: int, cells: list[str]):
        self.path, self.header, self.columns, self.row, self.cells = path, header, columns, row, cells

    def fail(self, key: str, value: str, what: str) -> ProfileFormatError:
        col = self.header[self.columns[key]]
        return ProfileFormatError(
            f"{self.path}: row {self.row}, column {col!r}: {what} (got {value!r}); fix the cell or drop the row")

    def raw(self, key: str) -> str | None:
        i = self.columns.get(key)
        if i is None or i >= len(self.cells):
            return None
        value = _unquote(self.cells[i])
        return None if value.upper() in _MISSING else value

    def _decimal(self, key: str, what: str) -> Decimal | None:
        v = self.raw(key)
        if v is None:
            return None
        try:
            d = Decimal(v)
        except (InvalidOperation, ValueError):
            raise self.fail(key, v, f"not {what}") from None
        if not d.is_finite() or d.copy_abs() > MAX_MAGNITUDE:
            raise self.fail(key, v, f"not a finite {what.split()[-1]} below {MAX_MAGNITUDE:.0e}")
        return d

    def integer(self, key: str) -> int | None:
        d = self._decimal(key, "an integer")
        return None if d is None else int(d)

    def number(self, key: str) -> float | None:
        d = self._decimal(key, "a number")
        return None if d is None else float(d)

    def ns(self, key: str) -> int | None:
        d = self._decimal(key, "a number")
        return None if d is None else int((d * 1000).to_integral_value())

    def shapes(self, key: str) -> tuple[tuple[int, ...], ...] | None:
        v = self.raw(key)
        if v is None:
            i = self.columns[key]
            return () if i < len(self.cells) and _unquote(self.cells[i]) == "" else None
        hit = _SHAPES_SEEN.get(v)
        if hit is not None:
            return hit
        out = []
        for entry in v.split(";"):
            entry = entry.strip()
            try:
                dims = tuple(int(d) for d in entry.split(",") if d.strip() != "")
            except ValueError:
                raise self.fail(key, v, "a shape must be comma-separated integers, tensors separated by ';'") \
                    from None
            if math.prod(max(d, 1) for d in dims) > MAX_ELEMENTS:
                raise self.fail(key, v, f"a tensor of more than {MAX_ELEMENTS:.0e} elements is not a real shape")
            out.append(dims)
        if len(_SHAPES_SEEN) >= _SEEN_LIMIT:
            _SHAPES_SEEN.clear()
        _SHAPES_SEEN[v] = result = tuple(out)
        return result

    def dtypes(self, key: str) -> tuple[str, ...]:
        v = self.raw(key)
        if v is None:
            return ()
        hit = _DTYPES_SEEN.get(v)
        if hit is not None:
            return hit
        out = []
        for entry in v.split(";"):
            entry = entry.strip()
            if entry == "":
                continue
            try:
                out.append(canonical_dtype(entry))
            except InvalidArgumentError:
                raise _UnknownDtype(entry) from None
        if len(_DTYPES_SEEN) >= _SEEN_LIMIT:
            _DTYPES_SEEN.clear()
        _DTYPES_SEEN[v] = result = tuple(out)
        return result

    def words(self, key: str) -> tuple[str, ...]:
        v = self.raw(key)
        if v is None:
            return ()
        hit = _WORDS_SEEN.get(v)
        if hit is None:
            if len(_WORDS_SEEN) >= _SEEN_LIMIT:
                _WORDS_SEEN.clear()
            hit = _WORDS_SEEN[v] = tuple(w.strip().upper() for w in v.split(";") if w.strip())
        return hit

    def text(self, key: str) -> str | None:
        """`raw`, one string object per distinct text (a million rows name a few hundred kernels)."""
        v = self.raw(key)
        if v is None:
            return None
        hit = _TEXT_SEEN.get(v)
        if hit is None:
            if len(_TEXT_SEEN) >= _SEEN_LIMIT:
                _TEXT_SEEN.clear()
            hit = _TEXT_SEEN[v] = v
        return hit


def _unquote(cell: str) -> str:
    """A cell without surrounding whitespace/tabs and the extra quotes profilers write around shapes."""
    v = cell.strip()
    while len(v) >= 2 and v[0] == '"' and v[-1] == '"':
        v = v[1:-1].strip()
    return "" if v == '"' else v


def _column_index(path: Path, header: list[str]) -> dict[str, int]:
    by_name: dict[str, int] = {}
    for i, h in enumerate(header):  # a duplicated column: its first occurrence counts
        by_name.setdefault(h.strip(), i)
    columns: dict[str, int] = {}
    for key, names in COLUMNS.items():
        for n in names:
            if n in by_name:
                columns[key] = by_name[n]
                break
    missing = [COLUMNS[k][0] for k in REQUIRED if k not in columns]
    if missing:
        raise ProfileFormatError(
            f"{path}: row 1: missing column(s) {', '.join(repr(m) for m in missing)}; a kernel table needs "
            f"{', '.join(COLUMNS[k][0] for k in REQUIRED)} (kernel_details.csv or msprof op_summary_*.csv)")
    return columns


def iter_kernels(path: str | Path, *, shapeless: bool = False
                 ) -> Iterator[tuple[int, str, list[str], KernelRecord | None, str]]:
    """The data rows of a kernel table as a stream: (line, raw text with its newline, cells, record or None,
    reason skipped). The header is checked first; blank rows are left out. Memory stays that of one row.
    `shapeless` keeps rows without shapes (a MemSet's `N/A`) as records with no tensors: the importer joins
    them to the trace's kernels for their core and block dim; a fit skips them."""
    p = Path(path)
    records = iter_csv(p, "kernel_details.csv or op_summary_*.csv")
    first = next(records, None)
    if first is None:
        raise ProfileFormatError(f"{p}: empty file; give a kernel_details.csv with its header row")
    header = first.cells
    columns = _column_index(p, header)
    yield 1, first.text, header, None, "header"
    for record in records:
        cells = record.cells
        if not cells or all(c.strip() == "" for c in cells):
            continue
        rec, reason = _parse_row(p, header, columns, record.line, cells, shapeless)
        yield record.line, record.text, cells, rec, reason


def read_kernels(path: str | Path, *, keep_raw: bool = True, shapeless: bool = False) -> KernelTable:
    """Read a kernel_details.csv / op_summary_*.csv; skipped rows are counted by reason in `skipped`. The file is
    read as a stream (`iter_kernels`); `keep_raw=False` keeps only the typed rows (what a fit needs), not the
    text to write rows back; `shapeless` keeps rows without shapes (see `iter_kernels`)."""
    p = Path(path)
    table: KernelTable | None = None
    for line, raw, cells, rec, reason in iter_kernels(p, shapeless=shapeless):
        if table is None:
            table = KernelTable(path=p, header=cells, rows=[], raw_header=raw.rstrip("\r\n"),
                                newline="\r\n" if raw.endswith("\r\n") else "\n")
            continue
        table.final_newline = raw.endswith(("\n", "\r"))
        if keep_raw:
            table.raw_rows.append(raw.rstrip("\r\n"))
            table.cells.append(cells)
            table.lines.append(line)
        if rec is None:
            table.skipped[reason] = table.skipped.get(reason, 0) + 1
        else:
            table.rows.append(rec)
    assert table is not None
    if not table.raw_rows and not table.rows and not table.skipped:
        table.final_newline = True
    return table


def _source_name(path: Path) -> str:
    """str(path), one string per file (each record names its file)."""
    text = str(path)
    return _TEXT_SEEN.setdefault(text, text)


def _parse_row(path: Path, header: list[str], columns: dict[str, int], line: int,
               cells: list[str], shapeless: bool = False) -> tuple[KernelRecord | None, str]:
    r = _RowReader(path, header, columns, line, cells)
    core_text = r.raw("core")
    op_type = r.text("op_type")
    if core_text is None or op_type is None:
        return None, "no op type or accelerator core"
    core = canonical_core(core_text)
    if core in COMMUNICATION_CORES:
        return None, f"{core} (communication)"
    if not any(k in columns for k in TENSOR_COLUMNS):  # a Level0 table: every row without tensors
        in_shapes = out_shapes = ()
    else:
        in_shapes = r.shapes("input_shapes") if "input_shapes" in columns else None
        out_shapes = r.shapes("output_shapes") if "output_shapes" in columns else None
        if in_shapes is None and out_shapes is None:
            if not shapeless:
                return None, "no shapes"
            in_shapes = out_shapes = ()
    try:
        in_dtypes, out_dtypes = r.dtypes("input_dtypes"), r.dtypes("output_dtypes")
    except _UnknownDtype as exc:
        return None, f"unknown data type {str(exc)[:40]!r}"
    if in_shapes == () and in_dtypes == ("undefined",):  # MemSet-style rows: no tensors at all
        in_dtypes = ()
    if out_shapes == () and out_dtypes == ("undefined",):
        out_dtypes = ()
    block_dim = r.integer("block_dim")
    rec = KernelRecord(
        source=_source_name(path), row=line, name=r.text("name") or op_type, op_type=op_type, core=core,
        block_dim=block_dim if block_dim is not None else 0,
        input_shapes=in_shapes or (), input_dtypes=in_dtypes,
        output_shapes=out_shapes or (), output_dtypes=out_dtypes,
        input_formats=r.words("input_formats"), output_formats=r.words("output_formats"),
        start_us=r.number("start"), start_ns=r.ns("start"), duration_us=r.number("duration"),
        wait_us=r.number("wait"), mix_block_dim=r.integer("mix_block_dim") or 0,
        stream_id=r.integer("stream_id"), task_id=r.integer("task_id"), step_id=r.integer("step_id"),
    )
    return rec, ""
