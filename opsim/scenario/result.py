"""A finished run as tables: ``Result`` and ``load_result`` (re-exported by ``opsim.api``).

It sits below the runner, which builds one to write ``records.json.gz``. A ``Result`` holds the recorder's columns (live from a simulation, or read back from ``records.json.gz`` in an
output directory) and builds its DataFrames lazily on first access, so a run that is only summarised never
pays for pandas tables it does not read. pandas is imported only when a table is asked for.
"""
from __future__ import annotations

import gzip
import json
import os
from functools import cached_property
from pathlib import Path
from typing import Any, Iterator, Mapping

from opsim.errors import InvalidArgumentError, OpsimError, shown
from opsim.trace.recorder import COLUMNS

RECORDS_FILE = "records.json.gz"
"""The file ``Result.save`` writes into an output directory and ``load_result`` reads back."""

_FORMAT = "opsim-records"
_VERSION = 1


def _pandas_frames(result: "Result | None" = None):
    if result is not None and not result.traced:
        raise OpsimError(
            "this run kept no trace (the scenario sets `trace: false`), so it has no tables or trace figures; "
            "read result.summary, or run with trace on (`--set trace=true`, overrides={'trace': True})")
    try:
        from opsim.trace import frames  # lazy: pandas is imported only when a table is asked for
    except ImportError as exc:  # pandas missing
        raise OpsimError(
            f"Result tables need pandas ({exc}); install it with `pip install opsim[analysis]`") from None
    return frames


def _device_pools(sim: Any) -> dict[str, int]:
    """Unit pool name -> capacity (a SoC without vector cores shares the AI Core pool: listed once)."""
    dev = sim.device
    pools: dict[str, int] = {}
    for pool in (dev.aicore, dev.vector, dev.aicpu, dev.dma):
        pools.setdefault(pool.name, int(pool.capacity))
    return pools


