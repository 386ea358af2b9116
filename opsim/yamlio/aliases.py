"""What an alias repeats: the record the pass keeps of an anchored node, and the expansion, once the pass is over,
of each alias's entries (lines and problems) into the anchored node's, under the alias's path.

The pass (opsim.yamlio.reader) notes an alias as one (None, ...) entry in its log of lines and one in its
problems; they stand for the anchored node's entries (its spans of both) under the alias's path. They are
expanded only after the stream passed every limit, so an alias bomb is refused before anything is expanded;
what is expanded is then bounded by the limit on values after alias expansion.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any, NamedTuple

from opsim.yamlio.document import Problem


class Anchored(NamedTuple):
    """An anchored node as the pass recorded it, for its aliases."""

    obj: Any
    line: int
    is_coll: bool
    tag: str | None
    state: int
    text: str | None
    """A scalar's text as written (None: a collection)."""
    path: tuple
    log_span: tuple[int, int]
    """Its entries in the pass's log of lines: (first, stop)."""
    problem_span: tuple[int, int]
    """Its entries in the pass's problems: (first, stop)."""
    depth: int
    """The collections open around it."""


def expand_log(log: list[tuple]) -> Iterator[tuple[tuple, Any]]:
    """(path, line or item lines) of the log with every alias's entries in its place."""
    if all(p is not None for p, _ in log):
        yield from log
        return
    work = [(0, len(log), 0, ())]  # spans still to copy: (next, stop, cut, at): path p becomes at + p[cut:]
    while work:
        i, stop, cut, at = work.pop()
        while i < stop:
            p, v = log[i]
            i += 1
            if p is None:
                target, alias_at = v
                work.append((i, stop, cut, at))
                work.append((*target.log_span, len(target.path), at + alias_at[cut:]))
                break
            yield (at + p[cut:] if cut or at else p), v


def expand_problems(problems: list[tuple]) -> list[Problem]:
    """The problems a walk reports, in its order, with every alias's repeated in its place. Each entry's last
    field is the depth of the innermost node hiding it from the walk (None: reported); repeated at an alias,
    what the anchored node itself hides stays hidden and what only its old place hid is reported (unless the
    alias's own place hides it)."""
    if all(p[0] is None for p in problems):
        return []  # aliases alone add nothing
    out = []
    # spans still to copy: (next, stop, cut, at, anchor depth, alias depth, alias hidden)
    work: list[tuple] = [(0, len(problems), 0, (), 0, 0, None)]
    while work:
        i, stop, cut, at, a, d, c = work.pop()
        while i < stop:
            e = problems[i]
            i += 1
            if e[0] is None:
                _, target, alias_at, alias_depth, alias_hidden = e
                work.append((i, stop, cut, at, a, d, c))
                work.append((*target.problem_span, len(target.path), at + alias_at[cut:], target.depth,
                             alias_depth - a + d, _moved(alias_hidden, a, d, c)))
                break
            line, kind, path, detail, hidden = e
            if _moved(hidden, a, d, c) is None:
                out.append(Problem(line, kind, at + path[cut:], detail))
    return out


def _moved(hidden: int | None, a: int, d: int, c: int | None) -> int | None:
    """`hidden` of an entry under an anchor at depth `a`, repeated by an alias at depth `d` whose own place is
    hidden by `c`."""
    if c is not None:
        return c
    if hidden is None or hidden < a:
        return None
    return hidden - a + d


__all__ = ["Anchored", "expand_log", "expand_problems"]
