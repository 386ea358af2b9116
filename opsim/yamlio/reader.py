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

What a read finds is an `opsim.yamlio.document.YamlDocument`; what an alias repeats is expanded by
`opsim.yamlio.aliases` once the pass is over.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import yaml
from yaml.events import (AliasEvent, MappingEndEvent, MappingStartEvent, ScalarEvent, SequenceEndEvent,
                         SequenceStartEvent, StreamEndEvent)
from yaml.nodes import ScalarNode

from opsim.errors import shown
from opsim.yamlio.aliases import Anchored, expand_log, expand_problems
from opsim.yamlio.document import LineMap, Problem, YamlDocument
from opsim.yamlio.limits import MAX_ALIASES, MAX_COLLECTIONS, MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, \
    MAX_NUMBER_CHARS, LimitError, nodes_for

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


def read_document(text: str, max_bytes: int = MAX_FILE_BYTES) -> YamlDocument:
    """Read YAML text in one pass. Raises LimitError (the bounds of opsim.yamlio.limits; `max_bytes` the file
    budget, which also scales the values it may expand to) and yaml.YAMLError (a syntax error, as libyaml words
    it) at the first event that breaks one, exactly as a check of the event stream before composition would."""
    if len(text) > max_bytes:
        raise LimitError(f"{len(text)} characters, above the limit of {max_bytes} ({max_bytes >> 20} MiB)")
    loader = LOADER(text)
    try:
        return _Pass(loader, nodes_for(max_bytes, MAX_NODES), nodes_for(max_bytes, MAX_COLLECTIONS)).read()
    finally:
        loader.dispose()


def check_yaml_events(text: str, max_bytes: int = MAX_FILE_BYTES) -> None:
    """Raise LimitError when the YAML text is too long, nests too deep, uses too many aliases, expands to too
    many nodes or has an alias inside the collection it names. YAML syntax errors propagate as yaml.YAMLError.
    The check is the scenario reader's own pass over libyaml's events."""
    read_document(text, max_bytes)


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


_NODES = (ScalarEvent, SequenceStartEvent, MappingStartEvent, AliasEvent)
"""The events that start a node (the others are stream and document boundaries and collection ends)."""


class _Node(NamedTuple):
    """A scalar or an alias, read (an alias: what its anchor names)."""

    obj: Any
    tag: str
    state: int
    line: int
    is_coll: bool
    anchor: str | None
    target: Anchored | None  # an alias's anchored node, None if undefined


