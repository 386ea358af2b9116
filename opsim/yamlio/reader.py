"""YAML text read in one pass over libyaml's events: the limits enforced, the data built, the line map kept.

One pass over the events does what a limit check of the event stream, PyYAML's composer (a node graph), a walk
of that graph for line numbers and tag checks and PyYAML's constructor would do one after the other, with the
same results and the same errors first (a 2 MB scenario is read about three times faster than by those four
passes, docs/performance.md):

- the limits of `opsim.yamlio.limits` (depth, aliases, values after alias expansion, aliases inside their own
  collection), raised at the same event as before, before anything else is reported;
- each scalar resolved and constructed by PyYAML's own resolver and SafeConstructor functions (so values are
  exactly what `yaml.safe_load` gives), once per distinct scalar text;
- the data (aliases shared, as PyYAML shares them);
- the line of every field path (a mapping value: its key's line; a list item or the top: its own line; an
  alias: the lines of what it refers to), and the problems PyYAML accepts but a scenario may not have (tags
  other than YAML's standard ones, keys that are not scalars, duplicate keys), each reported where a walk of
  the node graph would report it, including once more at every alias of an anchored value.

What the pass leaves to PyYAML (`YamlDocument.built` is False): composer errors (an undefined alias, a duplicate
anchor, a second document) and documents that use merge keys (`<<`), `=` keys, `!!binary` or explicit tags
other than the core scalar ones, or whose scalars PyYAML cannot construct. The caller then composes and
constructs the text with PyYAML (safe: the limits have passed), which raises PyYAML's own error or builds
PyYAML's data; none of the bundled scenarios needs it.
"""
from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.events import (AliasEvent, MappingEndEvent, MappingStartEvent, ScalarEvent, SequenceEndEvent,
                         SequenceStartEvent, StreamEndEvent)
from yaml.nodes import ScalarNode

from opsim.errors import shown
from opsim.yamlio.limits import MAX_ALIASES, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, MAX_NUMBER_CHARS, LimitError

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's parser when PyYAML was built with it (about 10x faster), else PyYAML's own: both give the same
events with the same marks, resolve and construct alike."""

_YAML = "tag:yaml.org,2002:"
STANDARD_TAGS = frozenset(_YAML + t for t in (
    "str", "int", "float", "bool", "null", "map", "seq", "binary", "merge", "value"))
"""The tags a scenario may carry (implicitly or written out)."""
_CORE_SCALARS = frozenset(_YAML + t for t in ("str", "int", "float", "bool", "null"))
AS_WRITTEN = frozenset(_YAML + t for t in ("int", "float", "bool"))
"""Tags of the `env` values kept as their source text (see opsim.scenario.loader)."""
_SEQ, _MAP, _INT = _YAML + "seq", _YAML + "map", _YAML + "int"

# The state of a scalar's tag: constructed by the pass, left to PyYAML, not allowed in a scenario.
_OK, _PYYAML, _REFUSED = 0, 1, 2


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
    """False: compose and construct with PyYAML instead (see the module docstring)."""
    env_as_written: list[tuple[str, str]]
    """(key, source text) of the top-level `env` mapping's int, float and bool values, in order."""


def read_document(text: str) -> YamlDocument:
    """Read YAML text in one pass. Raises LimitError (the bounds of opsim.yamlio.limits) and yaml.YAMLError
    (a syntax error, as libyaml words it) at the first event that breaks one, exactly as a check of the event
    stream before composition would."""
    if len(text) > MAX_FILE_BYTES:
        raise LimitError(f"{len(text)} characters, above the limit of {MAX_FILE_BYTES} ({MAX_FILE_BYTES >> 20} MiB)")
    loader = LOADER(text)
    try:
        return _read(loader)
    finally:
        loader.dispose()


def check_yaml_events(text: str) -> None:
    """Raise LimitError when the YAML text is too long, nests too deep, uses too many aliases, expands to too
    many nodes or has an alias inside the collection it names. YAML syntax errors propagate as yaml.YAMLError.
    The check is the scenario reader's own pass over libyaml's events."""
    read_document(text)


