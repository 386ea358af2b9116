"""Read kernel_details.csv (torch_npu) or op_summary_*.csv (msprof) into typed kernel records.

Real files are messy: shapes come triple-quoted (three double quotes around "4,1025;2;2"), a tensor entry may be empty (a
scalar), cells may say ``N/A``, Start Time may carry a trailing tab, and dtypes are spelled DT_BF16, BF16,
FLOAT16, FLOAT, ... Communication rows (HCCL) and rows without shapes are skipped and counted. The raw text of
every row is kept so a writer can reproduce the file byte for byte and append columns.
"""
from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any, Iterator

from opsim.acl.dtypes import DataType
from opsim.errors import InvalidArgumentError, ProfileFormatError
from opsim.ingest.csv_stream import iter_csv
from opsim.ingest.kernel_fast import FAST_PATHS, NUMBERS, PLAIN_CELL, SLOW, RowKernel, fast_integer, \
    fast_ns, fast_number, skip

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
        cell = self.cells[i]
        if cell[:1].isalnum() and cell[-1:].isalnum():  # nothing to strip or unquote (most cells)
            return cell if len(cell) > 4 or cell.upper() not in _MISSING else None
        value = _unquote(cell)
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
        v = self.raw(key)
        fast = SLOW if v is None else fast_integer(v)
        if fast is not SLOW:
            return fast
        d = self._decimal(key, "an integer")
        return None if d is None else int(d)

    def number(self, key: str) -> float | None:
        v = self.raw(key)
        fast = SLOW if v is None else fast_number(v)
        if fast is not SLOW:
            return fast
        d = self._decimal(key, "a number")
        return None if d is None else float(d)

    def ns(self, key: str) -> int | None:
        v = self.raw(key)
        fast = SLOW if v is None else fast_ns(v)
        if fast is not SLOW:
            return fast
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


def open_table(path: str | Path, *, shapeless: bool = False
               ) -> tuple["RowParser", str, Iterator[tuple[int, str, list[str]]]]:
    """(the table's row parser, raw header text with its newline, its data rows as (line, raw text with its
    newline, cells)) of a kernel table read as a stream: the header is checked first; blank rows are left out."""
    p = Path(path)
    records = iter_csv(p, "kernel_details.csv or op_summary_*.csv")
    first = next(records, None)
    if first is None:
        raise ProfileFormatError(f"{p}: empty file; give a kernel_details.csv with its header row")
    header = first.cells
    parse = RowParser(p, header, _column_index(p, header), shapeless)

    def rows() -> Iterator[tuple[int, str, list[str]]]:
        for record in records:
            cells = record.cells
            if cells and (cells[0].strip() or any(c.strip() for c in cells)):
                yield record.line, record.text, cells
    return parse, first.text, rows()


def iter_kernels(path: str | Path, *, shapeless: bool = False
                 ) -> Iterator[tuple[int, str, list[str], KernelRecord | None, str]]:
    """The data rows of a kernel table as a stream: (line, raw text with its newline, cells, record or None,
    reason skipped). The header is checked first; blank rows are left out. Memory stays that of one row.
    `shapeless` keeps rows without shapes (a MemSet's `N/A`) as records with no tensors: the importer joins
    them to the trace's kernels for their core and block dim; a fit skips them."""
    parse, header_raw, rows = open_table(path, shapeless=shapeless)
    yield 1, header_raw, parse.header, None, "header"
    for line, raw, cells in rows:
        rec, reason = parse(line, cells)
        yield line, raw, cells, rec, reason


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


#: the columns that say which kernel a row is (type, core, tensors): a long table repeats a few hundred texts.
_KERNEL_KEYS = ("core", "op_type", "input_shapes", "output_shapes", "input_dtypes", "output_dtypes",
                "input_formats", "output_formats")