class Result:
    """One finished run: DataFrames of its trace, its summary figures and the paths of its outputs.

    Tables (pandas DataFrames, times in simulated microseconds):

    - ``host_spans``: every host phase span (thread, phase, op, start, dur, end, corr); ``op_call`` rows are
      the envelope of one ACLNN call;
    - ``device_tasks``: every device task (stream, unit pool, units, op, task type, queued/start/end, dur, wait);
    - ``memory``: HBM events (alloc/free/oom, in_use after) with ``workspace`` flags and ``workspace_in_use``;
    - ``cache_events``: executor-cache and AI CPU cache outcomes with the ``corr`` of their call;
    - ``op_calls``: one row per ACLNN call; ``op_summary``: one row per API;
    - ``aicpu_tasks``: AI CPU device tasks with the cache outcome of their launch;
    - ``instants`` and ``counters``: the remaining record kinds.
    """

    def __init__(self, columns: Mapping[str, Mapping[str, list]], *, summary: Mapping[str, Any] | None = None,
                 meta: Mapping[str, Any] | None = None, outputs: Mapping[str, Any] | None = None,
                 out_dir: str | os.PathLike | None = None, scenario: Any = None, sim: Any = None,
                 wall_seconds: float | None = None, stdout_text: str = "") -> None:
        missing = [k for k in COLUMNS if k not in columns]
        if missing:
            raise InvalidArgumentError(f"Result columns lack record kinds {missing}; expected {list(COLUMNS)}")
        self._columns = columns if isinstance(columns, RecorderColumns) else {k: dict(v) for k, v in columns.items()}
        self._summary = dict(summary) if summary else None
        self.meta: dict[str, Any] = dict(meta or {})
        self.outputs: dict[str, Path] = {k: Path(v) for k, v in (outputs or {}).items()}
        self.out_dir: Path | None = Path(out_dir) if out_dir is not None else None
        self.scenario = scenario
        self.sim = sim
        self.wall_seconds = wall_seconds
        self.stdout_text = stdout_text
        """The ``GE_PROFILING_TO_STD_OUT`` text of the run (empty when the variable was off)."""
        self.rank_sims: list[Any] = []
        """A live job's simulations, one per rank (`rank(i)`); empty otherwise."""

    # --- construction --------------------------------------------------------------------------------------
    @classmethod
    def from_simulation(cls, sim: Any, **kwargs: Any) -> "Result":
        """Wrap a ``Simulation`` that has run (keyword arguments as for ``Result``)."""
        meta = {"makespan_us": float(sim.now), "pools": _device_pools(sim),
                "threads": [th.name for th in sim.threads], "streams": len(sim.device.streams),
                "soc": sim.soc.name}
        meta.update(kwargs.pop("meta", None) or {})
        if kwargs.pop("lazy", False):
            return cls(RecorderColumns(sim.recorder), meta=meta, sim=sim, **kwargs)
        return cls({k: sim.recorder.records(k) for k in COLUMNS}, meta=meta, sim=sim, **kwargs)

    @classmethod
    def from_run(cls, run: Any, *, lazy: bool = False) -> "Result":
        """Wrap the scenario runner's ``RunResult``; ``lazy``: read the recorder's columns only when asked for
        (a records file is then written from its chunks, never as whole-column lists), for a result written at
        once while the simulation stays as it is."""
        scenario = getattr(run, "scenario", None)
        outputs = dict(getattr(run, "outputs", None) or {})
        out_dir = getattr(run, "out_dir", None)
        if out_dir is None and outputs:
            out_dir = Path(next(iter(outputs.values()))).parent
        name = getattr(scenario, "name", None) or (scenario.get("name") if isinstance(scenario, Mapping) else None)
        meta: dict[str, Any] = {"trace": bool(getattr(scenario, "trace", True))}
        if name:
            meta["scenario"] = name
        ranks = list(getattr(run, "ranks", None) or ())
        if ranks:  # a job: every rank's collectives travel with the records
            # lazy: keeps opsim.cluster out of importing opsim.scenario.result
            from opsim.cluster.records import RECORD_FIELDS
            meta["collectives"] = {"fields": list(RECORD_FIELDS),
                                   "rows": [list(c) for r in ranks for c in r.rank.collectives]}
        result = cls.from_simulation(run.sim, summary=getattr(run, "summary", None), outputs=outputs,
                                     out_dir=out_dir, scenario=scenario,
                                     wall_seconds=getattr(run, "wall_seconds", None),
                                     stdout_text=getattr(run, "stdout_text", ""), meta=meta, lazy=lazy)
        result.rank_sims = [r.sim for r in ranks]
        return result

    # --- a job's ranks -------------------------------------------------------------------------------------
    @cached_property
    def ranks(self):
        """A job's per-rank table (summary.json's ``ranks``: breakdown, waits, slowdown); no rows for a
        single-rank run."""
        return _table(list(((self._summary or {}).get("ranks") or {}).values()), ["rank"])

    @cached_property
    def collectives(self):
        """Every collective of every rank (one row per rank and collective: group, index, op, name, bytes,
        start/ready/end, wait, transit and idle in us, the links it used); no rows for a single-rank run."""
        doc = self.meta.get("collectives") or {"fields": ["rank"], "rows": []}
        return _table([dict(zip(doc["fields"], row)) for row in doc["rows"]], doc["fields"])

    def rank(self, index: int) -> "Result":
        """Rank `index`'s own tables (a live job's; rank 0's are this Result's own)."""
        sims = getattr(self, "rank_sims", None) or []
        if not 0 <= index < len(sims):
            raise InvalidArgumentError(f"rank {index!r}: this result holds {len(sims)} ranks' simulations "
                                       "(a job run in this process; a loaded result keeps rank 0's trace only)")
        return Result.from_simulation(sims[index], meta={"trace": self.traced, "rank": index})

    @property
    def traced(self) -> bool:
        """False for a run whose scenario switched the trace off (``trace: false``): only the summary exists."""
        return bool(self.meta.get("trace", True))

    # --- raw columns ---------------------------------------------------------------------------------------
    def records(self, kind: str) -> dict[str, list]:
        """The recorder columns of ``kind`` (column name -> list)."""
        if kind not in self._columns:
            raise InvalidArgumentError(f"unknown record kind {kind!r}; use one of {', '.join(COLUMNS)}")
        return self._columns[kind]

    def count(self, kind: str) -> int:
        """How many records of ``kind`` the run holds."""
        return len(self.records(kind)[COLUMNS[kind][0]])

    # --- tables --------------------------------------------------------------------------------------------
    @cached_property
    def host_spans(self):
        f = _pandas_frames(self)
        return f.host_spans(f.frame(self._columns["host"], "host"))

    @cached_property
    def device_tasks(self):
        f = _pandas_frames(self)
        return f.device_tasks(f.frame(self._columns["device"], "device"))

    @cached_property
    def memory(self):
        f = _pandas_frames(self)
        return f.memory_events(f.frame(self._columns["memory"], "memory"), self.host_spans)

    @cached_property
    def _calls(self):
        return _pandas_frames(self).op_call_spans(self.host_spans)

    @cached_property
    def cache_events(self):
        f = _pandas_frames(self)
        return f.cache_events(f.frame(self._columns["cache"], "cache"), self._calls)

    @cached_property
    def op_calls(self):
        return _pandas_frames(self).op_calls(self._calls, self.host_spans, self.device_tasks, self.cache_events)

    @cached_property
    def op_summary(self):
        return _pandas_frames(self).op_summary(self.op_calls)

    @cached_property
    def aicpu_tasks(self):
        return _pandas_frames(self).aicpu_tasks(self.device_tasks, self.cache_events, self._calls)

    @cached_property
    def instants(self):
        f = _pandas_frames(self)
        return f.frame(self._columns["instant"], "instant")

    @cached_property
    def counters(self):
        f = _pandas_frames(self)
        return f.frame(self._columns["counter"], "counter")

    # --- figures -------------------------------------------------------------------------------------------
    @cached_property
    def figures(self) -> dict[str, Any]:
        """Headline numbers derived from the trace (same names for every run; see ``trace.frames.figures``)."""
        return _pandas_frames(self).figures(self.host_spans, self.device_tasks, self.memory, self.cache_events,
                                        self._calls, self.meta.get("makespan_us"), self.counters)

    @property
    def device_timing(self) -> dict[str, Any]:
        """Which timing sources (calibration, built-in fits, family model, roofline) and prediction levels
        answered the simulated device time, with their shares, the calibration's name and the makespan band
        the predictions' p10-p90 intervals imply (summary.json's ``device_timing``; empty without a summary)."""
        return dict((self._summary or {}).get("device_timing") or {})

    @property
    def step_breakdown(self) -> dict[str, Any]:
        """step_trace_time.csv's figures summed over the run's steps: Computing, Communication (Not Overlapped),
        Overlapped, Communication, Free, Stage, Bubble and Preparing in us, the number of steps and their
        thread (summary.json's ``step_breakdown``; empty without a summary or for a run that kept no records)."""
        return dict((self._summary or {}).get("step_breakdown") or {})

    @property
    def scenario_summary(self) -> dict[str, Any] | None:
        """The scenario runner's summary as written (a copy), None for a run without one (a bare Simulation)."""
        return dict(self._summary) if self._summary is not None else None

    @property
    def summary(self) -> dict[str, Any]:
        """The scenario runner's summary figures; for a run without one, the trace-derived ``figures``."""
        return dict(self._summary) if self._summary is not None else dict(self.figures)

    @property
    def makespan_us(self) -> float:
        return float(self.figures["makespan_us"])

    @property
    def pools(self) -> dict[str, int]:
        """Device unit pool name -> unit count (empty when unknown)."""
        return dict(self.meta.get("pools") or {})

    # --- persistence ---------------------------------------------------------------------------------------
    def save(self, out_dir: str | os.PathLike) -> Path:
        """Write the trace columns, summary and metadata to ``out_dir/records.json.gz`` (deterministic bytes:
        the same run gives the same file) and list it in the directory's output manifest. Returns the path."""
        from opsim.outputs import record_output  # lazy: keeps opsim.outputs out of importing opsim.scenario.result
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = self.write_records(out / RECORDS_FILE, relative_to=out)
        record_output(out, RECORDS_FILE)  # an opsim output: replaced or removed by the next run into `out`
        self.outputs["records"] = path
        if self.out_dir is None:
            self.out_dir = out
        return path

    def write_records(self, path: str | os.PathLike, *, relative_to: str | os.PathLike) -> Path:
        """The records file itself, written atomically at `path`; the outputs it lists are given relative to
        `relative_to` (the run's directory, which `path` may not be in yet while the run's outputs are staged)."""
        out = Path(relative_to)
        outputs = {}
        for name, p in self.outputs.items():
            try:
                outputs[name] = Path(p).resolve().relative_to(out.resolve()).as_posix()
            except ValueError:  # written elsewhere: not part of this directory
                continue
        outputs["records"] = RECORDS_FILE
        # The summary's `wall` section is machine time: left out so equal runs give equal bytes
        # (summary.json, next to this file, keeps it).
        summary = {k: v for k, v in self._summary.items() if k != "wall"} if self._summary is not None else None
        doc = {"format": _FORMAT, "version": _VERSION, "meta": self.meta, "summary": summary,
               "outputs": outputs, "stdout_text": self.stdout_text, "records": self._columns}
        if isinstance(self._columns, RecorderColumns):
            doc["records"] = {k: {c: _Chunked(self._columns.chunks(k, c)) for c in COLUMNS[k]} for k in COLUMNS}
        from opsim.outputs import atomic_file  # lazy: keeps opsim.outputs out of importing opsim.scenario.result
        # level 6: nearly level 9's size, several times faster to write for a large traced run
        with atomic_file(path, "wb") as fh, gzip.GzipFile(fileobj=fh, mode="wb", mtime=0, filename="",
                                                          compresslevel=6) as gz:
            for text in _json_pieces(doc, depth=3):
                gz.write(text.encode("utf-8"))
        return Path(path)

    def __repr__(self) -> str:
        name = self.meta.get("scenario") or ""
        counts = ", ".join(f"{k}={self.count(k)}" for k in ("host", "device", "memory", "cache"))
        return f"Result({name!r}, makespan={self.meta.get('makespan_us', float('nan')):.1f} us, {counts})"