class _Pass:
    """The pass over one text's events. Each collection is read by one call of `_sequence` or `_mapping`, so
    its state (its path, the keys seen, its count of values) lives in that call's locals, and its loop places
    the common nodes itself: a scalar without an anchor, a collection (a call). Other nodes (aliases, anchored
    scalars) are read by `_head` and noted by `_node`; a collection's anchor and tag by `_opened` and `_closed`.
    Nesting is bounded by MAX_DEPTH, so is the recursion."""

    def __init__(self, loader: Any, max_nodes: int, max_collections: int = MAX_COLLECTIONS):
        self.get_event = loader.get_event
        self.max_nodes = max_nodes
        self.collections_left = max_collections  # lists and mappings still allowed (each costs the pass most)
        self.max_collections = max_collections
        self.make = _scalar_maker(loader)
        self.plain: dict[str, tuple] = {}  # plain untagged scalars by text: (object, tag, state)
        self.other: dict[tuple, tuple] = {}  # the rest by (text, implicit, tag)
        # Limit bookkeeping, as the event-stream check always kept it: sizes of finished anchors, open anchors.
        self.sizes: dict[str, int] = {}
        self.open_anchors: set[str] = set()
        self.aliases = 0
        self.anchors: dict[str, Anchored] = {}
        # In walk order: (path, line or a list's item lines), the first for a path wins; and (line, kind, path,
        # detail, depth of the node hiding it from the walk or None). An alias adds one entry to each (see
        # opsim.yamlio.aliases).
        self.log: list[tuple[tuple | None, Any]] = []
        self.problems: list[tuple] = []
        self.env_pairs: list[tuple[str, str]] = []
        self.built = True
        self.documents = 0
        self.data: Any = None

    def read(self) -> YamlDocument:
        """Read every document's top node (the first is the data)."""
        get_event = self.get_event
        count = 0  # values at the document level
        while True:
            ev = get_event()
            cls = ev.__class__
            if cls is StreamEndEvent:
                break
            if cls not in _NODES:  # stream and document boundaries
                continue
            self.documents += 1
            if self.documents > 1:
                self.built = False  # a second document: PyYAML's composer reports it
            if cls is SequenceStartEvent or cls is MappingStartEvent:
                self.log.append(((), ev.start_mark.line + 1))
                collection = self._mapping if cls is MappingStartEvent else self._sequence
                obj, count = collection(ev, ev.start_mark.line + 1, (), None, 0, count)
            else:
                node, count = self._head(ev, cls, count)
                self.log.append(((), node.line))
                self._node(ev, cls, node, (), None, 0)
                obj = node.obj
            if self.documents == 1:
                self.data = obj
        return self._document()

    def _document(self) -> YamlDocument:
        """What the pass found, the aliases' lines and problems expanded."""
        paths: dict[tuple, int] = {}
        items: dict[tuple, list[int]] = {}
        for p, n in expand_log(self.log):  # the first line noted for a path is the walk's
            if n.__class__ is list:
                items.setdefault(p, n)
            else:
                paths.setdefault(p, n)
        return YamlDocument(data=self.data if self.built else None, lines=LineMap(paths, items),
                            problems=expand_problems(self.problems), empty=self.documents == 0,
                            built=self.built, env_as_written=self.env_pairs)

    # ---- a node's event: the limits, the object --------------------------------------------------------------

    def _scalar(self, ev: Any) -> tuple:
        """(object, tag, state) of a scalar, made once per distinct text (and tag)."""
        value, tag = ev.value, ev.tag
        if tag is None and not ev.style:
            hit = self.plain.get(value)
            if hit is None:
                hit = self.plain[value] = self.make(value, None, ev.implicit, ev)
            return hit
        key = (value, ev.implicit, tag)
        hit = self.other.get(key)
        if hit is None:
            hit = self.other[key] = self.make(value, tag, ev.implicit, ev)
        return hit

    def _collection(self, line: int) -> None:
        """One more list or mapping: refused past the file's budget of them, as soon as it is passed."""
        self.collections_left -= 1
        if self.collections_left < 0:
            raise LimitError(f"more than {self.max_collections} lists and mappings, above the limit of "
                             f"{MAX_COLLECTIONS} for each {MAX_FILE_BYTES >> 20} MiB of the file budget; write "
                             "fewer (a long list of empty {} or [] items?) or raise the budget (--max-file-mib)",
                             line)

    def _head(self, ev: Any, cls: type, count: int) -> tuple[_Node, int]:
        """A scalar or an alias read, the limits checked, and the count of the collection around it (`count`:
        before it)."""
        line = ev.start_mark.line + 1
        if cls is AliasEvent:
            return self._alias(ev, line, count)
        obj, tag, state = self._scalar(ev)
        count += 1
        if count > self.max_nodes:
            raise LimitError(_too_many(self.max_nodes), line)
        anchor = ev.anchor
        if anchor is not None and (anchor in self.anchors or anchor in self.open_anchors):
            self.built = False  # a duplicate anchor: PyYAML's composer decides
        return _Node(obj, tag, state, line, False, anchor, None), count

    def _alias(self, ev: Any, line: int, count: int) -> tuple[_Node, int]:
        """`_head` of an alias: its anchored node's object, line and tag (an undefined one is left to PyYAML)."""
        self.aliases += 1
        name = ev.anchor
        if self.aliases > MAX_ALIASES:
            raise LimitError(f"more than {MAX_ALIASES} aliases, above the limit; write the values out", line)
        if name in self.open_anchors:
            raise LimitError(f"the alias *{name} is inside the collection &{name} it refers to "
                             "(a self-referencing value has no end); remove the alias", line)
        if name in self.sizes:
            count += self.sizes[name]
            if count > self.max_nodes:
                raise LimitError(_too_many(self.max_nodes), line)
        target = self.anchors.get(name)
        if target is None:  # undefined: PyYAML's composer reports it with its position
            self.built = False
            return _Node(None, _YAML + "null", _OK, line, False, None, None), count
        return _Node(target.obj, target.tag, target.state, target.line, target.is_coll, None, target), count

    # ---- a scalar or an alias once placed: its tag, its anchor, what an alias repeats ------------------------
    # `hidden`: the depth of the innermost node whose problem keeps a walk of the node graph from reaching the
    # node (None: reached). Problems under it are kept, hidden, for the aliases that may repeat them. `depth`:
    # the open collections.

    def _node(self, ev: Any, cls: type, node: _Node, node_path: tuple | None, hidden: int | None,
              depth: int) -> None:
        """Note what a scalar or an alias adds at `node_path` (None: a key, not walked)."""
        problems = self.problems
        if cls is AliasEvent:
            if node.target is not None and node_path is not None:
                # noted here, repeated once the whole stream is within the limits (never before)
                self.log.append((None, (node.target, node_path)))
                problems.append((None, node.target, node_path, depth, hidden))
            return
        prob0 = len(problems)  # an anchored node's problems start here
        if node.state != _OK:
            self.built = False
            if node.state == _REFUSED and node_path is not None:
                problems.append((node.line, "tag", node_path, node.tag, hidden))
        if node.anchor is not None:
            self.sizes[node.anchor] = 1
            self.anchors[node.anchor] = Anchored(node.obj, node.line, False, node.tag, node.state, ev.value,
                                                 node_path or (), (0, 0), (prob0, len(problems)), depth)

    # ---- collections: one call each, from the start event to the end event ----------------------------------
    # `depth`: the collections open around the collection (its items, keys and values are at depth + 1). A plain
    # scalar (no anchor) and a collection are placed in the loop, anything else by `_head` and `_node`.

    def _opened(self, start: Any, cls: type, line: int, node_path: tuple | None, hidden: int | None,
                depth: int) -> tuple:
        """A collection's start with an anchor or a tag (or nested too deep): the limit checked, its anchor open,
        its tag's problem noted. Returns (`hidden` of its children, its first problem, its first line entry,
        its line)."""
        if depth >= MAX_DEPTH:
            raise LimitError(f"collections nested {depth + 1} deep, above the limit of {MAX_DEPTH}; "
                             "flatten the scenario", line)
        anchor, tag = start.anchor, start.tag
        if anchor is not None:
            if anchor in self.anchors or anchor in self.open_anchors:
                self.built = False  # a duplicate anchor: PyYAML's composer decides
            self.open_anchors.add(anchor)
        prob0 = len(self.problems)  # an anchored collection's problems and lines start here
        if tag is not None and tag != "!" and tag != (_MAP if cls is MappingStartEvent else _SEQ):
            self.built = False
            if tag not in STANDARD_TAGS and node_path is not None:
                self.problems.append((line, "tag", node_path, tag, hidden))
                hidden = depth
        return hidden, prob0, len(self.log), line

    def _closed(self, start: Any, obj: Any, path: tuple, opened: tuple, n: int, depth: int) -> None:
        """An anchored collection's end: its size and what its aliases repeat (its spans of lines and problems)."""
        anchor = start.anchor
        self.sizes[anchor] = n
        self.open_anchors.discard(anchor)
        _, prob0, log0, line = opened
        self.anchors[anchor] = Anchored(obj, line, True, start.tag, _OK, None, path, (log0, len(self.log)),
                                        (prob0, len(self.problems)), depth)

    def _sequence(self, start: Any, line: int, node_path: tuple | None, hidden: int | None, depth: int,
                  count: int) -> tuple:
        """A list at `node_path` (None: a key): (the list, the count of the collection around it)."""
        self._collection(line)
        opened = None
        if start.anchor is not None or start.tag is not None or depth >= MAX_DEPTH:
            opened = self._opened(start, SequenceStartEvent, line, node_path, hidden, depth)
            hidden = opened[0]
        get_event, plain = self.get_event, self.plain
        path = node_path or ()
        cont: list = []
        item_lines: list[int] = []
        self.log.append((path, item_lines))
        inner = depth + 1
        n = 1  # values, the list included
        while True:
            ev = get_event()
            cls = ev.__class__
            if cls is ScalarEvent and ev.anchor is None:
                hit = plain.get(ev.value) if ev.tag is None and not ev.style else None
                obj, tag, state = self._scalar(ev) if hit is None else hit
                line = ev.start_mark.line + 1
                n += 1
                if n > self.max_nodes:
                    raise LimitError(_too_many(self.max_nodes), line)
                item_lines.append(line)
                cont.append(obj)
                if state != _OK:
                    self._node(ev, cls, _Node(obj, tag, state, line, False, None, None), path + (len(cont) - 1,),
                               hidden, inner)
            elif cls is SequenceEndEvent:
                break
            elif cls is MappingStartEvent or cls is SequenceStartEvent:
                line = ev.start_mark.line + 1
                item_lines.append(line)
                if cls is SequenceStartEvent:  # (a direct call: the commonest nested node)
                    obj, n = self._sequence(ev, line, path + (len(cont),), hidden, inner, n)
                else:
                    obj, n = self._mapping(ev, line, path + (len(cont),), hidden, inner, n)
                cont.append(obj)
            else:
                node, n = self._head(ev, cls, n)
                item_lines.append(node.line)
                cont.append(node.obj)
                self._node(ev, cls, node, path + (len(cont) - 1,), hidden, inner)
        if opened is not None and start.anchor is not None:
            self._closed(start, cont, path, opened, n, depth)
        count += n
        if count > self.max_nodes:
            raise LimitError(_too_many(self.max_nodes), ev.start_mark.line + 1)
        return cont, count

    def _mapping(self, start: Any, line: int, node_path: tuple | None, hidden: int | None, depth: int,
                 count: int, env: bool = False) -> tuple:
        """A mapping at `node_path` (None: a key): (the mapping, the count of the collection around it). `env`:
        the top-level `env` mapping (its int, float and bool values are kept as written)."""
        self._collection(line)
        opened = None
        if start.anchor is not None or start.tag is not None or depth >= MAX_DEPTH:
            opened = self._opened(start, MappingStartEvent, line, node_path, hidden, depth)
            hidden = opened[0]
        get_event, plain, log, problems = self.get_event, self.plain, self.log, self.problems
        path = node_path or ()
        cont: dict = {}
        seen: set = set()  # the keys as written
        inner = depth + 1
        n = 1  # values, the mapping included
        while True:
            ev = get_event()
            cls = ev.__class__
            if cls is ScalarEvent and ev.anchor is None:  # keys are not walked (their tags are PyYAML's concern)
                hit = plain.get(ev.value) if ev.tag is None and not ev.style else None
                ckey, tag, state = self._scalar(ev) if hit is None else hit
                line = ev.start_mark.line + 1
                n += 1
                if n > self.max_nodes:
                    raise LimitError(_too_many(self.max_nodes), line)
                if state != _OK or tag not in _CORE_SCALARS:
                    self.built = False
                rkey = ev.value
                if rkey in seen:
                    problems.append((line, "duplicate", path + (rkey,), rkey, hidden))
                seen.add(rkey)
                log.append((path + (rkey,), line))
                pair_hidden = hidden
            elif cls is MappingEndEvent:
                break
            else:
                rkey, ckey, pair_hidden, n = self._key(ev, cls, path, seen, inner, hidden, n)
            ev = get_event()
            cls = ev.__class__
            if cls is ScalarEvent and ev.anchor is None and rkey is not None:
                hit = plain.get(ev.value) if ev.tag is None and not ev.style else None
                obj, tag, state = self._scalar(ev) if hit is None else hit
                line = ev.start_mark.line + 1
                n += 1
                if n > self.max_nodes:
                    raise LimitError(_too_many(self.max_nodes), line)
                cont[ckey] = obj
                if env and tag in AS_WRITTEN:
                    self.env_pairs.append((rkey, ev.value))
                if state != _OK:
                    self._node(ev, cls, _Node(obj, tag, state, line, False, None, None), path + (rkey,),
                               pair_hidden, inner)
            else:
                n = self._value(ev, cls, cont, path, rkey, ckey, pair_hidden, inner, env, n)
        if opened is not None and start.anchor is not None:
            self._closed(start, cont, path, opened, n, depth)
        count += n
        if count > self.max_nodes:
            raise LimitError(_too_many(self.max_nodes), ev.start_mark.line + 1)
        return cont, count

    def _key(self, ev: Any, cls: type, path: tuple, seen: set, depth: int, sup: int | None, count: int) -> tuple:
        """A mapping's key other than a scalar without an anchor: (key as written, key, `hidden` of its value,
        count). A key that is not a scalar is a problem, and its value is not walked (its written key: None)."""
        if cls is SequenceStartEvent or cls is MappingStartEvent:
            line = ev.start_mark.line + 1
            self.problems.append((line, "key", path, "", sup))
            self.built = False
            collection = self._mapping if cls is MappingStartEvent else self._sequence
            _, count = collection(ev, line, None, depth - 1, depth, count)
            return None, None, depth - 1, count
        node, count = self._head(ev, cls, count)
        if node.state != _OK or node.tag not in _CORE_SCALARS:
            self.built = False
        if node.is_coll:
            self.problems.append((node.line, "key", path, "", sup))
            self.built = False
            rkey = ckey = None
            hidden = depth - 1
        else:
            rkey = ev.value if cls is ScalarEvent else (node.target.text if node.target is not None else None)
            if rkey in seen:
                self.problems.append((node.line, "duplicate", path + (rkey,), rkey, sup))
            seen.add(rkey)
            self.log.append((path + (rkey,), node.line))
            ckey, hidden = node.obj, sup
        self._node(ev, cls, node, None, hidden, depth)
        return rkey, ckey, hidden, count

    def _value(self, ev: Any, cls: type, cont: dict, path: tuple, rkey: Any, ckey: Any, hidden: int | None,
               depth: int, env: bool, count: int) -> int:
        """A mapping's value other than a scalar without an anchor (or any value of a key that is not a
        scalar, kept out of the data): returns the frame's count."""
        node_path = path + (None,) if rkey is None else path + (rkey,)
        if cls is SequenceStartEvent or cls is MappingStartEvent:
            if cls is MappingStartEvent:
                env = depth == 1 and node_path == ("env",) and ckey == "env"
                obj, count = self._mapping(ev, ev.start_mark.line + 1, node_path, hidden, depth, count, env)
            else:
                obj, count = self._sequence(ev, ev.start_mark.line + 1, node_path, hidden, depth, count)
            if rkey is not None:
                cont[ckey] = obj
            return count
        node, count = self._head(ev, cls, count)
        if rkey is not None:
            cont[ckey] = node.obj
            if env and not node.is_coll and node.tag in AS_WRITTEN:
                self.env_pairs.append((rkey, ev.value if cls is ScalarEvent else node.target.text))
            elif depth == 1 and rkey == "env" and cls is AliasEvent:
                self.built = False  # `env: *name`: PyYAML's node graph says which values are as written
        self._node(ev, cls, node, node_path, hidden, depth)
        return count


def _too_many(max_nodes: int) -> str:
    return (f"more than {max_nodes} values once aliases are expanded, above the limit (an alias expanding to copies "
            "of copies?); write the values out or make the scenario smaller")


__all__ = ["read_document", "check_yaml_events", "YamlDocument", "LineMap", "Problem", "LOADER", "STANDARD_TAGS",
           "AS_WRITTEN"]
