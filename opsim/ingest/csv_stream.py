"""Stream the records of a profiler CSV (op_summary_*.csv, kernel_details.csv, api_statistic.csv) in bounded
memory: one physical line at a time, each record with its 1-based first line, its text and its cells. The one
CSV reader of the profile readers (`opsim.ingest.kernels`, `api_statistic`, `op_summary`).

A UTF-8 BOM and CRLF line ends are accepted; bytes that are not UTF-8 and a quoted cell never closed are
errors naming the file and line. A line longer than ``MAX_LINE_BYTES`` (``/dev/zero``, a binary file) or a
file that is not a regular file is refused before it is read, so no input makes the reader hold more than one
line.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from opsim.errors import ProfileFormatError
from opsim.safe_io import open_regular

#: the longest physical line a profiler CSV may have (a real row is a few KB; PMU-rich rows stay below 64 KiB).
MAX_LINE_BYTES = 1 << 20


@dataclass(frozen=True)
class CsvRecord:
    """One CSV record: its first line (1-based), its text as read (line ends included: a writer that copies rows
    back keeps the file's newline style) and its cells."""

    line: int
    text: str
    cells: list[str]

    @property
    def raw(self) -> str:
        """The record's text without its line end."""
        return self.text.rstrip("\r\n")


def _lines(path: Path, expected: str, consumed: list[str]) -> Iterator[str]:
    """Decoded physical lines (line ends kept); every line read is also appended to `consumed`."""
    with open_regular(path, f"a {expected}", ProfileFormatError) as f:  # a FIFO or device is refused
        number, offset = 0, 0
        while True:
            data = f.readline(MAX_LINE_BYTES + 1)
            if not data:
                return
            number += 1
            if len(data) > MAX_LINE_BYTES:
                raise ProfileFormatError(
                    f"{path}: line {number}: longer than {MAX_LINE_BYTES >> 20} MiB; this is not a {expected} "
                    f"(a binary file or a device?)")
            if number == 1 and data.startswith(b"\xef\xbb\xbf"):
                data, offset = data[3:], 3
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise ProfileFormatError(
                    f"{path}: line {number}, byte {offset + exc.start}: not UTF-8 "
                    f"({data[exc.start:exc.start + 4]!r}); re-save the {expected} as UTF-8") from None
            offset += len(data)
            consumed.append(text)
            yield text


def iter_csv(path: str | Path, expected: str) -> Iterator[CsvRecord]:
    """Every record of the CSV at `path`, header first, blank records included (callers skip them)."""
    p = Path(path)
    consumed: list[str] = []
    reader = csv.reader(_lines(p, expected, consumed))
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise ProfileFormatError(f"{p}: line {start}: not a readable CSV ({exc}); fix the quoting or export "
                                     f"the {expected} again") from None
        except OSError as exc:
            raise ProfileFormatError(f"{p}: cannot read ({exc.strerror or exc}); give a {expected}") from None
        text = "".join(consumed)
        consumed.clear()
        if text.count('"') % 2:  # a well-formed record always has an even number of quote characters
            raise ProfileFormatError(f"{p}: line {start}: a quoted cell is never closed; fix the quoting or "
                                     f"export the {expected} again")
        yield CsvRecord(start, text, cells)
        start = reader.line_num + 1