def _table(rows: list, columns: list):
    try:
        import pandas as pd  # lazy: pandas is imported only when a table is asked for
    except ImportError as exc:
        raise OpsimError(f"Result tables need pandas ({exc}); install it with `pip install opsim[analysis]`") from None
    return pd.DataFrame(rows) if rows else pd.DataFrame(columns=columns)


def _json_pieces(obj: Any, depth: int) -> Iterator[str]:
    """``json.dumps(obj, separators=(",", ":"), default=_json_default)`` in pieces: the dicts of the top
    `depth` levels opened here, each value below them dumped on its own (a record column at a time, so the
    whole file's text is never held at once). Joined, the pieces are exactly that text."""
    if isinstance(obj, _Chunked):  # a list given in parts: "[" + their items + "]"
        sep = "["
        for part in obj.parts:
            if len(part):
                yield sep + json.dumps(part, separators=(",", ":"), default=_json_default, allow_nan=True)[1:-1]
                sep = ","
        yield "]" if sep == "," else "[]"
        return
    if depth <= 0 or not isinstance(obj, dict):
        yield json.dumps(obj, separators=(",", ":"), default=_json_default, allow_nan=True)
        return
    sep = "{"
    for k, v in obj.items():
        yield sep + json.dumps(k if isinstance(k, str) else _key_text(k)) + ":"
        yield from _json_pieces(v, depth - 1)
        sep = ","
    yield "}" if sep == "," else "{}"