def _scalar_maker(loader: Any):
    """A function (value, tag, implicit, event) -> (object, tag, state) resolving and constructing a scalar
    with the loader's own resolver and constructors."""
    resolve = loader.resolve
    constructors = loader.yaml_constructors

    def make(value: str, tag: str | None, implicit: Any, ev: Any) -> tuple[Any, str, int]:
        if tag is None or tag == "!":
            tag = resolve(ScalarNode, value, implicit)
        if tag in _CORE_SCALARS:
            if tag == _INT and len(value) > MAX_NUMBER_CHARS:  # bounded before int() sees it
                raise LimitError(f"an integer of {len(value)} characters, above the limit of {MAX_NUMBER_CHARS}; "
                                 "opsim's integers fit int64 (at most 19 digits)", ev.start_mark.line + 1)
            try:
                return constructors[tag](loader, ScalarNode(tag, value, ev.start_mark, ev.end_mark, ev.style)), \
                    tag, _OK
            except Exception:  # noqa: BLE001 - `!!int x`, `!!bool maybe`: PyYAML would raise a bare ValueError
                short = tag.replace(_YAML, "!!")
                raise LimitError(f"{shown(value)} cannot be read as {short}; write a value of that type or drop "
                                 "the tag", ev.start_mark.line + 1) from None
        return None, tag, _PYYAML if tag in STANDARD_TAGS else _REFUSED
    return make


