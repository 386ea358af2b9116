"""Rows of JSON text filled from integer columns by one compiled loop: how trace.json writes millions of events.

A `Template` is a row's text as a sequence of parts: constant text, integers, simulated times (integer
nanoseconds written as JSON microseconds by `opsim.trace.timefmt.put_json_us`), pieces of text picked per row
from a `Pieces` table (names, argument fragments, the rare value Python formats itself), a whole row's text
picked per row, and skips (leave out the next parts when a column is negative, or not). `render` writes a block
of rows, each preceded by ",\\n", into one bytes object: no Python object per row, no float formatting.
"""
from __future__ import annotations

import json
from typing import Any, Sequence

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from opsim.trace.timefmt import compiled

put_json_us = compiled().put_json_us
put_digits = compiled().put_digits
put_us_text = compiled().put_us_text

_CONST, _INT, _US, _PIECE, _ROW, _SKIP_NEG, _SKIP_NONNEG, _STOP_NONNEG, _US_TEXT = range(9)
_INT_WIDTH = 20
_US_WIDTH = 22  # sign, 16 digits, point, 3 decimals


def json_value(value: Any) -> str:
    """A value as compact JSON, as `json.dumps` writes it inside an event (strings escaped to ASCII)."""
    return json.dumps(value, separators=(",", ":"), default=str)


class Pieces:
    """Text pieces with small-int codes (assigned on first sight), packed for the compiled loop (ASCII text, or
    any text with ``encoding="utf-8"``)."""

    def __init__(self, encoding: str = "ascii") -> None:
        self._encoding = encoding
        self._codes: dict[str, int] = {}
        self._texts: list[bytes] = []
        self._packed: tuple[np.ndarray, np.ndarray] | None = None
        self.longest = 0

    def __len__(self) -> int:
        return len(self._texts)

    def code(self, text: str) -> int:
        """The code of `text` (ASCII: JSON as `json_value` writes it, or plain punctuation)."""
        c = self._codes.get(text)
        if c is None:
            raw = text.encode(self._encoding)
            c = self._codes[text] = len(self._texts)
            self._texts.append(raw)
            self.longest = max(self.longest, len(raw))
            self._packed = None
        return c

    def add(self, texts: Sequence[str]) -> np.ndarray:
        """Codes of `texts` appended as new pieces (no look-up: for pieces used once, such as a block's own)."""
        first = len(self._texts)
        raw = [t.encode(self._encoding) for t in texts]
        self._texts.extend(raw)
        if raw:
            self.longest = max(self.longest, max(map(len, raw)))
            self._packed = None
        return np.arange(first, first + len(raw), dtype=np.int64)

    def codes(self, texts: Sequence[str]) -> np.ndarray:
        """Codes of `texts` as an int64 array (for lookups by another code: ``table[codes]``)."""
        return np.array([self.code(t) for t in texts], dtype=np.int64)

    def packed(self) -> tuple[np.ndarray, np.ndarray]:
        if self._packed is None:
            off = np.zeros(len(self._texts) + 1, dtype=np.int64)
            if self._texts:
                off[1:] = np.cumsum([len(t) for t in self._texts])
            buf = np.frombuffer(b"".join(self._texts) or b"\0", dtype=np.uint8)
            self._packed = (buf, off)
        return self._packed