class _Chunked:
    """A list written by `_json_pieces` from its parts (lists) one at a time."""

    def __init__(self, parts: Iterator[list]) -> None:
        self.parts = parts


class RecorderColumns(Mapping):
    """A recorder's columns as `Result` holds them (kind -> column name -> list), each kind read from the
    recorder when first asked for."""

    def __init__(self, recorder: Any) -> None:
        self._recorder = recorder
        self._read: dict[str, dict[str, list]] = {}

    def __getitem__(self, kind: str) -> dict[str, list]:
        if kind not in COLUMNS:
            raise KeyError(kind)
        if kind not in self._read:
            self._read[kind] = self._recorder.records(kind)
        return self._read[kind]

    def __iter__(self) -> Iterator[str]:
        return iter(COLUMNS)

    def __contains__(self, kind: object) -> bool:
        """Whether `kind` is a record kind (without reading it: Mapping's own test would read every column)."""
        return kind in COLUMNS

    def __len__(self) -> int:
        return len(COLUMNS)

    def chunks(self, kind: str, name: str) -> Iterator[list]:
        """Column `name` of `kind` as lists, chunk by chunk (from the kind's lists once read)."""
        if kind in self._read:
            yield self._read[kind][name]
            return
        for part in self._recorder.column_chunks(kind, name):
            yield part if isinstance(part, list) else part.tolist()