class RowParser:
    """The rows of one table to records: the part a row's kernel columns (`_KERNEL_KEYS`) decide is parsed once
    per distinct text of those cells, so a long table costs its distinct kernels plus a few numbers per row."""

    def __init__(self, path: Path, header: list[str], columns: dict[str, int], shapeless: bool = False):
        self.path, self.header, self.columns, self.shapeless = path, header, columns, shapeless
        self.index = tuple(columns.get(k) for k in _KERNEL_KEYS)
        self._cells = operator.itemgetter(*(i for i in self.index if i is not None))  # core, type: two at least
        self.seen: dict[tuple, RowKernel] = {}
        self.numbers = tuple((columns.get(col), col, kind, FAST_PATHS[kind]) for _field, col, kind in NUMBERS)
        present = {col: columns[col] for _field, col, _kind in NUMBERS if col in columns}
        idx = tuple(present.values())  # (itemgetter of one index gives no tuple)
        self._number_cells = operator.itemgetter(*idx) if len(idx) > 1 else lambda cells: tuple(cells[i] for i in idx)
        self._plain = re.compile(";".join(PLAIN_CELL[col] for col in present)).fullmatch
        self.block_index = columns.get("block_dim")
        self.name_index = columns.get("name")
        self.names: dict[str | None, Any] = {}
        self.source = _source_name(path)

    def kernel_key(self, cells: list[str]) -> tuple:
        """The row's kernel cells as written (a short row's: None for each column it lacks)."""
        try:
            return self._cells(cells)
        except IndexError:
            n = len(cells)
            return tuple(None if i is None or i >= n else cells[i] for i in self.index)

    def kernel(self, line: int, cells: list[str], key: tuple | None = None) -> RowKernel:
        """`_kernel_part` of a row (parsed once per distinct `kernel_key`, which a caller may pass)."""
        if key is None:
            key = self.kernel_key(cells)
        kernel = self.seen.get(key)
        if kernel is None:
            kernel = _kernel_part(self._reader(line, cells), self.columns, self.shapeless)
            if len(self.seen) >= _SEEN_LIMIT:
                self.seen.clear()
            self.seen[key] = kernel
        return kernel

    def _reader(self, line: int, cells: list[str]) -> _RowReader:
        return _RowReader(self.path, self.header, self.columns, line, cells)

    def _numbers(self, line: int, cells: list[str]) -> list:
        """The row's `NUMBERS`, each cell checked (the plain spellings by a fast path)."""
        n, r = len(cells), None
        values = []
        for i, col, kind, fast in self.numbers:
            v = None if i is None else SLOW if i >= n else fast(cells[i])
            if v is SLOW:
                r = r or self._reader(line, cells)
                v = getattr(r, kind)(col)
            values.append(v)
        return values

    def check(self, line: int, cells: list[str], key: tuple | None = None) -> tuple[RowKernel, int]:
        """(`kernel` of the row, its block dim) with every cell `__call__` reads checked, raising the same
        error; no record is made (a skipped row's block dim is 0)."""
        kernel = self.kernel(line, cells, key)
        if kernel.reason:
            return kernel, 0
        try:  # one match for the plain spellings of all the row's numbers, each then valid
            plain = self._plain(";".join(self._number_cells(cells))) is not None
        except IndexError:  # a short row
            plain = False
        if plain:
            return kernel, 0 if self.block_index is None else int(cells[self.block_index])
        block_dim = self._numbers(line, cells)[0]
        return kernel, block_dim if block_dim is not None else 0

    def __call__(self, line: int, cells: list[str], key: tuple | None = None) -> tuple[KernelRecord | None, str]:
        """(record, "") of a kernel row, or (None, why it is skipped); every cell read is checked."""
        reason, op_type, core, in_shapes, in_dtypes, out_shapes, out_dtypes, in_formats, out_formats = \
            self.kernel(line, cells, key)
        if reason:
            return None, reason
        block_dim, start_us, start_ns, duration_us, wait_us, mix_block_dim, stream_id, task_id, step_id = \
            self._numbers(line, cells)
        i = self.name_index
        cell = None if i is None or i >= len(cells) else cells[i]
        name = self.names.get(cell, SLOW)
        if name is SLOW:  # a name cell's text is the same whatever its row
            name = self._reader(line, cells).text("name")
            if len(self.names) >= _SEEN_LIMIT:
                self.names.clear()
            self.names[cell] = name
        rec = KernelRecord(
            source=self.source, row=line, name=name or op_type, op_type=op_type, core=core,
            block_dim=block_dim if block_dim is not None else 0,
            input_shapes=in_shapes, input_dtypes=in_dtypes, output_shapes=out_shapes, output_dtypes=out_dtypes,
            input_formats=in_formats, output_formats=out_formats, start_us=start_us, start_ns=start_ns,
            duration_us=duration_us, wait_us=wait_us, mix_block_dim=mix_block_dim or 0, stream_id=stream_id,
            task_id=task_id, step_id=step_id)
        return rec, ""




def _kernel_part(r: _RowReader, columns: dict[str, int], shapeless: bool) -> RowKernel:
    """The `RowKernel` of a row (errors in its shape cells name the row)."""
    core_text = r.raw("core")
    op_type = r.text("op_type")
    if core_text is None or op_type is None:
        return skip("no op type or accelerator core")
    core = canonical_core(core_text)
    if core in COMMUNICATION_CORES:
        return skip(f"{core} (communication)")
    if not any(k in columns for k in TENSOR_COLUMNS):  # a Level0 table: every row without tensors
        in_shapes = out_shapes = ()
    else:
        in_shapes = r.shapes("input_shapes") if "input_shapes" in columns else None
        out_shapes = r.shapes("output_shapes") if "output_shapes" in columns else None
        if in_shapes is None and out_shapes is None:
            if not shapeless:
                return skip("no shapes")
            in_shapes = out_shapes = ()
    try:
        in_dtypes, out_dtypes = r.dtypes("input_dtypes"), r.dtypes("output_dtypes")
    except _UnknownDtype as exc:
        return skip(f"unknown data type {str(exc)[:40]!r}")
    if in_shapes == () and in_dtypes == ("undefined",):  # MemSet-style rows: no tensors at all
        in_dtypes = ()
    if out_shapes == () and out_dtypes == ("undefined",):
        out_dtypes = ()
    return RowKernel("", op_type, core, in_shapes or (), in_dtypes, out_shapes or (), out_dtypes,
                     r.words("input_formats"), r.words("output_formats"))


def _parse_row(path: Path, header: list[str], columns: dict[str, int], line: int,
               cells: list[str], shapeless: bool = False) -> tuple[KernelRecord | None, str]:
    """One row on its own (a table read row by row uses one `RowParser`)."""
    return RowParser(path, header, columns, shapeless)(line, cells)
