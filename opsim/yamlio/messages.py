"""Field paths and the collector of "file:line: path: message" entries: the wording every YAML file opsim reads
reports its problems in (a scenario, a sweep file, a calibration file)."""
from __future__ import annotations

from typing import Any, Iterable, Mapping

from opsim.errors import ScenarioError, shown

Path_ = tuple  # a field path: keys and list indices

MAX_ERRORS = 50
MAX_ENTRY = 1000
"""Characters of one error entry (a message echoing a 1,000,000-character value is cut, its length said)."""


def format_path(path: Iterable[Any]) -> str:
    """("threads", 0, "program", 1, "op") -> "threads[0].program[1].op"."""
    out = ""
    for p in path:
        if isinstance(p, int) and not isinstance(p, bool):
            out += f"[{p}]"
        else:  # a user's key: control characters escaped, a long key cut
            out += ("." if out else "") + shown(p if isinstance(p, str) else str(p), 80, quote=False)
    return out or "(top level)"


class _Errors:
    """Collects "file:line: path: message" entries and raises one `ScenarioError` with all of them, in line order
    (`what` names the kind of file in the heading: "scenario", "sweep file", ...)."""

    def __init__(self, label: str, lines: Mapping[Path_, int], overridden: set[Path_] = frozenset(),
                 what: str = "scenario"):
        self.label = label
        self.what = what
        self.lines = lines
        self.overridden = overridden
        self.items: list[tuple[int, str]] = []
        self._entries: set[str] = set()  # the entries so far, so a repeated one is found at once

    def line_of(self, path: Path_) -> int | None:
        path = tuple(path)
        while True:
            line = self.lines.get(path)
            if line is not None:
                return line
            if not path:
                return None
            path = path[:-1]

    def add(self, path: Iterable[Any], message: str) -> None:
        path = tuple(path)
        where = self.label
        if any(path[:len(o)] == o for o in self.overridden):
            where += " (--set)"
        else:
            line = self.line_of(path)
            if line is not None:
                where += f":{line}"
        entry = shown(f"{where}: {format_path(path)}: {message}", MAX_ENTRY, quote=False)
        if entry not in self._entries:
            self._entries.add(entry)
            self.items.append((self.line_of(path) or 0, entry))

    def raise_if_any(self) -> None:
        if self.items:
            ordered = tuple(e for _, e in sorted(self.items, key=lambda x: x[0]))
            if len(ordered) == 1:
                raise ScenarioError(ordered[0])
            more = len(ordered) - MAX_ERRORS
            shown_ = list(ordered[:MAX_ERRORS]) + ([f"... and {more} more"] if more > 0 else [])
            head = f"{self.label}: {len(ordered)} errors in the {self.what}"
            raise ScenarioError(head + ":\n  " + "\n  ".join(shown_), entries=ordered, label=self.label)