def _key_text(key: Any) -> str:
    """A dict key as `json.dumps` writes it (its text: numbers, booleans and None are converted)."""
    return next(iter(json.loads(json.dumps({key: 0}))))


def _json_default(obj: Any) -> Any:
    """JSON for values the recorder may hold besides plain numbers and strings (enums, numpy scalars)."""
    if hasattr(obj, "item"):
        return obj.item()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    if hasattr(obj, "name") and hasattr(obj, "value"):
        return obj.name
    return str(obj)


def load_result(out_dir: str | os.PathLike) -> Result:
    """Read a finished run back from its output directory (the ``records.json.gz`` that ``run`` wrote there)."""
    out = Path(out_dir)
    path = out / RECORDS_FILE
    if not path.is_file():
        if not out.exists():
            raise InvalidArgumentError(f"output directory {str(out)!r} does not exist; pass the --out/out_dir "
                                       "of a finished run")
        raise InvalidArgumentError(
            f"{str(out)!r} holds no {RECORDS_FILE}; give the output directory of `opsim run` or "
            "opsim.run(..., out_dir=...), or call Result.save(out_dir) on a result")
    # lazy: keeps opsim.safe_io, opsim.trace out of importing opsim.scenario.result
    from opsim.trace.result_files import read_gzip_json, read_json_file, records_problem
    from opsim.trace.summary import summary_problem  # lazy: keeps opsim.trace out of importing opsim.scenario.result
    doc = read_gzip_json(path)  # bounded: a regular file, its decompressed size, its nesting
    if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
        raise InvalidArgumentError(f"{str(path)!r} is not an opsim records file")
    if doc.get("version") != _VERSION:
        raise InvalidArgumentError(
            f"{str(path)!r} has records format version {shown(doc.get('version'))}; this opsim reads version "
            f"{_VERSION}")
    problem = records_problem(doc)  # checked whole now, so a damaged file never fails later, when a table is used
    if problem:
        raise InvalidArgumentError(f"{str(path)!r}: {problem}; the file is damaged: rerun `opsim run` to rewrite it")
    summary = doc.get("summary")
    summary_file = out / "summary.json"
    if summary_file.is_file():  # the runner's complete summary, its `wall` section included
        summary = read_json_file(summary_file, what="a summary.json")
    problem = summary_problem(summary) if summary is not None else None
    if problem:
        where = summary_file if summary_file.is_file() else path
        raise InvalidArgumentError(f"{str(where)!r}: not an opsim summary: {problem}; rerun `opsim run` to rewrite it")
    outputs = {name: out / rel for name, rel in (doc.get("outputs") or {}).items() if (out / rel).exists()}
    return Result(doc["records"], summary=summary, meta=doc.get("meta"), outputs=outputs, out_dir=out,
                  stdout_text=doc.get("stdout_text") or "")
