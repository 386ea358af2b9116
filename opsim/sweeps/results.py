"""A sweep's results: one tidy row per point, as a DataFrame, and the files of a results directory.

The directory holds `points.jsonl` (one JSON line per finished point, appended as it finishes: what `--resume`
reads), `results.csv` and `results.parquet` (every finished row sorted by point, rewritten at most once a
second, and never more than a tenth of the time, while the sweep runs, and once at the end), and `sweep.yaml` / `scenario.yaml` (what was run). Rows go
through JSON on their way to the table whether they were just computed or read back, so a resumed sweep gives
the same table as an uninterrupted one.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

from opsim.errors import InvalidArgumentError, OpsimError

from opsim.sweeps.point import FAILED, Outcome
from opsim.sweeps.spec import Point, Sweep
from opsim.outputs import atomic_path, write_text_atomic

JOURNAL, CSV, PARQUET = "points.jsonl", "results.csv", "results.parquet"
STATUS_COLUMNS = ("status", "error", "wall_seconds")
INDEX = "point"
FLUSH_SECONDS = 1.0
"""How often the CSV and Parquet files are rewritten while points finish (the journal gets every row at once)."""


def _cell(value: Any) -> Any:
    """A parameter value as a table cell: scalars as they are, lists and mappings as JSON text."""
    if isinstance(value, (list, tuple, dict)):
        return json.dumps(value, sort_keys=True, default=str)
    return value


def make_row(point: Point, outcome: Outcome) -> dict[str, Any]:
    """The JSON-safe record of one finished point (the journal line, and the table row)."""
    record = {"point": point.index, "key": outcome.key, "params": {k: _cell(v) for k, v in point.params.items()},
              "seed": point.seed, "figures": outcome.figures, "status": outcome.status, "error": outcome.error,
              "wall_seconds": outcome.wall_seconds}
    return json.loads(json.dumps(record, default=str))


def frame(sweep: Sweep, rows: Iterable[dict[str, Any]]):
    """The tidy table: index `point`; the parameter columns, `seed` when the sweep repeats seeds, the figure
    columns (in the order the figures were asked for), then status, error and wall_seconds."""
    import pandas as pd  # lazy: keeps pandas out of importing opsim.sweeps.results
    rows = sorted(rows, key=lambda r: r["point"])
    figure_cols: dict[str, None] = {}
    for r in rows:
        figure_cols.update(dict.fromkeys(r["figures"]))
    params = sweep.params
    records = []
    for r in rows:
        rec: dict[str, Any] = {p: r["params"].get(p) for p in params}
        if sweep.seeds:
            rec["seed"] = r["seed"]
        rec.update({c: r["figures"].get(c) for c in figure_cols})
        rec.update({c: r[c] for c in STATUS_COLUMNS})
        records.append(rec)
    columns = [*params, *(["seed"] if sweep.seeds else []), *figure_cols, *STATUS_COLUMNS]
    df = pd.DataFrame.from_records(records, columns=columns, index=pd.Index([r["point"] for r in rows], name=INDEX))
    for col in df.columns:  # a column mixing numbers and text (e.g. "64" and 0) is stored as text
        if df[col].dtype == object:
            kinds = {type(v) for v in df[col] if v is not None and not (isinstance(v, float) and v != v)}
            if len(kinds) > 1:
                df[col] = [None if v is None else str(v) for v in df[col]]
    df.attrs.update({"sweep": sweep.name, "params": sweep.params})  # kept in results.parquet's metadata
    return df


class ResultsDir:
    """The files of one sweep's results directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike, sweep: Sweep):
        self.path = Path(path)
        self.sweep = sweep
        self._last_flush = 0.0
        self._flush_cost = 0.0

    def _need_pyarrow(self) -> None:
        try:
            # lazy: an optional dependency, looked for where it is used
            import pyarrow  # noqa: F401
        except ImportError:
            raise OpsimError("writing results.parquet needs pyarrow; install it with `pip install opsim[sweep]`") \
                from None

    def finished(self, resume: bool) -> dict[str, dict[str, Any]]:
        """The finished rows by point key (with `resume`; failed points are left out so they run again).
        Refuses to overwrite earlier results without `resume`; creates nothing."""
        self._need_pyarrow()
        journal = self.path / JOURNAL
        if self.path.exists() and not self.path.is_dir():
            raise InvalidArgumentError(f"{self.path}: not a directory; give -o a directory for the results")
        if journal.exists() and not resume:
            raise InvalidArgumentError(f"{self.path} already holds sweep results ({JOURNAL}); pass --resume to "
                                       "continue that sweep, or choose another -o directory")
        done: dict[str, dict[str, Any]] = {}
        if journal.exists():
            with open(journal, encoding="utf-8") as fh:
                for line in fh:
                    try:
                        row = json.loads(line)
                    except ValueError:
                        continue  # a line cut short when the sweep was killed
                    if isinstance(row, dict) and "key" in row and row.get("status") != FAILED:
                        done[row["key"]] = row
        return done

    def start(self) -> None:
        """Create the directory, write what is run (sweep.yaml, scenario.yaml) and open the journal."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.sweep.source_text is not None:
            write_text_atomic(self.path / "sweep.yaml", self.sweep.source_text)
        if isinstance(self.sweep.scenario, str):
            write_text_atomic(self.path / "scenario.yaml", self.sweep.scenario)
        self._journal = open(self.path / JOURNAL, "a", encoding="utf-8")

    @property
    def started(self) -> bool:
        return getattr(self, "_journal", None) is not None

    def append(self, row: dict[str, Any]) -> None:
        """Journal one finished row at once (flushed, so it survives a crash)."""
        self._journal.write(json.dumps(row) + "\n")  # key order kept: it is the column order
        self._journal.flush()

    def due(self) -> bool:
        """True when the tables should be rewritten: at most once per FLUSH_SECONDS, and never more than a tenth
        of the time (a table of many rows takes a while to write)."""
        return time.monotonic() - self._last_flush >= max(FLUSH_SECONDS, 10 * self._flush_cost)

    def write_tables(self, df: Any) -> None:
        """Rewrite results.csv and results.parquet from the table (each replaced whole, never half-written)."""
        t0 = time.monotonic()
        for name, write in ((CSV, lambda p: df.to_csv(p)), (PARQUET, lambda p: df.to_parquet(p, index=True))):
            with atomic_path(self.path / name) as tmp:
                write(tmp)
        self._last_flush = time.monotonic()
        self._flush_cost = self._last_flush - t0

    def close(self) -> None:
        journal = getattr(self, "_journal", None)
        if journal is not None:
            journal.close()
            self._journal = None


__all__ = ["ResultsDir", "frame", "make_row", "JOURNAL", "CSV", "PARQUET"]
