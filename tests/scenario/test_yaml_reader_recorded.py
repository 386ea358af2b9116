"""The one-pass YAML reader gives, for 2,000 generated hostile documents (deep nesting, huge integers, anchors
and aliases, merges, duplicate keys, tags, several documents, NUL bytes, limits lowered so that they trip),
exactly the outcome recorded in tests/data/yaml_reader_outcomes.json: the same data (types and shared objects
included), line map, problems, flags and LimitError (message and line), or a YAML error at the same line.

The outcomes were recorded from the reader as it was when it was one flat loop over the events, before it was
reshaped into a method per collection; a change of the reader that changes any outcome fails here. To record
again after an intended change: `python tests/scenario/test_yaml_reader_recorded.py --record`.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import random
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Iterator

import yaml

from opsim.yamlio import reader

RECORD = Path(__file__).resolve().parents[1] / "data" / "yaml_reader_outcomes.json"
SEED, COUNT = 32, 2000

SCALARS = ["1", "010", "0x1f", "-3", "1.5", "1e3", ".inf", ".nan", "~", "null", "true", "yes", "off", "x", "Add",
           "'q'", '"s"', '""', "2024-01-01", "1_000", "0o7", "9" * 100, "12345678901234567890123", "!!int 7",
           "!!float 2", "!!str 010", "! 12", "!foo 1", "!<tag:yaml.org,2002:str> t", '"a\\0b"', "x y", "!!null ''"]
RARE = ["9" * 101, "-" + "9" * 100, "!!int abc", "!!bool maybe", "!!binary aGVsbG8=", "!!timestamp 2001-01-01",
        "!!python/tuple x", "=", "<<", "!!merge <<", "!!value ="]
KEYS = ["a", "b", "env", "name", "op", "1", "yes", "'a'", "<<", "=", "~", "2024-01-01", "!foo k", "!!str a", "1.5",
        "null"]
COLLECTION_TAGS = ["", "", "", "", "!foo ", "! ", "!!{kind} ", "!!set ", "!!omap ", "!!map ", "!!seq "]
EDITS = ["\0", "[", "]", "{", ":", "&", "*", "!", "\t", "\ufeff", "\x85", "'", "%YAML 1.1\n"]
LIMITS = [{}, {}, {"MAX_NODES": 5}, {"MAX_NODES": 12}, {"MAX_NODES": 30}, {"MAX_ALIASES": 1}, {"MAX_ALIASES": 3},
          {"MAX_DEPTH": 2}, {"MAX_DEPTH": 4}, {"MAX_NUMBER_CHARS": 2}, {"MAX_NODES": 20, "MAX_DEPTH": 3,
                                                                          "MAX_ALIASES": 2}]


class _Generator:
    """One document: block and flow collections, anchors (some duplicated), aliases (some undefined or inside
    their own collection), tags, merge keys, complex keys; `rich` makes anchors, aliases and tags common."""

    def __init__(self, rnd: random.Random):
        self.rnd, self.rich = rnd, rnd.random() < 0.5
        self.anchors: list[str] = []
        self.open: list[str] = []

    def chance(self, rich: int, plain: int) -> bool:
        return self.rnd.randrange(rich if self.rich else plain) == 0

    def anchor(self) -> str | None:
        if self.chance(4, 13):
            return f"a{len(self.anchors) + len(self.open)}"
        if self.anchors and self.chance(12, 12):
            return self.rnd.choice(self.anchors)  # a duplicate anchor
        return None

    def alias(self) -> str:
        return "*" + self.rnd.choice(self.anchors + self.open + ["undefined"])

    def scalar(self) -> str:
        text = self.rnd.choice(RARE if self.rnd.randrange(16) == 0 else SCALARS)
        return ("!foo " if self.rich and self.rnd.randrange(6) == 0 else "") + text

    def collection(self, name: str | None, kind: str, body: Any) -> Any:
        """The collection `body()` makes, its anchor open meanwhile (a flow collection: `kind`, "seq" or "map",
        with its anchor and a tag in front)."""
        if name:
            self.open.append(name)
        made = body()
        if name:
            self.open.remove(name)
            self.anchors.append(name)
        if not kind:
            return made
        return (f"&{name} " if name else "") + self.rnd.choice(COLLECTION_TAGS).format(kind=kind) + made

    def flow(self, depth: int) -> str:
        if self.chance(5, 10):
            return self.alias()
        name = self.anchor()
        kind = self.rnd.choice("sssml") if depth < 6 else "s"
        if kind == "s":
            text = (f"&{name} " if name else "") + self.scalar()
            if name:
                self.anchors.append(name)
            return text
        if kind == "l":
            return self.collection(name, "seq", lambda: "[" + ", ".join(
                self.flow(depth + 1) for _ in range(self.rnd.randrange(5))) + "]")
        return self.collection(name, "map", lambda: "{" + ", ".join(
            f"{self.key(depth)}: {self.flow(depth + 1)}" for _ in range(self.rnd.randrange(5))) + "}")

    def key(self, depth: int) -> str:
        return "? " + self.flow(depth + 1) if self.chance(3, 9) else self.rnd.choice(KEYS)

    def block(self, depth: int, indent: int) -> list[str]:
        pad, rows = " " * indent, []
        if self.rnd.random() < 0.5 or depth > 3:
            for _ in range(1 + self.rnd.randrange(4)):
                key, r = self.rnd.choice(KEYS), self.rnd.randrange(6)
                if r == 0 and depth < 4:
                    name = self.anchor()
                    rows.append(f"{pad}{key}:" + (f" &{name}" if name else ""))
                    rows += self.collection(name, "", lambda: self.block(depth + 1, indent + 2))
                elif r == 1:
                    rows += [f"{pad}? {self.flow(depth + 1)}", f"{pad}: {self.flow(depth + 1)}"]
                elif r == 2 and self.anchors:
                    rows.append(f"{pad}<<: {self.alias()}")
                else:
                    rows.append(f"{pad}{key}: {self.flow(depth + 1)}")
        else:
            for _ in range(1 + self.rnd.randrange(4)):
                if self.rnd.randrange(3) == 0 and depth < 4:
                    rows += [f"{pad}-"] + self.block(depth + 1, indent + 2)
                else:
                    rows.append(f"{pad}- {self.flow(depth + 1)}")
        return rows


def document(rnd: random.Random) -> str:
    """A generated text: one document or several, sometimes with one character inserted anywhere."""
    gen = _Generator(rnd)
    docs = ["\n".join(gen.block(0, 0)) + "\n"]
    while rnd.randrange(7) == 0:
        docs.append(rnd.choice(["", "--- 1\n", "...\n"]) + "\n".join(gen.block(0, 0)) + "\n")
    text = "---\n".join(docs)
    if rnd.randrange(10) == 0:
        i = rnd.randrange(len(text) + 1)
        text = text[:i] + rnd.choice(EDITS) + text[i:]
    return text


FIXED = ["[" * 70 + "]" * 70, "a: " + "[" * 63 + "]" * 63, "a: &a [*a]\n", "a: &a {b: *a}\n", "- 1\n" * 50, "",
         "---\n", "--- 1\n--- 2\n", "a: \0", "x: " + "9" * 5000, "env: {A: 010, B: 1.5, C: yes, D: x}\n",
         "e: &e {A: 010}\nenv: *e\n", "env: &e {A: 010}\nf: *e\n", "a: &x 1\nb: &x 2\n", "? [a]\n: 1\n",
         "{[1]: 2, {a: 1}: 3}", "!!map {a: 1}", "!!seq [1]", "!!set {a, b}", "&r [1, &r [2], *r]",
         "? &k [!foo 1]\n: v\nb: *k\n", "a: &m {x: 1, x: !bar 2}\nb: *m\nc: [*m]\n",
         "a: !foo &y [{q: 1, q: 2}]\nb: *y\n", "a: &x [&y [!foo 1]]\nb: !bar [*x]\nc: *y\n",
         "? [1]\n: {a: !foo 1, a: 2}\n", "a: &s 1\n? *s\n: 2\nb: *s\n",
         # what an alias repeats of the problems its anchored node hid, or its old place hid
         "a: !foo [&x [!bar 1]]\nb: *x\n", "a: !foo {k: &x {q: !bar 1}}\nb: [*x]\n",
         "? &k [!foo 1, &j [!baz 2]]\n: v\nb: *k\nc: *j\n", "a: &v [1]\n? *v\n: &w {x: !foo 1}\nb: *w\n",
         "? [&w {x: !foo 1}]\n: 1\nb: *w\n",
         "base: &b {x: 1, y: [1, 2]}\nz: {<<: *b, y: 3}\nw: {<<: [*b, {q: 1}], x: 0}\n",
         "a: &a [" + ", ".join(["!foo 1"] * 999) + "]\nb: &b [" + ", ".join(["*a"] * 950) + "]\nc: "
         + "".join("[*b, " for _ in range(40)) + "1" + "]" * 40 + "\n"]


def cases() -> Iterator[tuple[str, dict[str, int]]]:
    """(text, limits to lower) of every case, always the same."""
    rnd = random.Random(SEED)
    for text in FIXED:
        for limits in ({}, {"MAX_NODES": 5}, {"MAX_DEPTH": 2}, {"MAX_ALIASES": 1}):
            yield text, limits
    for _ in range(COUNT):
        yield document(rnd), rnd.choice(LIMITS)


def canonical(data: Any) -> list:
    """The data as a flat list in walk order: each object's type and value, or ("ref", n) for an object met
    before (so that shared objects, as aliases make them, are part of it)."""
    ids: dict[int, int] = {}
    out: list = []
    work = [data]
    while work:
        obj = work.pop()
        if id(obj) in ids:
            out.append(("ref", ids[id(obj)]))
            continue
        ids[id(obj)] = len(ids)
        if isinstance(obj, dict):
            out.append(("map", len(obj)))
            work += reversed([x for kv in obj.items() for x in kv])
        elif isinstance(obj, list):
            out.append(("seq", len(obj)))
            work += reversed(obj)
        else:
            out.append(("nan",) if isinstance(obj, float) and math.isnan(obj) else (type(obj).__name__, repr(obj)))
    return out


@contextlib.contextmanager
def lowered(module: ModuleType, limits: dict[str, int]) -> Iterator[None]:
    saved = {name: getattr(module, name) for name in limits}
    try:
        for name, value in limits.items():
            setattr(module, name, value)
        yield
    finally:
        for name, value in saved.items():
            setattr(module, name, value)


LIMIT_KINDS = ["values once aliases are expanded", "aliases, above the limit", "collections nested",
               "is inside the collection", "an integer of", "cannot be read as"]


def outcome(module: ModuleType, text: str, limits: dict[str, int]) -> tuple[str, set[str]]:
    """A digest of what `module.read_document` gives for the text (a YAML error: its class of error and line
    only, as PyYAML words it), and the kinds of outcome it is."""
    try:
        with lowered(module, limits):
            doc = module.read_document(text)
        lines = doc.lines
        found: tuple = ("doc", canonical(doc.data), list(lines._paths.items()), list(lines._items.items()),
                        [(p.line, p.kind, p.path, p.detail) for p in doc.problems], doc.empty, doc.built,
                        doc.env_as_written)
        kinds = {"built" if doc.built else "pyyaml", *(p.kind for p in doc.problems),
                 *(["env"] if doc.env_as_written else [])}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        found, kinds = ("yaml", mark.line if mark is not None else None), {"yaml"}
    except reader.LimitError as exc:
        found, kinds = ("limit", str(exc), exc.line), {k for k in LIMIT_KINDS if k in str(exc)}
    return hashlib.sha256(repr(found).encode()).hexdigest()[:16], kinds


def outcomes(module: ModuleType) -> dict[str, Any]:
    """A digest of the cases and one of each case's outcome, and every kind of outcome met."""
    texts = hashlib.sha256()
    digests, kinds = [], set()
    for text, limits in cases():
        texts.update(repr((text, sorted(limits.items()))).encode())
        digest, kind = outcome(module, text, limits)
        digests.append(digest)
        kinds |= kind
    return {"cases": texts.hexdigest()[:16], "outcomes": digests, "kinds": sorted(kinds)}


def test_every_case_reads_as_recorded():
    """Every case as recorded; and the cases reach built documents, documents left to PyYAML, every kind of
    problem, `env` values kept as written, every limit and YAML errors (else the record would pin little)."""
    recorded = json.loads(RECORD.read_text(encoding="utf-8"))
    found = outcomes(reader)
    assert found["cases"] == recorded["cases"], "the generated cases changed: record again (see the docstring)"
    differ = [i for i, (a, b) in enumerate(zip(found["outcomes"], recorded["outcomes"])) if a != b]
    if differ:
        text, limits = list(cases())[differ[0]]
        raise AssertionError(f"{len(differ)} cases read differently, the first: {text!r} with limits {limits}")
    assert len(found["outcomes"]) == len(recorded["outcomes"])
    assert {"built", "pyyaml", "tag", "key", "duplicate", "env", "yaml", *LIMIT_KINDS} <= set(found["kinds"])


if __name__ == "__main__" and sys.argv[1:] == ["--record"]:
    RECORD.write_text(json.dumps(outcomes(reader), indent=0) + "\n", encoding="utf-8")
    print(f"wrote {RECORD}")
