"""trace.json's writing machinery: the text writer, row templates' shared helpers and time checks.

Events are rows of `Template`s filled from numpy columns a block at a time (see chrome_trace.py); these helpers
are shared by the host (chrome_host.py) and device (chrome_device.py) tracks.
"""
from __future__ import annotations

import codecs
import io
from typing import Any, TextIO

import numpy as np

from opsim.errors import InvalidArgumentError
from opsim.trace.json_rows import Pieces, Template, json_value
from opsim.trace.timefmt import JSON_US_MAX, round3_ns

OP_CALL = "op_call"
HOST_PID = 1
DEVICE_PID_BASE = 100
HOST_FUNC = "HOST_FUNC"

BLOCK = 1 << 16
"""Events formatted per compiled call (a block of about 10 MB of text)."""

class TraceWriter:
    """trace.json's text: the opening, then events joined by ",\\n" (written in blocks), then the closing."""

    def __init__(self, fh: TextIO) -> None:
        self.fh = fh
        # the text is ASCII: a UTF-8 (or ASCII) file takes the bytes as they are, without decoding them
        plain = isinstance(fh, io.TextIOWrapper) and codecs.lookup(fh.encoding).name in ("utf-8", "ascii")
        self.raw = fh.buffer if plain else None
        if self.raw is not None:
            fh.flush()
        self.n = 0
        self._first = True
        self.shared = Pieces()

    def _put(self, data: Any) -> None:
        if self.raw is not None:
            self.raw.write(data)
        else:
            self.fh.write(bytes(data).decode("ascii"))

    def _rows(self, data: Any, n: int) -> None:
        if len(data) and self._first:
            data, self._first = data[2:], False  # the first event has no separator
        self.n += n
        self._put(data)

    def text(self, text: str) -> None:
        self._put(text.encode("ascii"))

    def events(self, texts: list[str]) -> None:
        """Events formatted by Python (metadata, instants, values of unusual types)."""
        if texts:
            self._rows("".join(",\n" + t for t in texts).encode("ascii"), len(texts))

    def block(self, template: Template, n: int, cols: dict[str, Any], own: Pieces | None = None,
              per_row: int = 1) -> None:
        self._rows(template.render(n, cols, self.shared, own), n * per_row)

    def lookup(self, values: list, codes: Any, text: Any = json_value) -> Any:
        """Shared-piece codes of `text(values[c])` for every code in `codes` (-1 where text gives None)."""
        table = np.full(max(len(values), 1), -1, dtype=np.int64)
        for c in np.unique(codes).tolist():
            t = text(values[c])
            if t is not None:
                table[c] = self.shared.code(t)
        return table


def check_us(*arrays: Any) -> None:
    """Times (ns) that `put_json_us` writes exactly: within JSON_US_MAX (about 11.6 days of simulated time)."""
    for a in arrays:
        if len(a) and (int(a.max()) >= JSON_US_MAX or int(a.min()) <= -JSON_US_MAX):
            raise InvalidArgumentError(f"trace.json: a time beyond {JSON_US_MAX // 10**9} s of simulated time "
                                       "cannot be written exactly; shorten the scenario or write no trace.json "
                                       "(`outputs: {trace: false}` or `--set outputs.trace=false`)")


def time_column(rec: Any, kind: str, name: str) -> Any:
    """A time column as float64 (ints are times too)."""
    arr, odd = rec.numeric(kind, name, "d")
    bad = [v for v in odd.values() if type(v) not in (int, float)]
    if bad:
        raise InvalidArgumentError(f"recorder {kind} records: {name} {bad[0]!r} is not a number of microseconds")
    return arr


def dur_texts(own: Pieces, starts: Any, ends: Any, durs: Any) -> tuple[Any, Any]:
    """Durations as nanoseconds when the written double is the plain quotient (its text is then exact), else
    as the text of the double (a piece of `own`)."""
    diff = ends - starts
    alt = np.full(len(durs), -1, dtype=np.int64)
    inexact = np.flatnonzero(durs != diff / 1000.0)
    if len(inexact):  # few distinct values: each is formatted once
        distinct, which = np.unique(durs[inexact], return_inverse=True)
        alt[inexact] = own.add(list(map(repr, distinct.tolist())))[which]
    return diff, alt


def rounded_texts(own: Pieces, values: Any) -> tuple[Any, Any]:
    """``round(v, 3)`` as thousandths, or as its text (a piece of `own`) where that is not certain."""
    k, ok = round3_ns(values)
    alt = np.full(len(values), -1, dtype=np.int64)
    doubt = np.flatnonzero(~ok)
    alt[doubt] = own.add([repr(round(v, 3)) for v in values[doubt].tolist()])
    return k, alt


def track_order(s: Any, e: Any, rid: Any) -> Any:
    """The permutation that sorts a track's slices by (start, -end, record order), for `rid` ascending: a stable
    sort by start (records come nearly in start order), then the few runs of equal starts by (-end, rid)."""
    perm = np.argsort(s, kind="stable")
    ss = s[perm]
    tied = np.zeros(len(perm), dtype=bool)
    same = np.flatnonzero(ss[1:] == ss[:-1])
    tied[same] = True
    tied[same + 1] = True
    at = np.flatnonzero(tied)
    if len(at):
        sub = perm[at]
        perm[at] = sub[np.lexsort((rid[sub], -e[sub], s[sub]))]
    return perm
