"""The recorder: one append-only, columnar event log per simulation.

Every view of a run (text lines, Chrome traces, CSVs, DataFrames) is derived from this log, so they never
disagree. Recording sits on the hot path of every simulated op call, so a record is a handful of plain list
appends (one list per column; names stored as codes looked up in one dict) and never a per-record dict or
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
in 64 bits) becomes a typed ``array.array`` (8 bytes a float, 4 or 8 an int, instead of a list slot plus a
float or int object). Columns of names (threads, phases, ops, task types, ...; `_CODED`; any hashable
value) hold codes into one table of distinct values from the first record on (the first value seen of equal
strings is the one kept, so strings read back interned; other values are keyed by type and value), folded
into 2-byte arrays. A replayed call's host spans (``host_spans``: the same phases, ops and float durations
every time) are recorded as one group row, which the fold turns into the spans with numpy (the starts added in
order, as Python adds them), so a million-call trace takes no Python object per span; every reader sees the
spans. A replayed executor-cache hit (``hit``) takes that row, run_op's call span in the same row when it
follows at once, its cache hit and its tensor descriptions in one call, from codes found once (``hit_rows``).
``records(kind)`` converts back to plain lists holding the same values;
``iter_chunks(kind)`` streams the columns chunk by chunk without building whole-column lists;
``coded_chunks`` and ``numeric_chunks`` give the stored arrays to numpy without conversion (trace.json is
written from them). ``tensor_infos`` (the tensor descriptions of every kernel launch) is kept as three
columns too.
"""
from __future__ import annotations

from array import array
from itertools import accumulate
from typing import Any, Iterator, Protocol

from opsim.errors import InvalidArgumentError, OpsimError
from opsim.trace.columns import TensorInfos, ValueKey, code_array, code_chunk, compact_column, expand_groups

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
                   "tensor_info", "hit")

_NUMERIC: dict[str, frozenset[str]] = {
    "host": frozenset({"start", "dur", "corr"}),
    "device": frozenset({"device", "stream", "units", "task_id", "block_dim", "queued", "start", "end", "corr"}),
    "memory": frozenset({"time", "device", "address", "size", "in_use"}),
    "cache": frozenset({"time", "key_hash"}),
    "instant": frozenset({"time"}),
    "counter": frozenset({"time", "value"}),
}
"""Columns folded into typed arrays when all their values are plain floats or plain 64-bit ints."""
_CODED: dict[str, frozenset[str]] = {
    "host": frozenset({"thread", "phase", "op"}),
    "device": frozenset({"unit_kind", "op", "task_type"}),
    "memory": frozenset({"kind"}),
    "cache": frozenset({"thread", "cache", "kind", "op", "detail"}),
    "instant": frozenset({"name", "track"}),
    "counter": frozenset({"name"}),
}
"""Columns of names (threads, phases, ops, ...): stored as codes into the recorder's table of distinct values."""
CHUNK_ROWS = 1 << 16
"""Records of one kind kept as growing lists before they are folded into a compact chunk."""


def _noop(*_args: Any, **_kwargs: Any) -> None:
    """What every record method becomes on a disabled recorder."""


class RecordSink(Protocol):
    """What takes a recorder's records instead of its columns (`opsim.trace.summary.SummaryStats`, which keeps only
    the summary's totals): the record methods of `Recorder`, with their signatures."""

    def host_span(self, thread: Any, phase: str, op: str, start: float, dur: float, corr: int = -1) -> None: ...
    def host_spans(self, thread: Any, phases: tuple, ops: tuple, start: float, durs: tuple,
                   corr: int = -1) -> None: ...
    def device_task(self, stream: int, unit_kind: str, units: int, task_id: int, op: str, task_type: str,
                    block_dim: int, queued: float, start: float, end: float, corr: int = -1,
                    device: int = 0) -> None: ...
    def memory_event(self, time: float, kind: str, address: int, size: int, in_use: int, device: int = 0) -> None: ...
    def cache_event(self, time: float, thread: Any, cache: str, kind: str, op: str, key_hash: int = 0,
                    detail: str = "") -> None: ...
    def instant(self, time: float, name: str, track: str, args: dict | None = None) -> None: ...
    def counter(self, time: float, name: str, value: float) -> None: ...
    def tensor_info(self, corr: int, op: str, info: dict) -> None: ...
    def hit(self, rows: tuple, start: float, hit_at: float, corr: int, call_end: bool) -> None: ...


