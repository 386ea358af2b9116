"""What reading a YAML text finds (opsim.yamlio.reader): the data, the line of every field path and the problems
a scenario may not have, for the caller to word (opsim.yamlio.messages) or to look lines up in."""
from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """A node PyYAML accepts but a scenario may not have: `kind` is "tag" (`detail`: the tag), "key" (a key
    that is not a scalar) or "duplicate" (`detail`: the key)."""

    line: int
    kind: str
    path: tuple
    detail: str = ""


_MISSING = object()


class LineMap(Mapping):
    """Field path -> 1-based line, as a dict of every path would give, kept compactly: the paths of mapping
    keys (and the top) in a dict, the lines of a list's items in one list per list. Iteration yields every
    path (not in document order)."""

    __slots__ = ("_paths", "_items")

    def __init__(self, paths: dict[tuple, int], items: dict[tuple, list[int]]):
        self._paths = paths
        self._items = items

    def __getitem__(self, path: tuple) -> int:
        try:
            return self._paths[path]
        except KeyError:
            pass
        if path.__class__ is tuple and path:
            lines = self._items.get(path[:-1])
            if lines is not None:
                try:
                    i = operator.index(path[-1])
                except TypeError:
                    i = -1
                if 0 <= i < len(lines):
                    return lines[i]
        raise KeyError(path)

    def get(self, path: tuple, default: Any = None) -> Any:
        line = self._paths.get(path)
        if line is not None:
            return line
        if path.__class__ is tuple and path:
            lines = self._items.get(path[:-1])
            if lines is not None and path[-1].__class__ is int and 0 <= path[-1] < len(lines):
                return lines[path[-1]]
        try:
            return self[path]
        except KeyError:
            return default

    def __contains__(self, path: object) -> bool:
        return self.get(path, _MISSING) is not _MISSING

    def __iter__(self) -> Iterator[tuple]:
        yield from self._paths
        for path, lines in self._items.items():
            for i in range(len(lines)):
                if path + (i,) not in self._paths:
                    yield path + (i,)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass
class YamlDocument:
    """What the pass found in the text."""

    data: Any
    """The first document's data (None when `built` is False)."""
    lines: LineMap
    """Field path (keys as written, list indices) -> 1-based line."""
    problems: list[Problem]
    """In the order a depth-first walk of the node graph meets them (aliases walked again)."""
    empty: bool
    """No document at all."""
    built: bool
    """False: compose and construct with PyYAML instead (see opsim.yamlio.reader)."""
    env_as_written: list[tuple[str, str]]
    """(key, source text) of the top-level `env` mapping's int, float and bool values, in order."""


__all__ = ["Problem", "LineMap", "YamlDocument"]
