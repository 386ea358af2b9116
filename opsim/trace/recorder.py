"""The recorder: one append-only, columnar event log per simulation.

Every view of a run (text lines, Chrome traces, CSVs, DataFrames) is derived from this log, so they never
disagree. Recording sits on the hot path of every simulated op call, so a record is a handful of plain list
appends (one list per column, repeated strings interned through one dict) and never a per-record dict or
object. ``Recorder(enabled=False)`` swaps every record method for a no-op bound on the instance, so a
switched-off recorder costs one call.

Record kinds and their columns (``records(kind)`` returns them, ``to_dataframe(kind)`` wraps them):

========== =====================================================================================================
kind       columns
========== =====================================================================================================
host       thread, phase, op, start, dur, corr
device     device, stream, unit_kind, units, task_id, op, task_type, block_dim, queued, start, end, corr
memory     time, device, kind, address, size, in_use
cache      time, thread, cache, kind, op, key_hash, detail
instant    time, name, track, args
counter    time, name, value
========== =====================================================================================================

Times are simulated microseconds. ``corr`` is the correlation id linking a host launch to its device
tasks (``next_corr()``; -1 means none).

Storage: each column is a plain list while it grows (a record is a handful of appends); every
``CHUNK_ROWS`` records (checked once per correlation id handed out) the filled lists are folded into a
chunk, where a numeric column whose values all have one exact type (all ``float``, or all ``int`` fitting
in 64 bits) becomes a typed ``array.array`` (8 bytes a value instead of a list slot plus a float or int
object). String columns keep interned references. ``records(kind)`` converts back to plain lists holding the
same values; ``iter_chunks(kind)`` streams the columns chunk by chunk without building whole-column lists.
"""
from __future__ import annotations

from array import array
from typing import Any, Iterator

from opsim.errors import InvalidArgumentError, OpsimError

COLUMNS: dict[str, tuple[str, ...]] = {
    "host": ("thread", "phase", "op", "start", "dur", "corr"),
    "device": ("device", "stream", "unit_kind", "units", "task_id", "op", "task_type", "block_dim",
               "queued", "start", "end", "corr"),
    "memory": ("time", "device", "kind", "address", "size", "in_use"),
    "cache": ("time", "thread", "cache", "kind", "op", "key_hash", "detail"),
    "instant": ("time", "name", "track", "args"),
    "counter": ("time", "name", "value"),
}
"""Column names of every record kind, in storage order."""

_RECORD_METHODS = ("host_span", "host_spans", "device_task", "memory_event", "cache_event", "instant", "counter",
                   "tensor_info")

_NUMERIC: dict[str, frozenset[str]] = {
    "host": frozenset({"start", "dur", "corr"}),
    "device": frozenset({"device", "stream", "units", "task_id", "block_dim", "queued", "start", "end", "corr"}),
    "memory": frozenset({"time", "device", "address", "size", "in_use"}),
    "cache": frozenset({"time", "key_hash"}),
    "instant": frozenset({"time"}),
    "counter": frozenset({"time", "value"}),
}
"""Columns folded into typed arrays when all their values are plain floats or plain 64-bit ints."""
CHUNK_ROWS = 1 << 16
"""Records of one kind kept as growing lists before they are folded into a compact chunk."""


def _compact(col: list) -> Any:
    """A typed array holding exactly `col`'s values when they are all plain floats or all plain 64-bit ints,
    else `col` itself (so that reading back gives the same values of the same types)."""
    types = set(map(type, col))
    if types == {float}:
        return array("d", col)
    if types == {int}:
        try:
            return array("q", col)
        except OverflowError:
            return col
    return col


def _noop(*_args: Any, **_kwargs: Any) -> None:
    """What every record method becomes on a disabled recorder."""


