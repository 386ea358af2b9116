"""The recorder's storage pieces: folding a growing column into a compact typed chunk, the codes of named
values, and the tensor descriptions kept as three columns (used by opsim.trace.recorder)."""
from __future__ import annotations

from array import array
from typing import Any, Iterator


def compact_column(col: list) -> Any:
    """A typed array holding exactly `col`'s values when they are all plain floats or all plain 64-bit ints,
    else `col` itself (so that reading back gives the same values of the same types)."""
    types = set(map(type, col))
    if types == {float}:
        return array("d", col)
    if types == {int}:
        try:  # small ints (device, stream, unit and block counts): the fast conversion of `code_array`
            small = bytes(col)
        except ValueError:
            pass
        else:
            return code_chunk(code_array(small), "i")
        for typecode in ("i", "q"):  # 4 bytes a value when they fit
            try:
                return array(typecode, col)
            except OverflowError:
                pass
    return col


def code_array(col: list | bytes) -> Any:
    """A list of codes (ints) as a numpy array: uint8 by way of ``bytes`` when every code is below 256, as it is
    while a run names fewer than 256 things (about three times as fast as numpy or ``array`` converting a list),
    else int64. A ``bytes`` is taken as such a list already converted."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.columns
    try:
        return np.frombuffer(col if type(col) is bytes else bytes(col), dtype=np.uint8)
    except (ValueError, TypeError):
        return np.array(col, dtype=np.int64)


def code_chunk(codes: Any, typecode: str) -> array:
    """A numpy array of codes as the typed array of a chunk (typecode "H" when every code fits in 2 bytes, else
    "i")."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.columns
    out = array(typecode)
    out.frombytes(codes.astype(typecode).view(np.uint8))
    return out


class ValueKey:
    """The table key of a value that is not a str: its type and the value (so 1, 1.0 and True stay apart)."""

    __slots__ = ("kind", "value", "_hash")

    def __init__(self, value: Any) -> None:
        self.kind, self.value, self._hash = type(value), value, hash(value)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ValueKey) and self.kind is other.kind and self.value == other.value


class TensorInfos:
    """The tensor descriptions of every kernel launch as three columns (correlation id, op, the shared info
    dict): about 20 bytes a launch instead of a tuple each. Iterates as (corr, op, info) tuples."""

    __slots__ = ("corr", "op", "info", "_values")

    def __init__(self, values: list) -> None:
        self._values = values  # the recorder's code table: `op` holds codes into it
        self.clear()

    def add(self, corr: Any, op_code: int, info: Any) -> None:
        try:
            self.corr.append(corr)
        except (TypeError, OverflowError):  # not a plain 64-bit int: kept as it is
            self.corr = [*self.corr, corr]
        self.op.append(op_code)
        self.info.append(info)

    def __iter__(self) -> Iterator[tuple[Any, Any, Any]]:
        return zip(self.corr, map(self._values.__getitem__, self.op), self.info)

    def __len__(self) -> int:
        return len(self.info)

    def __getitem__(self, index: int | slice) -> Any:
        if isinstance(index, slice):
            return list(zip(self.corr[index], map(self._values.__getitem__, self.op[index]), self.info[index]))
        return self.corr[index], self._values[self.op[index]], self.info[index]

    def __eq__(self, other: object) -> bool:  # as the list of tuples it stands for
        if isinstance(other, (TensorInfos, list)):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"TensorInfos({list(self)!r})"

    def clear(self) -> None:
        self.corr: Any = array("q")
        self.op = array("i")
        self.info: list = []


def expand_groups(host: list, codes: str, group_parts: list) -> tuple:
    """The growing host records as a chunk, each group row (see `host_spans`) replaced by its spans: thread
    and corr repeated, phases, ops and durations from the group, span i starting at span i-1's start plus
    its duration (numpy's accumulate adds in that order, as Python does). Columns keep their exact value
    types: a value that is not a plain float or int (a first start of int 0) stays as recorded. `host`: the
    host columns in storage order; `group_parts`: the recorder's (phase codes, op codes, durations, call) per
    group number."""
    import numpy as np  # lazy: keeps numpy out of importing opsim.trace.columns
    thread, phase, op, start, dur, corr = host
    rows = len(phase)
    ph = code_array(phase).astype(np.int64)  # group rows' markers are negative
    grouped = np.flatnonzero(ph < 0)
    gid = -1 - ph[grouped]
    sizes = np.ones(rows, dtype=np.int64)
    sizes[grouped] = np.array([len(part[0]) for part in group_parts], dtype=np.int64)[gid]
    first = np.zeros(rows, dtype=np.int64)
    np.cumsum(sizes[:-1], out=first[1:])
    src = np.repeat(np.arange(rows, dtype=np.int64), sizes)  # the record each span comes from
    total = len(src)
    out_ph = ph[src]
    out_op = code_array(op).astype(np.int64)[src]
    spans = np.zeros(total, dtype=bool)  # the spans of group rows
    g_start = np.empty(total, dtype=np.float64)
    g_dur = np.empty(total, dtype=np.float64)
    typed_start = compact_column(start)
    row_start = (np.frombuffer(typed_start, dtype=np.float64) if isinstance(typed_start, array)
                 and typed_start.typecode == "d" else None)
    for g in np.flatnonzero(np.bincount(gid)).tolist():  # the groups present, in order (no sort)
        p_codes, o_codes, durs, call = group_parts[g]
        at = grouped[gid == g]
        k = len(p_codes)
        pos = (first[at][:, None] + np.arange(k, dtype=np.int64)).ravel()
        table = np.empty((len(at), k), dtype=np.float64)
        table[:, 0] = row_start[at] if row_start is not None else [start[i] for i in at.tolist()]
        table[:, 1:] = durs if call else durs[:-1]
        np.add.accumulate(table, axis=1, out=table)
        lasting = np.empty((len(at), k), dtype=np.float64)
        if call:  # the last column holds the end of the fixed spans: the call span's end, as `advance` sets it
            first_start = table[:, 0]
            lasting[:, :-1] = durs
            lasting[:, -1] = (first_start + (table[:, -1] - first_start)) - first_start
            table[:, -1] = first_start
        else:
            lasting[:] = durs
        g_start[pos] = table.ravel()
        g_dur[pos] = lasting.ravel()
        out_ph[pos] = np.tile(p_codes, len(at))
        out_op[pos] = np.tile(o_codes, len(at))
        spans[pos] = True
    later = spans.copy()
    later[first[grouped]] = False  # a group's first span starts where it was recorded (an int 0 stays one)

    def numeric(col: list, computed: Any = None, where: Any = None, typed: Any = None) -> Any:
        typed = compact_column(col) if typed is None else typed
        if isinstance(typed, array) and (computed is None or typed.typecode == "d"):
            values = np.frombuffer(typed, dtype=np.dtype(typed.typecode))[src] if rows else np.empty(0)
            if computed is not None:
                np.copyto(values, computed, where=where)
            out = array(typed.typecode)
            out.frombytes(values.view(np.uint8))  # no intermediate bytes
            return out
        values = list(map(col.__getitem__, src.tolist()))
        if computed is not None:
            for i, v in zip(np.flatnonzero(where).tolist(), computed[where].tolist()):
                values[i] = v
        return compact_column(values)

    return (code_chunk(code_array(thread)[src], codes), code_chunk(out_ph, codes),
            code_chunk(out_op, codes), numeric(start, g_start, later, typed_start), numeric(dur, g_dur, spans),
            numeric(corr))
