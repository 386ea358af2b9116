"""Sort more tuples than memory should hold: runs sorted in memory, spilled to anonymous temporary files, merged.

A kernels-only import orders a table's rows by start time; a table of millions of rows is sorted here in
memory bounded by `run` tuples plus one batch per spilled run (runs are merged 64 at a time, so open files stay
few whatever the row count). The tuples are the importer's own (pickled to files it made and reads back).
"""
from __future__ import annotations

import heapq
import pickle
import tempfile
from typing import IO, Any, Iterator

RUN = 50_000
"""Tuples sorted in memory before a run is spilled (a few tens of MB of row tuples)."""
BATCH = 2_048
"""Tuples per pickled batch of a spilled run: what a merge holds of each run."""
FAN_IN = 64
"""Runs merged at once; more are first merged into one run (open files stay below this)."""


class SpillSort:
    """Collects tuples with `add`, then yields them all in sorted order once (`sorted()`)."""

    def __init__(self, run: int | None = None):
        self._run = run or RUN
        self._buf: list[tuple] = []
        self._files: list[IO[bytes]] = []
        self.count = 0

    def add(self, item: tuple) -> None:
        self._buf.append(item)
        self.count += 1
        if len(self._buf) >= self._run:
            self._spill(self._buf)
            self._buf = []

    def _spill(self, items: Any) -> None:
        if isinstance(items, list):
            items.sort()
        f = tempfile.TemporaryFile()
        batch: list[tuple] = []
        for item in items:
            batch.append(item)
            if len(batch) >= BATCH:
                pickle.dump(batch, f, pickle.HIGHEST_PROTOCOL)
                batch = []
        if batch:
            pickle.dump(batch, f, pickle.HIGHEST_PROTOCOL)
        f.seek(0)
        self._files.append(f)
        if len(self._files) >= FAN_IN:  # merge these runs into one, so the final merge opens few files
            files, self._files = self._files, []
            self._spill(heapq.merge(*(_read(g) for g in files)))
            for g in files:
                g.close()

    def sorted(self) -> Iterator[tuple]:
        """Every tuple added, in ascending order (then the sorter is empty)."""
        try:
            if not self._files:
                buf, self._buf = self._buf, []
                buf.sort()
                yield from buf
                return
            if self._buf:
                self._spill(self._buf)
                self._buf = []
            yield from heapq.merge(*(_read(f) for f in self._files))
        finally:
            self.close()

    def close(self) -> None:
        for f in self._files:
            f.close()
        self._files, self._buf = [], []


def _read(f: IO[bytes]) -> Iterator[tuple]:
    while True:
        try:
            batch = pickle.load(f)
        except EOFError:
            return
        yield from batch


__all__ = ["SpillSort"]