class Recorder:
    """The columnar event log of one simulation (see the module docstring for kinds and columns)."""

    def __init__(self, enabled: bool = True) -> None:
        self._chunks: dict[str, list[tuple]] = {k: [] for k in COLUMNS}
        self._folded: dict[str, int] = {k: 0 for k in COLUMNS}
        self._strings: dict[str, str] = {}
        self._intern = self._strings.setdefault
        self._new_columns()
        self._corr = 0
        self.tensor_infos: list[tuple[int, str, dict]] = []
        self.enabled = True
        if not enabled:
            self.set_enabled(False)

    def _new_columns(self, kinds: Any = COLUMNS) -> None:
        """Fresh growing lists for `kinds`, and the bound `append`s of their columns in column order."""
        if not hasattr(self, "_cols"):
            self._cols: dict[str, dict[str, list]] = {}
            self._app: dict[str, tuple] = {}
        for k in kinds:
            self._cols[k] = {c: [] for c in COLUMNS[k]}
            self._app[k] = tuple(self._cols[k][c].append for c in COLUMNS[k])
        self._host_app = self._app["host"]
        self._host_cols = tuple(self._cols["host"][c] for c in COLUMNS["host"])
        self._device_app = self._app["device"]
        self._memory_app = self._app["memory"]
        self._cache_app = self._app["cache"]
        self._instant_app = self._app["instant"]
        self._counter_app = self._app["counter"]

    def compact(self) -> None:
        """Fold every growing record list into compact column chunks now (reading gives the same values)."""
        self._fold(force=True)

    def _fold(self, force: bool = False) -> None:
        """Fold every kind with at least CHUNK_ROWS growing records (all non-empty ones with `force`)."""
        full = []
        for kind, cols in self._cols.items():
            n = len(cols[COLUMNS[kind][0]])
            if n >= CHUNK_ROWS or (force and n):
                numeric = _NUMERIC[kind]
                self._chunks[kind].append(tuple(_compact(col) if c in numeric else col for c, col in cols.items()))
                self._folded[kind] += n
                full.append(kind)
        if full:
            self._new_columns(full)

    # --- switching ---------------------------------------------------------------------------------------
    def set_enabled(self, enabled: bool) -> None:
        """Turn recording on or off; records already taken are kept."""
        self.enabled = bool(enabled)
        for name in _RECORD_METHODS:
            if self.enabled:
                self.__dict__.pop(name, None)
            else:
                setattr(self, name, _noop)

    def next_corr(self) -> int:
        """A fresh correlation id (1, 2, 3, ...) linking a host launch to the device tasks it produced.

        Ids are handed out even while recording is off, so a run's ids do not depend on the switch.
        """
        self._corr += 1
        if not self._corr & 1023:
            self._fold()
        return self._corr

    # --- record kinds --------------------------------------------------------------------------------------
    def host_span(self, thread: Any, phase: str, op: str, start: float, dur: float, corr: int = -1) -> None:
        """A host-side phase (``phase`` as named by the cost model) that ``thread`` spent on ``op``."""
        a_thread, a_phase, a_op, a_start, a_dur, a_corr = self._host_app
        intern = self._intern
        a_thread(thread)
        a_phase(intern(phase, phase))
        a_op(intern(op, op))
        a_start(start)
        a_dur(dur)
        a_corr(corr)

    def intern(self, text: str) -> str:
        """The recorder's one copy of `text` (what every record method stores for a repeated string)."""
        return self._intern(text, text)

    def host_spans(self, thread: Any, phases: tuple, ops: tuple, starts: list, durs: tuple, corr: int = -1) -> None:
        """Spans back to back, as many `host_span` calls would record them (span i from starts[i], lasting
        durs[i]; `starts` may hold one more value, the end): one extend per column. `phases` and `ops` are
        stored as given: pass strings returned by `intern`."""
        a_thread, a_phase, a_op, a_start, a_dur, a_corr = self._host_cols
        n = len(durs)
        a_thread.extend([thread] * n)
        a_phase.extend(phases)
        a_op.extend(ops)
        a_start.extend(starts[:n])
        a_dur.extend(durs)
        a_corr.extend([corr] * n)

    def tensor_info(self, corr: int, op: str, info: dict) -> None:
        """Shapes, dtypes and formats of one kernel launch (torch_npu strings, `info` shared between launches
        of one signature), matched to its device task by (corr, op) in launch order."""
        self.tensor_infos.append((corr, op, info))

    def device_task(self, stream: int, unit_kind: str, units: int, task_id: int, op: str, task_type: str,
                    block_dim: int, queued: float, start: float, end: float, corr: int = -1,
                    device: int = 0) -> None:
        """A finished device task: which stream and units ran it, and when it was queued, started and ended."""
        (a_dev, a_stream, a_kind, a_units, a_tid, a_op, a_type, a_bd, a_q, a_start, a_end,
         a_corr) = self._device_app
        intern = self._intern
        a_dev(device)
        a_stream(stream)
        a_kind(intern(unit_kind, unit_kind))
        a_units(units)
        a_tid(task_id)
        a_op(intern(op, op))
        a_type(intern(task_type, task_type))
        a_bd(block_dim)
        a_q(queued)
        a_start(start)
        a_end(end)
        a_corr(corr)

    def memory_event(self, time: float, kind: str, address: int, size: int, in_use: int,
                     device: int = 0) -> None:
        """A device-memory event (``kind`` is "alloc", "free" or "oom"); ``in_use`` is the total after it."""
        a_time, a_dev, a_kind, a_addr, a_size, a_in_use = self._memory_app
        a_time(time)
        a_dev(device)
        a_kind(self._intern(kind, kind))
        a_addr(address)
        a_size(size)
        a_in_use(in_use)

    def cache_event(self, time: float, thread: Any, cache: str, kind: str, op: str, key_hash: int = 0,
                    detail: str = "") -> None:
        """A cache lookup outcome: ``cache`` such as "exec" or "aicpu", ``kind`` such as "hit", "miss",
        "oneshot" or "evict"."""
        a_time, a_thread, a_cache, a_kind, a_op, a_hash, a_detail = self._cache_app
        intern = self._intern
        a_time(time)
        a_thread(thread)
        a_cache(intern(cache, cache))
        a_kind(intern(kind, kind))
        a_op(intern(op, op))
        a_hash(key_hash)
        a_detail(intern(detail, detail))

    def instant(self, time: float, name: str, track: str, args: dict | None = None) -> None:
        """A point-in-time marker on ``track`` (for example a dump or an overflow detection)."""
        a_time, a_name, a_track, a_args = self._instant_app
        intern = self._intern
        a_time(time)
        a_name(intern(name, name))
        a_track(intern(track, track))
        a_args(args)

    def counter(self, time: float, name: str, value: float) -> None:
        """A sampled value (for example a queue length) at ``time``."""
        a_time, a_name, a_value = self._counter_app
        a_time(time)
        a_name(self._intern(name, name))
        a_value(value)

    # --- reading -------------------------------------------------------------------------------------------
    def _check_kind(self, kind: str) -> dict[str, list]:
        try:
            return self._cols[kind]
        except (KeyError, TypeError):
            raise InvalidArgumentError(
                f"unknown record kind {kind!r}; use one of {', '.join(COLUMNS)}") from None

    def iter_chunks(self, kind: str) -> Iterator[dict[str, Any]]:
        """The records of ``kind`` chunk by chunk (column name -> a sequence of values: a list or a typed
        array), in record order: a streaming read of a large trace without building whole-column lists."""
        cols = self._check_kind(kind)
        for chunk in self._chunks[kind]:
            yield dict(zip(COLUMNS[kind], chunk))
        if cols[COLUMNS[kind][0]]:
            yield dict(cols)

    def records(self, kind: str) -> dict[str, list]:
        """Columnar access: column name -> a list of the column's values in record order (read it, do not
        modify it; it is the live list while no record of ``kind`` has been folded)."""
        cols = self._check_kind(kind)
        chunks = self._chunks[kind]
        if not chunks:
            return dict(cols)
        out: dict[str, list] = {c: [] for c in COLUMNS[kind]}
        for chunk in chunks:
            for c, part in zip(COLUMNS[kind], chunk):
                out[c].extend(part)
        for c, col in cols.items():
            out[c].extend(col)
        return out

    def count(self, kind: str) -> int:
        """How many records of ``kind`` were taken."""
        cols = self._check_kind(kind)
        return self._folded[kind] + len(cols[COLUMNS[kind][0]])

    def rows(self, kind: str) -> list[tuple]:
        """The records of ``kind`` as tuples in column order (for comparisons and small exports)."""
        cols = self.records(kind)
        return list(zip(*(cols[c] for c in COLUMNS[kind])))

    def to_dataframe(self, kind: str):
        """The records of ``kind`` as a pandas DataFrame (pandas is an optional dependency)."""
        self._check_kind(kind)
        try:
            import pandas as pd
        except ImportError:
            raise OpsimError(
                "Recorder.to_dataframe needs pandas, which is not installed; "
                "install it with `pip install opsim[analysis]`") from None
        cols = self.records(kind)
        return pd.DataFrame({c: cols[c] for c in COLUMNS[kind]}, columns=list(COLUMNS[kind]))

    def clear(self) -> None:
        """Drop every record (the correlation counter keeps counting, so ids stay unique)."""
        self.tensor_infos = []
        for kind in COLUMNS:
            self._chunks[kind] = []
            self._folded[kind] = 0
        self._new_columns()
