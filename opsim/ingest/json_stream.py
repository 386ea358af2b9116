"""Stream the events of a Chrome-trace JSON file (trace_view.json, msprof_*.json) in bounded memory.

Real traces of large models are hundreds of MB, mostly call stacks and counters the readers drop. ijson's
C backend (yajl) parses the bytes; this module builds each event as a flat dict of its scalar fields and
its `args` object (scalars only), so memory grows with the events kept, never with the file. Numbers stay
exact (integers, or `Decimal` for the rest). Nested containers an event carries are skipped, up to
`MAX_DEPTH` levels: deeper nesting is damage, refused before it can cost memory.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson

from opsim.errors import ProfileFormatError
from opsim.safe_io import open_regular

MAX_DEPTH = 64
"""Deepest nesting accepted inside a trace (real events nest 3 levels: list, event, args)."""
CHUNK = 1 << 16
_BOM = b"\xef\xbb\xbf"
_SCALARS = frozenset({"string", "number", "boolean", "null"})


class _Container:
    """Stands for a container value the reader skipped (an event field that should have been a scalar)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def __repr__(self) -> str:
        return "[...]" if self.kind == "start_array" else "{...}"

    __str__ = __repr__


class _Source:
    """The file as ijson reads it: skips a UTF-8 BOM, counts bytes and lines for error positions."""

    def __init__(self, f: Any, total: int, progress: Callable[[int, int], None] | None) -> None:
        self.f, self.total, self.progress = f, total, progress
        self.offset = 0
        self.lines = 0
        self.last_nl = -1
        self.prev = b""
        self.prev_offset = 0
        head = f.read(3)
        if head != _BOM:
            self.pending = head
        else:
            self.pending = b""
            self.offset = 3

    def read(self, n: int = CHUNK) -> bytes:
        if n == 0:  # ijson probes the type of the stream with read(0)
            return b""
        chunk = self.pending + self.f.read(max(1, n - len(self.pending)))
        self.pending = b""
        self.prev, self.prev_offset = chunk, self.offset
        nl = chunk.count(b"\n")
        if nl:
            self.lines += nl
            self.last_nl = self.offset + chunk.rindex(b"\n")
        self.offset += len(chunk)
        if self.progress is not None and chunk:
            self.progress(self.offset, self.total)
        return chunk

    def position(self) -> str:
        return f"line {self.lines + 1}, column {self.offset - self.last_nl}"

    def utf8_error(self) -> tuple[int, int, bytes] | None:
        """(absolute byte, line, bytes) of the first invalid UTF-8 in the last chunk read, if any."""
        try:
            self.prev.decode("utf-8")
        except UnicodeDecodeError as exc:
            if exc.reason == "unexpected end of data":
                return None
            at = self.prev_offset + exc.start
            line = self.lines + 1 - self.prev[exc.start:].count(b"\n")
            return at, line, self.prev[exc.start:exc.start + 4]
        return None


def _skip(parse: Iterator, depth: int, path: Path) -> None:
    """Consume one container whose start event was just read (`depth` open containers around it)."""
    level = 1
    for event, _ in parse:
        if event in ("start_map", "start_array"):
            level += 1
            if depth + level > MAX_DEPTH:
                raise ProfileFormatError(f"{path}: JSON nested too deeply (more than {MAX_DEPTH} levels) to be a "
                                         f"Chrome trace; give an unmodified trace_view.json")
        elif event in ("end_map", "end_array"):
            level -= 1
            if level == 0:
                return


def _object(parse: Iterator, depth: int, path: Path, args_key: str | None) -> dict:
    """The scalar fields of a map whose start was just read; `args_key`'s map value is read one level deeper."""
    out: dict[str, Any] = {}
    key = None
    for event, value in parse:
        if event == "map_key":
            key = value
        elif event in _SCALARS:
            out[key] = value
        elif event == "end_map":
            return out
        elif event == "start_map" and key == args_key:
            out[key] = _object(parse, depth + 1, path, None)
        else:  # a container where a scalar was expected: skipped, remembered as such
            _skip(parse, depth + 1, path)
            out[key] = _Container(event)
    return out


def iter_trace_events(path: Path, expected: str,
                      progress: Callable[[int, int], None] | None = None) -> Iterator[tuple[int, dict]]:
    """(index, event) for each event of a Chrome trace; errors name the file and the position."""
    f = open_regular(path, f"a {expected}", ProfileFormatError)  # a FIFO, /dev/zero or a directory is refused
    with f:
        try:
            total = os.fstat(f.fileno()).st_size
        except OSError:
            total = 0
        src = _Source(f, total, progress)
        try:
            yield from _events(ijson.basic_parse(src, use_float=False, buf_size=CHUNK), path, expected)
        except ijson.JSONError as exc:
            bad = src.utf8_error()
            if bad is not None:
                at, line, raw = bad
                raise ProfileFormatError(f"{path}: line {line}, byte {at}: not UTF-8 ({raw!r}); re-save the "
                                         f"{expected} as UTF-8") from None
            detail = str(exc).strip().splitlines()[0] if str(exc).strip() else "damaged"
            raise ProfileFormatError(
                f"{path}: not valid JSON at {src.position()} (byte {src.offset}, or just before): {detail}; the "
                f"file is truncated or damaged, export the profile again") from None
        except OSError as exc:
            raise ProfileFormatError(f"{path}: cannot read ({exc}); give a {expected}") from None


def _not_trace(path: Path) -> ProfileFormatError:
    return ProfileFormatError(
        f"{path}: not a Chrome trace (expected a JSON list of events or an object with 'traceEvents'); give a "
        f"trace_view.json from ASCEND_PROFILER_OUTPUT")


def _events(parse: Iterator, path: Path, expected: str) -> Iterator[tuple[int, dict]]:
    first = next(parse, None)
    if first is None:
        raise ProfileFormatError(f"{path}: empty file; give a {expected}")
    if first[0] == "start_map":  # {"traceEvents": [...], ...}: other keys skipped
        found = False
        for event, value in parse:
            if event == "end_map":
                break
            if event != "map_key":
                raise _not_trace(path)
            nxt, _ = next(parse)
            if value == "traceEvents" and nxt == "start_array" and not found:
                found = True
                yield from _items(parse, 2, path)
            elif nxt in ("start_map", "start_array"):
                _skip(parse, 1, path)
        if not found:
            raise _not_trace(path)
    elif first[0] == "start_array":
        yield from _items(parse, 1, path)
    else:
        raise _not_trace(path)
    for _ in parse:  # the rest must parse too: a truncated or damaged tail is an error
        pass


def _items(parse: Iterator, depth: int, path: Path) -> Iterator[tuple[int, dict]]:
    i = 0
    for event, _ in parse:
        if event == "end_array":
            return
        if event == "start_map":
            yield i, _object(parse, depth + 1, path, "args")
        else:
            if event == "start_array":
                _skip(parse, depth + 1, path)
            raise ProfileFormatError(f"{path}: event {i} is not a JSON object; give an unmodified trace_view.json")
        i += 1


__all__ = ["iter_trace_events", "MAX_DEPTH"]
