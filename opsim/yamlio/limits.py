"""The bounds any YAML or data a user gives must stay within, and the checks that enforce them before anything is
built from it (a scenario, a `--set` value, a sweep file, a calibration file).

Every bound here is an opsim limit (a protection against hostile or mistaken input), not a hardware number:
it is chosen so that a valid file never exhausts the host, while leaving one to three orders of magnitude of
headroom over the largest bundled scenario. docs/scenarios.md ("Limits") lists them.

YAML is checked on its event stream (libyaml's parser, which is not recursive) as it is read, before anything
else is built from it: nesting depth, alias count, the node count after alias expansion (computed per anchor,
so an alias bomb is measured without being expanded) and aliases that refer to their own unfinished
collection (opsim.yamlio.reader enforces them in the pass that reads a file, and its `check_yaml_events`
checks a text against them). Values that arrive as Python data (`--set`, a dict passed to the API) get the
same checks from `check_data`.
"""
from __future__ import annotations

import json
import math
from typing import Any, Iterator


MAX_FILE_BYTES = 4 << 20
"""Largest scenario file read (4 MiB; the largest bundled scenario is a few KiB)."""
MAX_DEPTH = 64
"""Deepest nesting of YAML collections (a loop inside a loop adds 4 levels: 14 nested loops fit)."""
MAX_ALIASES = 1_000
"""Most YAML aliases (`*name`) in one file or `--set` value."""
MAX_NODES = 1_000_000
"""Most YAML nodes (scalars and collections) after every alias is expanded."""
MAX_COLLECTIONS = 160_000
"""Most YAML lists and mappings in one file (for each MAX_FILE_BYTES of its budget, see `nodes_for`), counted as
the reader goes: a collection costs the reader about 2.5 us, so a 4 MiB file of `- {}` (600,000 of them) is
refused after 160,000, in well under a second. An imported replay writes one per ~47 bytes (about 90,000 in
4 MiB)."""
MAX_NUMBER_CHARS = 100
"""Longest integer written in YAML, in characters (checked before it is converted: Python refuses more than
4,300 digits, and an integer above about 1e308 cannot become a float). opsim's integers fit int64 (19 digits);
100 characters also hold any float field's value written as an integer."""


class LimitError(ValueError):
    """Input beyond a bound: the message names the bound and how to stay within it."""

    def __init__(self, message: str, line: int | None = None):
        super().__init__(message)
        self.line = line


# ---- Python data (--set values, dict sources) -----------------------------------------------------------

def nodes_for(file_bytes: int, per_file: int = MAX_NODES) -> int:
    """The values a file of `file_bytes` may expand to: `per_file` (MAX_NODES) for each MAX_FILE_BYTES (a file
    budget raised with `--max-file-mib` raises it in proportion; the default is MAX_NODES)."""
    return per_file * max(1, -(-int(file_bytes) // MAX_FILE_BYTES))


def check_data(value: Any, max_nodes: int = MAX_NODES) -> None:
    """Raise LimitError when `value` (lists, dicts, scalars) nests too deep, contains itself or expands to
    more than `max_nodes` values; shared sub-objects are counted once per reference, without expanding them."""
    memo: dict[int, int] = {}
    onpath: set[int] = set()
    # Iterative post-order walk: (object, depth, children visited?)
    work: list[tuple[Any, int, bool]] = [(value, 0, False)]
    while work:
        obj, depth, done = work.pop()
        if not isinstance(obj, (dict, list, tuple)):
            continue
        key = id(obj)
        children = list(obj.values()) if isinstance(obj, dict) else list(obj)
        if done:
            onpath.discard(key)
            total = 1 + sum(memo.get(id(c), 1) for c in children)
            if total > max_nodes:
                raise LimitError(f"more than {max_nodes} values once shared parts are expanded, above the limit")
            memo[key] = total
            continue
        if key in memo:
            continue

        if key in onpath:
            raise LimitError("the value contains itself (a self-referencing alias such as `&a [*a]`); remove the "
                             "alias")
        if depth >= MAX_DEPTH:
            raise LimitError(f"values nested more than {MAX_DEPTH} deep, above the limit; flatten the value")
        onpath.add(key)
        work.append((obj, depth, True))
        for c in children:
            if isinstance(c, (dict, list, tuple)):
                if id(c) in onpath:
                    raise LimitError("the value contains itself (a self-referencing alias such as `&a [*a]`); "
                                     "remove the alias")
                work.append((c, depth + 1, False))


_PLAIN = frozenset({int, float, str, bool, type(None)})


def non_string_keys(data: Any, depth: int | None = None) -> Iterator[tuple[tuple, Any]]:
    """(path of the mapping, key) of every mapping key that is not a string (`5:`, `true:`, `~:` in YAML) in a
    checked tree, looking `depth` mappings deep (None: all)."""
    work: list[tuple[tuple, Any, int]] = [((), data, 0)]
    while work:  # only collections are pushed: a list of 100,000 numbers costs no path per number
        path, obj, level = work.pop()
        if isinstance(obj, dict):
            for k, v in obj.items():
                if not isinstance(k, str):
                    yield path, k
                elif (depth is None or level + 1 < depth) and isinstance(v, (dict, list)):
                    work.append((path + (k,), v, level + 1))
        elif isinstance(obj, list) and depth is None:
            for i, v in enumerate(obj):  # a list of plain values (a shape) holds no key: not pushed
                if type(v) is dict or (type(v) is list and not _PLAIN.issuperset(map(type, v))):
                    work.append((path + (i,), v, level))


def non_finite(data: Any) -> Iterator[tuple[tuple, float]]:
    """(field path, value) of every NaN or infinite float in a checked (finite, acyclic) tree."""
    if not _any_non_finite(data):
        return  # the usual case, found without building a path for every value
    work: list[tuple[tuple, Any]] = [((), data)]
    while work:
        path, obj = work.pop()
        if isinstance(obj, float):
            if not math.isfinite(obj):
                yield path, obj
        elif isinstance(obj, dict):
            work.extend((path + (k,), v) for k, v in obj.items())
        elif isinstance(obj, (list, tuple)):
            work.extend((path + (i,), v) for i, v in enumerate(obj))


def _any_non_finite(data: Any) -> bool:
    """Whether a checked tree may hold a NaN or infinite float: json's C encoder walks it about three times as
    fast as Python and refuses such a float as a value or a key (a key only makes `non_finite` walk for
    nothing); what it cannot encode is opaque to both walks."""
    try:
        json.dumps(data, allow_nan=False, check_circular=False, skipkeys=True, default=_opaque)
    except ValueError:
        return True
    except RecursionError:  # deeper than the interpreter's C stack allows: the Python walk
        return _walk_non_finite(data)
    return False


def _opaque(_obj: Any) -> None:
    """What json writes for a value that is neither a dict, list, tuple, str, number, bool nor None."""
    return None


def _walk_non_finite(data: Any) -> bool:
    """`_any_non_finite` by a Python walk."""
    isfinite = math.isfinite
    work = [data]
    while work:
        obj = work.pop()
        if isinstance(obj, float):
            if not isfinite(obj):
                return True
        elif isinstance(obj, dict):
            work.extend(obj.values())
        elif isinstance(obj, (list, tuple)):
            work.extend(obj)
    return False


__all__ = ["LimitError", "check_data", "non_finite", "non_string_keys", "MAX_FILE_BYTES", "MAX_DEPTH", "MAX_ALIASES",
           "MAX_COLLECTIONS", "MAX_NODES", "MAX_NUMBER_CHARS", "nodes_for"]