def _read(loader: Any) -> YamlDocument:  # noqa: C901 - one loop over the events, kept flat for speed
    get_event = loader.get_event
    make = _scalar_maker(loader)
    plain: dict[str, tuple] = {}  # plain untagged scalars by text
    other: dict[tuple, tuple] = {}  # the rest by (text, implicit, tag)
    # Limit bookkeeping, as the event-stream check always kept it: sizes of finished anchors, open anchors.
    sizes: dict[str, int] = {}
    open_anchors: set[str] = set()
    alias_count = 0
    # anchor -> (object, line, is_collection, tag, state, text, path, log span, problem span, depth)
    anchors: dict[str, tuple] = {}
    # In walk order: (path, line or a list's item lines), the first for a path wins; and (line, kind, path,
    # detail, depth of the node hiding it from the walk or None). An alias adds one entry to each (see
    # _expand_log).
    log: list[tuple[tuple | None, Any]] = []
    problems: list[tuple] = []
    env_pairs: list[tuple[str, str]] = []
    built = True
    documents = 0
    data: Any = None
    stack: list[tuple] = []
    # The open collection ("frame"); at the top, cont is None and the count is the document level's.
    cont: Any = None
    is_map = False
    path: tuple = ()
    count = 0
    anchor: str | None = None
    want_key = False
    rkey: Any = None  # the pending key as written (None: a key that is not a scalar, its value skipped)
    ckey: Any = None  # the pending key constructed
    seen: Any = None  # a mapping's keys as written; a list's items' lines
    sup: int | None = None  # depth of the node whose problem hides this frame's children from the walk
    pair_sup: int | None = None  # the same for the current key/value pair (a key that is not a scalar)
    env = False  # this frame is the top-level `env` mapping
    rec: tuple | None = None  # (line, log start, problem start, depth, path, object, tag) if anchored
    depth = 0  # open collections = depth of this frame's children

    pending: Any = None  # an event read ahead, to handle next
    while True:
        if pending is None:
            ev = get_event()
        else:
            ev, pending = pending, None
        cls = ev.__class__
        if cls is ScalarEvent:
            value, tag = ev.value, ev.tag
            if tag is None and not ev.style:
                hit = plain.get(value)
                if hit is None:
                    hit = plain[value] = make(value, None, ev.implicit, ev)
            else:
                key = (value, ev.implicit, tag)
                hit = other.get(key)
                if hit is None:
                    hit = other[key] = make(value, tag, ev.implicit, ev)
            obj, tag, state = hit
            line = ev.start_mark.line + 1
            count += 1
            if count > MAX_NODES:
                raise LimitError(_too_many(), line)
            node_anchor = ev.anchor
            if node_anchor is not None and (node_anchor in anchors or node_anchor in open_anchors):
                built = False  # a duplicate anchor: PyYAML's composer decides
            is_coll = False
        elif cls is SequenceStartEvent or cls is MappingStartEvent:
            line = ev.start_mark.line + 1
            if depth >= MAX_DEPTH:
                raise LimitError(f"collections nested {depth + 1} deep, above the limit of {MAX_DEPTH}; "
                                 "flatten the scenario", line)
            node_anchor = ev.anchor
            if node_anchor is not None:
                if node_anchor in anchors or node_anchor in open_anchors:
                    built = False  # a duplicate anchor: PyYAML's composer decides
                open_anchors.add(node_anchor)
            tag = ev.tag
            if tag is None or tag == "!" or tag == (_MAP if cls is MappingStartEvent else _SEQ):
                state = _OK
            else:
                state = _PYYAML if tag in STANDARD_TAGS else _REFUSED
            obj = {} if cls is MappingStartEvent else []
            is_coll = True
        elif cls is SequenceEndEvent or cls is MappingEndEvent:
            n, done_anchor, done_rec = count, anchor, rec
            (cont, is_map, path, count, anchor, want_key, rkey, ckey, seen, sup, pair_sup, env,
             rec) = stack.pop()
            depth -= 1
            if done_anchor is not None:
                sizes[done_anchor] = n
                open_anchors.discard(done_anchor)
                a_line, log0, prob0, a_depth, a_path, a_obj, a_tag = done_rec
                anchors[done_anchor] = (a_obj, a_line, True, a_tag, _OK, None, a_path, (log0, len(log)),
                                        (prob0, len(problems)), a_depth)
            count += n
            if count > MAX_NODES:
                raise LimitError(_too_many(), ev.start_mark.line + 1)
            continue
        elif cls is AliasEvent:
            alias_count += 1
            line = ev.start_mark.line + 1
            name = ev.anchor
            if alias_count > MAX_ALIASES:
                raise LimitError(f"more than {MAX_ALIASES} aliases, above the limit; write the values out", line)
            if name in open_anchors:
                raise LimitError(f"the alias *{name} is inside the collection &{name} it refers to "
                                 "(a self-referencing value has no end); remove the alias", line)
            if name in sizes:
                count += sizes[name]
                if count > MAX_NODES:
                    raise LimitError(_too_many(), line)
            target = anchors.get(name)
            if target is None:  # undefined: PyYAML's composer reports it with its position
                built = False
                obj, tag, state, is_coll, node_anchor = None, _YAML + "null", _OK, False, None
            else:
                obj, line, is_coll, tag, state = target[:5]
                node_anchor = None
        elif cls is StreamEndEvent:
            break
        else:  # stream and document boundaries
            continue

        # ---- where the node goes: the document, a key, a mapping value or a list item -------------------
        # `hidden`: the depth of the innermost node whose problem keeps a walk of the node graph from reaching
        # this node (None: reached). Problems under it are kept, hidden, for the aliases that may repeat them.
        node_path: tuple | None
        if cont is None:
            documents += 1
            if documents > 1:
                built = False  # a second document: PyYAML's composer reports it
            node_path, hidden = (), None
            log.append((node_path, line))
            if documents == 1:
                data = obj
        elif is_map and want_key:  # keys are not walked (their own tags are PyYAML's concern)
            want_key = False
            node_path = None
            if state != _OK or tag not in _CORE_SCALARS:
                built = False
            if is_coll:
                problems.append((line, "key", path, "", sup))
                built = False
                rkey = None
                hidden = pair_sup = depth - 1
            else:
                raw = ev.value if cls is ScalarEvent else (target[5] if target is not None else None)
                if raw in seen:
                    problems.append((line, "duplicate", path + (raw,), raw, sup))
                seen.add(raw)
                log.append((path + (raw,), line))
                rkey, ckey = raw, obj
                hidden = sup
        elif is_map:
            want_key = True
            hidden = pair_sup if pair_sup is not None else sup
            pair_sup = None
            if rkey is None:  # the value of a key that is not a scalar
                node_path = path + (None,)
            else:
                cont[ckey] = obj
                if env and not is_coll and tag in AS_WRITTEN:
                    env_pairs.append((rkey, ev.value if cls is ScalarEvent else target[5]))
                elif depth == 1 and rkey == "env" and cls is AliasEvent:
                    built = False  # `env: *name`: PyYAML's node graph says which values are as written
                if cls is ScalarEvent and state == _OK and node_anchor is None:
                    continue  # the common case: nothing more to note
                node_path = path + (rkey,)
        else:
            seen.append(line)  # a list's frame keeps its items' lines
            cont.append(obj)
            if cls is ScalarEvent and state == _OK and node_anchor is None:
                continue  # the common case: nothing more to note
            node_path = path + (len(cont) - 1,)
            hidden = sup

        # ---- the node itself: its tag, and what an alias repeats -------------------------------------------
        if cls is AliasEvent:
            if target is not None and node_path is not None:
                # noted here, repeated once the whole stream is within the limits (never before)
                log.append((None, (target, node_path)))
                problems.append((None, target, node_path, depth, hidden))
            continue
        prob0 = len(problems)  # an anchored node's problems start here
        if state != _OK:
            built = False
            if state == _REFUSED and node_path is not None:
                problems.append((line, "tag", node_path, tag, hidden))
        if cls is ScalarEvent:
            if node_anchor is not None:
                sizes[node_anchor] = 1
                anchors[node_anchor] = (obj, line, False, tag, state, ev.value, node_path or (), (0, 0),
                                        (prob0, len(problems)), depth)
            continue
        # a collection opens
        n = 1
        if cls is SequenceStartEvent:
            item_lines: list[int] = []
            log.append((node_path or (), item_lines))
            if node_anchor is None and state == _OK:
                # The commonest list holds plain scalars only ([64, 128], [float, float16]): read them here, and
                # the whole list when nothing else comes, without opening a frame.
                while True:
                    ev = get_event()
                    if ev.__class__ is ScalarEvent and ev.tag is None and ev.anchor is None and not ev.style:
                        hit = plain.get(ev.value)
                        if hit is None:
                            hit = plain[ev.value] = make(ev.value, None, ev.implicit, ev)
                        if hit[2] == _OK:
                            n += 1
                            if n > MAX_NODES:
                                raise LimitError(_too_many(), ev.start_mark.line + 1)
                            item_lines.append(ev.start_mark.line + 1)
                            obj.append(hit[0])
                            continue
                    break
                if ev.__class__ is SequenceEndEvent:
                    count += n
                    if count > MAX_NODES:
                        raise LimitError(_too_many(), ev.start_mark.line + 1)
                    continue
                pending = ev  # anything else: the list's frame opens and the main loop goes on with it
        # its frame becomes the current one
        child_env = depth == 1 and node_path == ("env",) and ckey == "env" and cls is MappingStartEvent
        stack.append((cont, is_map, path, count, anchor, want_key, rkey, ckey, seen, sup, pair_sup, env, rec))
        path = node_path or ()
        rec = None if node_anchor is None else (line, len(log) - (cls is SequenceStartEvent), prob0, depth, path,
                                                obj, tag)
        sup = depth if state == _REFUSED and node_path is not None else hidden
        depth += 1
        is_map = cls is MappingStartEvent
        seen = set() if is_map else item_lines
        cont, count, anchor, want_key, rkey, ckey, pair_sup, env = obj, n, node_anchor, True, None, None, None, child_env

    paths: dict[tuple, int] = {}
    items: dict[tuple, list[int]] = {}
    for p, n in _expand_log(log):  # the first line noted for a path is the walk's
        if n.__class__ is list:
            items.setdefault(p, n)
        else:
            paths.setdefault(p, n)
    return YamlDocument(data=data if built else None, lines=LineMap(paths, items),
                        problems=_expand_problems(problems), empty=documents == 0,
                        built=built, env_as_written=env_pairs)


# An alias walked again: a (None, ...) entry in the log and in the problems stands for the anchored node's
# entries (its log and problem spans) under the alias's path. They are expanded only after the stream passed
# every limit, so an alias bomb is refused before anything is expanded; what is expanded is then bounded by
# the limit on values after alias expansion.

def _expand_log(log: list[tuple]) -> Iterator[tuple[tuple, Any]]:
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
                work.append((*target[7], len(target[6]), at + alias_at[cut:]))
                break
            yield (at + p[cut:] if cut or at else p), v


def _expand_problems(problems: list[tuple]) -> list[Problem]:
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
                work.append((*target[8], len(target[6]), at + alias_at[cut:], target[9], alias_depth - a + d,
                             _moved(alias_hidden, a, d, c)))
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


def _too_many() -> str:
    return (f"more than {MAX_NODES} values once aliases are expanded, above the limit (an alias expanding to copies "
            "of copies?); write the values out or make the scenario smaller")


__all__ = ["read_document", "check_yaml_events", "YamlDocument", "LineMap", "Problem", "LOADER", "STANDARD_TAGS", "AS_WRITTEN"]
