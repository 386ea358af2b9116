"""The kernel reader's fast paths: the plain spellings of numbers real tables use read without `Decimal`,
the patterns a whole row's numbers are checked by at once, and what a row's kernel columns decide.

Each fast path gives exactly what `opsim.ingest.kernels._RowReader`'s Decimal path gives for the texts it
accepts and leaves every other text to that path, so values and errors do not depend on which path read them
(tests/calibration/test_predict_memo.py holds them to it).
"""
from __future__ import annotations

from typing import Any, NamedTuple

#: a float below this is well inside MAX_MAGNITUDE (larger values take the exact Decimal check).
FAST_MAGNITUDE = 1e19
#: what a fast path returns for a text it leaves to the exact Decimal path.
SLOW: Any = object()


# A text the fast paths accept has nothing `_RowReader.raw` would strip or unquote: they may read a cell as written.
def fast_integer(v: str) -> Any:
    return int(v) if len(v) < 20 and v.isdigit() and v.isascii() else SLOW


def fast_number(v: str) -> Any:
    if v.isascii() and v.replace(".", "", 1).isdigit():  # digits and at most one point
        f = float(v)  # correctly rounded, as float(Decimal(v)) is
        if f < FAST_MAGNITUDE:
            return f
    return SLOW


def fast_ns(v: str) -> Any:
    whole, _point, frac = v.partition(".")
    if len(whole) < 20 and len(frac) < 4 and whole.isdigit() and v.isascii() and (frac.isdigit() or not frac):
        return int(whole) * 1000 + (int(frac.ljust(3, "0")) if frac else 0)  # at most 3 decimals: exact ns
    return SLOW


#: the numbers of a kernel record, in the order they are read (and their errors reported): field, column, kind.
NUMBERS = (("block_dim", "block_dim", "integer"), ("start_us", "start", "number"), ("start_ns", "start", "ns"),
            ("duration_us", "duration", "number"), ("wait_us", "wait", "number"),
            ("mix_block_dim", "mix_block_dim", "integer"), ("stream_id", "stream_id", "integer"),
            ("task_id", "task_id", "integer"), ("step_id", "step_id", "integer"))
FAST_PATHS = {"integer": fast_integer, "number": fast_number, "ns": fast_ns}
#: per number column, a spelling the Decimal path surely accepts (digits, one point, below 1e19, blanks around):
#: `RowParser.check` matches all of a row's at once.
PLAIN_CELL = {col: (r"[ \t]*(?:[0-9]{1,19}(?:\.[0-9]*)?|\.[0-9]+)[ \t]*" if kind == "number" else
                    r"[ \t]*[0-9]{1,19}[ \t]*") for _field, col, kind in NUMBERS if kind != "ns"}


class RowKernel(NamedTuple):
    """What a row's kernel columns decide: why it is skipped ("" for a kernel) or its kernel's identity."""

    reason: str
    op_type: Any
    core: Any
    input_shapes: Any
    input_dtypes: Any
    output_shapes: Any
    output_dtypes: Any
    input_formats: Any
    output_formats: Any


def skip(reason: str) -> RowKernel:
    """The `RowKernel` of a row skipped for `reason`."""
    return RowKernel(reason, None, None, None, None, None, None, None, None)


__all__ = ["FAST_MAGNITUDE", "FAST_PATHS", "NUMBERS", "PLAIN_CELL", "SLOW", "RowKernel", "fast_integer", "fast_ns",
           "fast_number", "skip"]