class Template:
    """One kind of row. Parts: a str (constant text), or a tuple naming a column:
    ``("int", col)``, ``("us", col)`` (nanoseconds), ``("us_text", col)`` (nanoseconds as
    `opsim.trace.timefmt.us_text` writes them), ``("piece", col, table)`` (table 0 the shared pieces,
    1 the block's own; a negative code writes nothing), ``("row", col)`` (a whole row from the block's own
    pieces: nothing else of the row is written), ``("skip_neg", col, n)`` / ``("skip_nonneg", col, n)``
    (leave out the next n parts when the column's value is negative / not negative), ``("stop_nonneg", col)``
    (end the row here when the column's value is not negative)."""

    def __init__(self, parts: Sequence[Any]) -> None:
        kinds, a, b, consts = [], [], [], []
        self.columns: list[str] = []
        self._bound = 2
        self._table_parts: list[int] = []
        for part in parts:
            if isinstance(part, str):
                kinds.append(_CONST)
                a.append(len(consts))
                b.append(0)
                consts.append(part.encode("ascii"))
                self._bound += len(consts[-1])
                continue
            what, col, *extra = part
            if col not in self.columns:
                self.columns.append(col)
            a.append(self.columns.index(col))
            if what == "int":
                kinds.append(_INT)
                b.append(0)
                self._bound += _INT_WIDTH
            elif what in ("us", "us_text"):
                kinds.append(_US if what == "us" else _US_TEXT)
                b.append(0)
                self._bound += _US_WIDTH
            elif what == "piece":
                kinds.append(_PIECE)
                b.append(extra[0])
                self._table_parts.append(extra[0])
            elif what == "row":
                kinds.append(_ROW)
                b.append(1)
                self._table_parts.append(1)
            elif what == "stop_nonneg":
                kinds.append(_STOP_NONNEG)
                b.append(0)
            elif what in ("skip_neg", "skip_nonneg"):
                kinds.append(_SKIP_NEG if what == "skip_neg" else _SKIP_NONNEG)
                b.append(extra[0])
            else:
                raise ValueError(f"unknown template part {part!r}")
        self._kinds = np.array(kinds, dtype=np.int64)
        self._a = np.array(a, dtype=np.int64)
        self._b = np.array(b, dtype=np.int64)
        off = np.zeros(len(consts) + 1, dtype=np.int64)
        off[1:] = np.cumsum([len(c) for c in consts]) if consts else []
        self._const = np.frombuffer(b"".join(consts) or b"\0", dtype=np.uint8)
        self._const_off = off

    def render(self, n: int, cols: dict[str, np.ndarray], shared: Pieces, own: Pieces | None = None) -> Any:
        """`n` rows (each preceded by ",\\n") from `cols` (column name -> n integers), as ASCII bytes in a
        numpy uint8 array (write it as it is: no copy)."""
        if n == 0:
            return np.empty(0, dtype=np.uint8)
        own = own if own is not None else _EMPTY
        table = np.empty((len(self.columns), n), dtype=np.int64)
        for i, name in enumerate(self.columns):
            table[i] = cols[name]
        row_bound = self._bound + sum(shared.longest if t == 0 else own.longest for t in self._table_parts)
        out = np.empty(n * row_bound, dtype=np.uint8)
        buf0, off0 = shared.packed()
        buf1, off1 = own.packed()
        end = _render(self._kinds, self._a, self._b, self._const, self._const_off, buf0, off0, buf1, off1,
                      table, out)
        return out[:end]


_EMPTY = Pieces()


@intrinsic
def _memcpy(typingctx, dst, dst_pos, src, src_pos, n):
    """Copy n bytes from uint8 array `src` at `src_pos` to `dst` at `dst_pos` with one memcpy: a byte loop
    costs about three times as much for the short copies rows are made of."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d = context.make_array(signature.args[0])(context, builder, args[0])
        s = context.make_array(signature.args[2])(context, builder, args[2])
        cgutils.raw_memcpy(builder, builder.gep(d.data, [args[1]]), builder.gep(s.data, [args[3]]), args[4], 1)

    return sig, codegen


@njit(cache=True, inline="always")
def _copy(out, pos, src, lo, hi):
    _memcpy(out, pos, src, lo, hi - lo)
    return pos + hi - lo


@njit(cache=True)
def _render(kinds, a, b, const, const_off, buf0, off0, buf1, off1, cols, out):
    n = cols.shape[1]
    nseg = len(kinds)
    pos = 0
    for i in range(n):
        out[pos] = 44  # ","
        out[pos + 1] = 10  # "\n"
        pos += 2
        j = 0
        while j < nseg:
            k = kinds[j]
            if k == 0:
                c = a[j]
                pos = _copy(out, pos, const, const_off[c], const_off[c + 1])
            elif k == 1:
                v = cols[a[j], i]
                if v < 0:
                    out[pos] = 45
                    pos += 1
                    v = -v
                pos = put_digits(out, pos, v)
            elif k == 2:
                pos = put_json_us(out, pos, cols[a[j], i])
            elif k == 3 or k == 4:
                c = cols[a[j], i]
                if c >= 0:
                    if b[j] == 0:
                        pos = _copy(out, pos, buf0, off0[c], off0[c + 1])
                    else:
                        pos = _copy(out, pos, buf1, off1[c], off1[c + 1])
                    if k == 4:
                        break
            elif k == 5:
                if cols[a[j], i] < 0:
                    j += b[j]
            elif k == 7:
                if cols[a[j], i] >= 0:
                    break
            elif k == 8:
                pos = put_us_text(out, pos, cols[a[j], i], 3)
            else:
                if cols[a[j], i] >= 0:
                    j += b[j]
            j += 1
    return pos


__all__ = ["Template", "Pieces", "json_value"]