class Recorder:
    """The columnar event log of one simulation (see the module docstring for kinds and columns)."""

    def __init__(self, enabled: bool = True, sink: RecordSink | None = None) -> None:
        """`enabled=False`: every record method a no-op; `sink`: the records go to it instead of the columns
        (chosen once, when the simulation is built; `keeps_rows` tells which)."""
        self._chunks: dict[str, list[tuple]] = {k: [] for k in COLUMNS}
        self._folded: dict[str, int] = {k: 0 for k in COLUMNS}
        self._values: list = []  # code -> value, for every coded column (see _CODED)
        self._code_of: dict[Any, int] = {}  # a str, or the ValueKey of another value -> its code
        self._code = self._code_of.get
        self._groups: dict[int, tuple] = {}  # id(durs) -> its span group (host_spans)
        self._group_of: dict[tuple, int] = {}  # (phase codes, op codes, durs, call span) -> group number
        self._group_parts: list[tuple] = []  # group number -> (phase, op codes, durs as numpy arrays, call span)
        self._device_rows: list[tuple] = []  # device records as rows, until `_settle` moves them to the columns
        self._new_columns()
        self._corr = 0
        self.tensor_infos = TensorInfos(self._values)
        self.enabled = True
        self.sink = sink
        if sink is not None:
            for name in _RECORD_METHODS:
                setattr(self, name, getattr(sink, name))
        if not enabled:
            self.set_enabled(False)

    @property
    def keeps_rows(self) -> bool:
        """The records are kept as rows (no `RecordSink` takes them instead)."""
        return self.sink is None

    def _new_columns(self, kinds: Any = COLUMNS) -> None:
        """Fresh growing lists for `kinds`, and the bound `append`s of their columns in column order."""
        if not hasattr(self, "_cols"):
            self._cols: dict[str, dict[str, list]] = {}
            self._app: dict[str, tuple] = {}
        for k in kinds:
            self._cols[k] = {c: [] for c in COLUMNS[k]}
            self._app[k] = tuple(self._cols[k][c].append for c in COLUMNS[k])
            if k == "host":
                self._host_grouped = 0  # group rows among the growing host records (see host_spans)
                self._host_extra = 0  # the spans they stand for, less one each
        self._host_app = self._app["host"]
        self._host_cols = tuple(self._cols["host"][c] for c in COLUMNS["host"])
        self._device_cols = tuple(self._cols["device"][c] for c in COLUMNS["device"])
        self._memory_app = self._app["memory"]
        self._cache_app = self._app["cache"]
        self._instant_app = self._app["instant"]
        self._counter_app = self._app["counter"]

    def compact(self) -> None:
        """Fold every growing record list into compact column chunks now (reading gives the same values)."""
        self._fold(force=True)

    def _fold(self, force: bool = False, only: str | None = None) -> None:
        """Fold every kind (or kind `only`) with at least CHUNK_ROWS growing records (all non-empty ones with
        `force`)."""
        self._settle()
        full = []
        for kind, cols in self._cols.items():
            if only is not None and kind != only:
                continue
            n = len(cols[COLUMNS[kind][0]])
            if kind == "host":
                n += self._host_extra
            if n >= CHUNK_ROWS or (force and n):
                numeric = _NUMERIC[kind]
                coded = _CODED[kind]
                codes = "H" if len(self._values) <= 0xFFFF else "i"
                if kind == "host" and self._host_grouped:
                    self._chunks[kind].append(self._expand_groups(cols, codes))
                else:
                    self._chunks[kind].append(tuple(
                        compact_column(col) if c in numeric
                        else code_chunk(code_array(col), codes) if c in coded else col
                        for c, col in cols.items()))
                self._folded[kind] += n
                full.append(kind)
        if full:
            self._new_columns(full)

    def _expand_groups(self, cols: dict[str, list], codes: str) -> tuple:
        """The growing host records as a chunk, each group row replaced by its spans (`columns.expand_groups`)."""
        return expand_groups([cols[c] for c in COLUMNS["host"]], codes, self._group_parts)

    # --- switching ---------------------------------------------------------------------------------------
    def set_enabled(self, enabled: bool) -> None:
        """Turn recording on or off; records already taken are kept."""
        self.enabled = bool(enabled)
        for name in _RECORD_METHODS:
            if not self.enabled:
                setattr(self, name, _noop)
            elif self.sink is not None:
                setattr(self, name, getattr(self.sink, name))
            else:
                self.__dict__.pop(name, None)

    def next_corr(self) -> int:
        """A fresh correlation id (1, 2, 3, ...) linking a host launch to the device tasks it produced.

        Ids are handed out even while recording is off, so a run's ids do not depend on the switch.
        """
        self._corr += 1
        if not self._corr & 1023:
            self._fold()
        return self._corr

    def _new_code(self, value: Any) -> int:
        """The code of a str seen for the first time, or of any other (hashable) value, keyed by its type too."""
        key = value if type(value) is str else ValueKey(value)
        code = self._code_of.get(key)
        if code is None:
            code = self._code_of[key] = len(self._values)
            self._values.append(value)
        return code

    # --- record kinds --------------------------------------------------------------------------------------
    def host_span(self, thread: Any, phase: str, op: str, start: float, dur: float, corr: int = -1) -> None:
        """A host-side phase (``phase`` as named by the cost model) that ``thread`` spent on ``op``."""
        a_thread, a_phase, a_op, a_start, a_dur, a_corr = self._host_app
        code = self._code
        a_thread(_c if (_c := code(thread)) is not None else self._new_code(thread))
        a_phase(_c if (_c := code(phase)) is not None else self._new_code(phase))
        a_op(_c if (_c := code(op)) is not None else self._new_code(op))
        a_start(start)
        a_dur(dur)
        a_corr(corr)

    def host_spans(self, thread: Any, phases: tuple, ops: tuple, start: float, durs: tuple, corr: int = -1) -> None:
        """Spans back to back, as many `host_span` calls would record them: span i of phase phases[i] on op
        ops[i] lasting durs[i], the first from `start`, each next one from the previous start plus its duration
        (added in that order). Passing the same three tuples again (templates do) records one group row that
        the chunk fold turns into the spans (numpy, no Python object per span); reading sees the spans."""
        g = self._groups.get(id(durs))
        if g is None or g[0] is not durs or g[1] is not phases or g[2] is not ops:
            g = self._span_group(phases, ops, durs)
        code = self._code(thread)
        if code is None:
            code = self._new_code(thread)
        if g[3] is not None and (type(start) is float or type(start) is int):
            self._group_row(code, g[3], g[4], start, corr)
            return
        n = len(durs)
        a_thread, a_phase, a_op, a_start, a_dur, a_corr = self._host_cols
        a_thread.extend([code] * n)
        a_phase.extend(g[5])
        a_op.extend(g[6])
        a_start.extend(list(accumulate(durs, initial=start))[:n])
        a_dur.extend(durs)
        a_corr.extend([corr] * n)

    def _span_group(self, phases: tuple, ops: tuple, durs: tuple) -> tuple:
        """(durs, phases, ops, group row marker or None, spans less one, phase codes, op codes) of a span
        group; a marker only when the durations are plain floats (then the fold computes the same starts)."""
        if len(self._groups) >= 4096:  # the id cache keeps its tuples alive: bounded
            self._groups.clear()
        p_codes = [self._code_of_value(v) for v in phases]
        o_codes = [self._code_of_value(v) for v in ops]
        marker = None
        if durs and len(phases) == len(ops) == len(durs) and all(type(d) is float for d in durs):
            marker = -1 - self._group_number(p_codes, o_codes, durs, False)
        g = self._groups[id(durs)] = (durs, phases, ops, marker, len(durs) - 1, p_codes, o_codes)
        return g

    def _group_row(self, thread: int, marker: int, extra: int, start: float, corr: int) -> None:
        """One host row standing for a span group (`marker`: -1 - its number; `extra`: its spans less one) from
        `start`, on the thread of code `thread`; the fold expands it."""
        a_thread, a_phase, a_op, a_start, a_dur, a_corr = self._host_app
        a_thread(thread)
        a_phase(marker)
        a_op(0)
        a_start(start)
        a_dur(0.0)
        a_corr(corr)
        self._host_grouped += 1
        self._host_extra += extra

    def _group_number(self, p_codes: list, o_codes: list, durs: tuple, call: bool) -> int:
        """The number of the span group of these codes and plain float durations (`call`: followed by a call
        span, see `hit_rows`), made on first use; keyed by codes and the durations' bits (1, 1.0 and True, or
        0.0 and -0.0, stay apart)."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.recorder
        key = (tuple(p_codes), tuple(o_codes), np.array(durs, dtype=np.float64).tobytes(), call)
        gid = self._group_of.get(key)
        if gid is None:
            gid = self._group_of[key] = len(self._group_parts)
            self._group_parts.append((np.array(p_codes, dtype=np.int64), np.array(o_codes, dtype=np.int64),
                                      np.array(durs, dtype=np.float64), call))
        return gid

    def hit_rows(self, thread: Any, phases: tuple, ops: tuple, durs: tuple, api: str, api_1: str,
                 infos: tuple) -> tuple | None:
        """The records of a replayed executor-cache hit (`opsim.fastpath.hit_replay`) as codes for `hit`: its
        host spans as a group, the same group followed by run_op's "op_call" span on `api`, its cache hit on
        `api_1`, its tensor descriptions ((op, info) per launch); None when its spans make no group (durations
        that are not plain floats). Made after a call recorded all of these, so it gives out no new code."""
        g = self._span_group(phases, ops, durs)
        if g[3] is None:
            return None
        code = self._code_of_value
        call = -1 - self._group_number([*g[5], code("op_call")], [*g[6], code(api)], durs, True)
        return (code(thread), g[3], g[4], call, g[4] + 1, code("exec"), code("hit"), code(api_1), code(""),
                tuple((code(op), info) for op, info in infos))

    def hit(self, rows: tuple, start: float, hit_at: float, corr: int, call_end: bool) -> None:
        """The records of one replayed hit (`rows` from `hit_rows`): its tensor descriptions, its host spans
        from `start` as one group row, its cache hit at `hit_at`; with `call_end`, run_op's "op_call" span
        follows the spans in the same row, from `start` (a float) to where the host clock moves for their end
        (`start + (end - start)`)."""
        thread, marker, extra, call_marker, call_extra, c_exec, c_hit, c_op, c_empty, infos = rows
        for op, info in infos:
            self.tensor_infos.add(corr, op, info)
        if call_end:
            self._group_row(thread, call_marker, call_extra, start, corr)
        else:
            self._group_row(thread, marker, extra, start, corr)
        k_time, k_thread, k_cache, k_kind, k_op, k_hash, k_detail = self._cache_app
        k_time(hit_at)
        k_thread(thread)
        k_cache(c_exec)
        k_kind(c_hit)
        k_op(c_op)
        k_hash(0)
        k_detail(c_empty)

    def _code_of_value(self, value: Any) -> int:
        code = self._code(value)
        return self._new_code(value) if code is None else code

    def tensor_info(self, corr: int, op: str, info: dict) -> None:
        """Shapes, dtypes and formats of one kernel launch (torch_npu strings, `info` shared between launches
        of one signature), matched to its device task by (corr, op) in launch order."""
        code = self._code(op)
        self.tensor_infos.add(corr, self._new_code(op) if code is None else code, info)

    def device_task(self, stream: int, unit_kind: str, units: int, task_id: int, op: str, task_type: str,
                    block_dim: int, queued: float, start: float, end: float, corr: int = -1,
                    device: int = 0) -> None:
        """A finished device task: which stream and units ran it, and when it was queued, started and ended (one
        row, a tuple: the commonest record costs one append; readers and folds see it in the columns)."""
        code = self._code
        self._device_rows.append((
            device, stream, _c if (_c := code(unit_kind)) is not None else self._new_code(unit_kind), units,
            task_id, _c if (_c := code(op)) is not None else self._new_code(op),
            _c if (_c := code(task_type)) is not None else self._new_code(task_type), block_dim, queued, start, end,
            corr))

    def memory_event(self, time: float, kind: str, address: int, size: int, in_use: int,
                     device: int = 0) -> None:
        """A device-memory event (``kind`` is "alloc", "free" or "oom"); ``in_use`` is the total after it."""
        a_time, a_dev, a_kind, a_addr, a_size, a_in_use = self._memory_app
        code = self._code
        a_time(time)
        a_dev(device)
        a_kind(_c if (_c := code(kind)) is not None else self._new_code(kind))
        a_addr(address)
        a_size(size)
        a_in_use(in_use)

    def cache_event(self, time: float, thread: Any, cache: str, kind: str, op: str, key_hash: int = 0,
                    detail: str = "") -> None:
        """A cache lookup outcome: ``cache`` such as "exec" or "aicpu", ``kind`` such as "hit", "miss",
        "oneshot" or "evict"."""
        a_time, a_thread, a_cache, a_kind, a_op, a_hash, a_detail = self._cache_app
        code = self._code
        a_time(time)
        a_thread(_c if (_c := code(thread)) is not None else self._new_code(thread))
        a_cache(_c if (_c := code(cache)) is not None else self._new_code(cache))
        a_kind(_c if (_c := code(kind)) is not None else self._new_code(kind))
        a_op(_c if (_c := code(op)) is not None else self._new_code(op))
        a_hash(key_hash)
        a_detail(_c if (_c := code(detail)) is not None else self._new_code(detail))

    def instant(self, time: float, name: str, track: str, args: dict | None = None) -> None:
        """A point-in-time marker on ``track`` (for example a dump or an overflow detection)."""
        a_time, a_name, a_track, a_args = self._instant_app
        code = self._code
        a_time(time)
        a_name(_c if (_c := code(name)) is not None else self._new_code(name))
        a_track(_c if (_c := code(track)) is not None else self._new_code(track))
        a_args(args)

    def counter(self, time: float, name: str, value: float) -> None:
        """A sampled value (for example a queue length) at ``time``."""
        a_time, a_name, a_value = self._counter_app
        code = self._code
        a_time(time)
        a_name(_c if (_c := code(name)) is not None else self._new_code(name))
        a_value(value)

    # --- the fast path's batches (opsim.fastpath.batch_rows fills these from the compiled loop's rows) -------
    def existing_code(self, value: str) -> int | None:
        """The code of a name recorded before, None for a name not seen yet (a batch gives out no new code)."""
        return self._code(value)

    @property
    def last_corr(self) -> int:
        """The last correlation id `next_corr` gave out."""
        return self._corr

    def continue_corr(self, last: int) -> None:
        """Go on from correlation id `last` (a batch gave out the ids before it, folding where `next_corr` would)."""
        self._corr = last

    def fold_due(self) -> None:
        """The fold `next_corr` makes every 1024 ids (a batch calls it at the same point)."""
        self._fold()

    def span_group(self, phases: tuple, ops: tuple, durs: tuple) -> tuple:
        """The span group of these tuples, as `host_spans` finds or makes it: (durs, phases, ops, group-row marker
        or None, spans less one, phase codes, op codes)."""
        g = self._groups.get(id(durs))
        if g is None or g[0] is not durs or g[1] is not phases or g[2] is not ops:
            g = self._span_group(phases, ops, durs)
        return g

    def extend(self, kind: str, columns: Any, grouped: int = 0, extra: int = 0) -> None:
        """Append rows of `kind` given column by column ((column name, values) in any order; codes for coded
        columns), as the record methods append them; `grouped`, `extra`: host group rows among them and the
        spans they stand for less one each (see `_group_row`)."""
        self._settle()  # device rows taken before these go first
        cols = self._cols[kind]
        for name, values in columns:
            cols[name].extend(values)
        if grouped or extra:
            self._host_grouped += grouped
            self._host_extra += extra

    # --- reading -------------------------------------------------------------------------------------------
    def _settle(self) -> None:
        """Move the device records taken as rows into their columns (one C-level transpose)."""
        rows = self._device_rows
        if rows:
            for col, values in zip(self._device_cols, zip(*rows)):
                col.extend(values)
            rows.clear()

    def _check_kind(self, kind: str) -> dict[str, list]:
        self._settle()
        try:
            return self._cols[kind]
        except (KeyError, TypeError):
            raise InvalidArgumentError(
                f"unknown record kind {kind!r}; use one of {', '.join(COLUMNS)}") from None

    def iter_chunks(self, kind: str) -> Iterator[dict[str, Any]]:
        """The records of ``kind`` chunk by chunk (column name -> a sequence of values: a list or a typed
        array), in record order: a streaming read of a large trace without building whole-column lists."""
        coded = _CODED[kind] if kind in _CODED else ()
        decode = self._values.__getitem__
        for chunk in self._raw_chunks(kind):
            yield {c: list(map(decode, col)) if c in coded else col for c, col in chunk.items()}

    def _raw_chunks(self, kind: str) -> Iterator[dict[str, Any]]:
        """`iter_chunks` with the coded columns left as codes into ``self._values``."""
        cols = self._check_kind(kind)
        if kind == "host" and self._host_grouped:  # group rows are only read as their spans
            self._fold(force=True, only="host")
            cols = self._cols[kind]
        for chunk in self._chunks[kind]:
            yield dict(zip(COLUMNS[kind], chunk))
        if cols[COLUMNS[kind][0]]:
            yield dict(cols)

    def column_chunks(self, kind: str, name: str) -> Iterator[Any]:
        """Column ``name`` of ``kind`` chunk by chunk, values as `records` gives them (a list, or a typed array
        of numbers): one column of a large trace at a time."""
        coded = name in _CODED[kind] if kind in _CODED else False
        decode = self._values.__getitem__
        for chunk in self._raw_chunks(kind):
            col = chunk[name]
            yield list(map(decode, col)) if coded else col

    def records(self, kind: str) -> dict[str, list]:
        """Columnar access: column name -> a list of the column's values in record order (a copy)."""
        self._check_kind(kind)
        out: dict[str, list] = {c: [] for c in COLUMNS[kind]}
        for chunk in self.iter_chunks(kind):
            for c, part in chunk.items():
                out[c].extend(part)
        return out

    def code_values(self) -> list:
        """The values the codes of coded columns stand for (``values[code]``; see `coded_chunks`)."""
        return list(self._values)

    def coded_chunks(self, kind: str, name: str) -> list:
        """Column ``name`` of ``kind`` (a column of names, see _CODED) chunk by chunk, as numpy arrays of codes
        into `code_values()`: readers format each distinct value once."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.recorder
        self._check_kind(kind)
        return [np.frombuffer(chunk[name], dtype=np.dtype(chunk[name].typecode))
                if isinstance(chunk[name], array) and len(chunk[name]) else np.array(chunk[name], dtype=np.int64)
                for chunk in self._raw_chunks(kind)]

    def coded(self, kind: str, name: str) -> tuple[Any, list]:
        """`coded_chunks` as one array, and `code_values()`."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.recorder
        parts = self.coded_chunks(kind, name)
        dtype = np.uint16 if len(self._values) <= 0x10000 else np.int32
        # a growing (not yet folded) part reads as int64 codes, within dtype's range by the choice above
        whole = np.concatenate(parts, dtype=dtype, casting="unsafe") if parts else np.empty(0, dtype)
        return whole, self.code_values()

    def numeric_chunks(self, kind: str, name: str, typecode: str) -> list[tuple[Any, dict[int, Any]]]:
        """Column ``name`` of ``kind`` chunk by chunk as numpy arrays (views of the typed chunks; typecode "d":
        floats wanted, "q": ints), each with the records whose value is not of that exact Python type
        ({record index: value}; their slot holds the value when it is a plain int or float, else 0)."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.recorder
        self._check_kind(kind)
        want = float if typecode == "d" else int
        out = []
        base = 0
        for chunk in self._raw_chunks(kind):
            col = chunk[name]
            odd: dict[int, Any] = {}
            if isinstance(col, array):
                arr = np.frombuffer(col, dtype=np.dtype(col.typecode)) if len(col) else np.empty(0)
                if (col.typecode == "d") != (want is float):
                    odd = {base + i: v for i, v in enumerate(col)}
            else:
                arr = np.zeros(len(col), dtype=np.float64 if typecode == "d" else np.int64)
                for i, v in enumerate(col):
                    t = type(v)
                    if t is want and (t is float or -(1 << 63) <= v < (1 << 63)):
                        arr[i] = v
                        continue
                    odd[base + i] = v
                    if t in (int, float) and -(1 << 53) <= v <= (1 << 53):
                        arr[i] = v
            out.append((arr, odd))
            base += len(col)
        return out

    def numeric(self, kind: str, name: str, typecode: str) -> tuple[Any, dict[int, Any]]:
        """`numeric_chunks` as one array (typecode "d": float64, "q": int64, or int32 when every chunk holds
        4-byte ints) and one {index: value} of odd records."""
        import numpy as np  # lazy: keeps numpy out of importing opsim.trace.recorder
        dtype = np.float64 if typecode == "d" else np.int64
        parts, odd = [], {}
        for arr, o in self.numeric_chunks(kind, name, typecode):
            parts.append(arr)
            odd.update(o)
        if parts and len({a.dtype for a in parts}) == 1 and parts[0].dtype.kind == np.dtype(dtype).kind:
            dtype = parts[0].dtype  # 4-byte ints stay 4 bytes
        return (np.concatenate(parts, dtype=dtype, casting="unsafe") if parts else np.empty(0, dtype)), odd

    def count(self, kind: str) -> int:
        """How many records of ``kind`` were taken."""
        cols = self._check_kind(kind)
        return self._folded[kind] + len(cols[COLUMNS[kind][0]]) + (self._host_extra if kind == "host" else 0)

    def rows(self, kind: str) -> list[tuple]:
        """The records of ``kind`` as tuples in column order (for comparisons and small exports)."""
        cols = self.records(kind)
        return list(zip(*(cols[c] for c in COLUMNS[kind])))

    def to_dataframe(self, kind: str):
        """The records of ``kind`` as a pandas DataFrame (pandas is an optional dependency)."""
        self._check_kind(kind)
        try:
            import pandas as pd  # lazy: an optional dependency, looked for where it is used
        except ImportError:
            raise OpsimError(
                "Recorder.to_dataframe needs pandas, which is not installed; "
                "install it with `pip install opsim[analysis]`") from None
        cols = self.records(kind)
        return pd.DataFrame({c: cols[c] for c in COLUMNS[kind]}, columns=list(COLUMNS[kind]))

    def clear(self) -> None:
        """Drop every record (the correlation counter keeps counting, so ids stay unique)."""
        self.tensor_infos.clear()
        self._device_rows.clear()
        for kind in COLUMNS:
            self._chunks[kind] = []
            self._folded[kind] = 0
        self._new_columns()
