"""The one-pass YAML reader (opsim.yamlio.reader) against PyYAML's own node graph and constructor: the
same data, the same line of every field path, the same problems in the same order, the same errors."""
from __future__ import annotations

import math

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from opsim.errors import ScenarioError
from opsim.yamlio import reader as yaml_reader
from opsim.yamlio.limits import LimitError
from opsim.yamlio.reader import check_yaml_events
from opsim.scenario.loader import load_scenario, read_yaml
from opsim.yamlio.reader import LOADER, STANDARD_TAGS, LineMap, read_document

# ---- the reference: PyYAML's node graph, walked ----------------------------------------------------------


def _walk(node, path, lines, problems):
    """Lines and problems as a depth-first walk of the composed node graph finds them (keys not walked, a
    refused tag not looked inside, an alias walked again where it stands)."""
    lines.setdefault(path, node.start_mark.line + 1)
    if (node.tag or "") not in STANDARD_TAGS:
        problems.append((node.start_mark.line + 1, "tag", path))
        return
    if isinstance(node, yaml.MappingNode):
        seen = set()
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                problems.append((key_node.start_mark.line + 1, "key", path))
                continue
            key = key_node.value
            if key in seen:
                problems.append((key_node.start_mark.line + 1, "duplicate", path + (key,)))
            seen.add(key)
            lines.setdefault(path + (key,), key_node.start_mark.line + 1)
            _walk(value_node, path + (key,), lines, problems)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, path + (i,), lines, problems)


def reference(text):
    node = yaml.compose(text, Loader=LOADER)
    lines, problems = {}, []
    _walk(node, (), lines, problems)
    return lines, problems


def typed(x):
    """The data with every scalar's type made part of it (1, 1.0 and True compare equal in Python)."""
    if isinstance(x, dict):
        return {typed(k): typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [typed(v) for v in x]
    if isinstance(x, float) and math.isnan(x):
        return ("float", "nan")
    return (type(x).__name__, x)


def same_as_pyyaml(text, built=True):
    """Check the pass against the reference; `built`: the pass must build the data itself."""
    doc = read_document(text)
    lines, problems = reference(text)
    assert [(p.line, p.kind, p.path) for p in doc.problems] == problems
    if problems:
        return doc  # reported before anything reads the lines
    assert dict(doc.lines) == lines
    assert doc.built or not built
    try:
        expected = yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError:
        assert not doc.built
        with pytest.raises(ScenarioError, match="YAML error"):
            read_yaml(text, "s.yaml")
        return doc
    assert typed(doc.data if doc.built else read_yaml(text, "s.yaml")[0]) == typed(expected)
    return doc


# ---- generated documents -----------------------------------------------------------------------------------

PLAIN = ["1", "010", "0x1f", "-3", "1.5", "1e3", "1.0e3", ".inf", "-.Inf", ".nan", "~", "null", "true", "yes",
         "off", "x", "Add", "float16", "a b", "1_000", "0o7", "+12", "0.", "2"]
QUOTED = ["'010'", '"yes"', "'x'", '""', "'1.5'"]
KEYS = ["name", "op", "shape", "count", "body", "a", "b", "1", "yes", "'q'", "x y"]


@st.composite
def documents(draw):
    """YAML text with mappings and lists in block and flow style, anchors and aliases to finished values."""
    anchors: list[str] = []  # finished anchored values
    names = iter(range(10 ** 6))

    def scalar():
        return draw(st.sampled_from(PLAIN + QUOTED + ["!!str 010", "!!int 7", "!!float 2", "! 12"]))

    def anchor():
        if draw(st.integers(0, 9)) == 0:
            name = f"a{next(names)}"
            return f"&{name} ", name
        return "", None

    def flow(depth):
        if anchors and draw(st.integers(0, 7)) == 0:
            return "*" + draw(st.sampled_from(anchors))
        mark, name = anchor()
        kind = draw(st.sampled_from(["s", "s", "l", "m"])) if depth < 4 else "s"
        if kind == "s":
            out = mark + scalar()
        elif kind == "l":
            out = mark + "[" + ", ".join(flow(depth + 1) for _ in range(draw(st.integers(0, 3)))) + "]"
        else:
            keys = draw(st.lists(st.sampled_from(KEYS), max_size=3, unique=True))
            out = mark + "{" + ", ".join(f"{k}: {flow(depth + 1)}" for k in keys) + "}"
        if name:
            anchors.append(name)
        return out

    def block(depth, indent):
        pad = " " * indent
        rows = []
        if draw(st.booleans()) or depth > 2:
            for k in draw(st.lists(st.sampled_from(KEYS), min_size=1, max_size=4, unique=True)):
                if depth < 3 and draw(st.integers(0, 2)) == 0:
                    mark, name = anchor()
                    rows.append(f"{pad}{k}: {mark}".rstrip())
                    rows += block(depth + 1, indent + 2)
                    if name:
                        anchors.append(name)
                else:
                    rows.append(f"{pad}{k}: {flow(depth + 1)}")
        else:
            for _ in range(draw(st.integers(1, 3))):
                if draw(st.booleans()):
                    rows.append(f"{pad}-")
                    rows += block(depth + 1, indent + 2)
                else:
                    rows.append(f"{pad}- {flow(depth + 1)}")
        return rows

    return "\n".join(block(0, 0)) + "\n"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents())
def test_generated_documents_read_as_pyyaml_reads_them(text):
    same_as_pyyaml(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.data())
def test_generated_documents_with_problems_report_as_the_walk_does(text, data):
    """Refused tags, duplicate keys and keys that are lists, put anywhere (also inside anchored values)."""
    lines = text.splitlines()
    i = data.draw(st.integers(0, len(lines) - 1))
    row = lines[i]
    cut = len(row) - len(row.lstrip(" -"))
    lines[i] = row[:cut] + data.draw(st.sampled_from(["!foo ", "!!python/tuple ", "? [k]\n" + " " * cut + ": "]))
    lines[i] += row[cut:]
    text = "\n".join(lines) + "\n"
    try:
        reference(text)
    except yaml.YAMLError:
        return  # the edit broke the syntax
    same_as_pyyaml(text, built=False)


# ---- lines and problems, by case ------------------------------------------------------------------------


@pytest.mark.parametrize("text", [
    "a: 1\nb:\n  - [1,\n     2]\n  - {c: x,\n     d: [3,\n         4]}\n",
    "- - - 1\n    - 2\n  - 3\n",
    "a: &x\n  b: [1,\n      2]\nc: *x\nd: [*x, *x]\n",
    "a: &x [1, 2]\nb: {<<: {c: 1}, d: *x}\n",
    "? &k [!foo 1]\n: v\nb: *k\n",
    "a: &m {x: 1, x: !bar 2}\nb: *m\nc: [*m]\n",
    "a: !foo &y [{q: 1, q: 2}]\nb: *y\n",
    "a: &x [&y [!foo 1]]\nb: !bar [*x]\nc: *y\n",
    "? [1]\n: {a: !foo 1, a: 2}\n",
    "x: 2024-01-01\n",
    "a: &s 1\n? *s\n: 2\nb: *s\n",
    "a: 1\nb: !!str 2\nc: !!int '3'\nd: ! 4\n",
])
def test_lines_and_problems_as_the_walk_finds_them(text):
    same_as_pyyaml(text, built=False)


def test_a_list_item_line_is_its_own_and_a_mapping_value_line_is_its_key():
    doc = read_document("a:\n  [1,\n   2,\n\n   3]\nb:\n\n  4\n")
    assert doc.lines[("a", 2)] == 5 and doc.lines[("a", 0)] == 2
    assert doc.lines[("b",)] == 6  # the key's line, not the value's
    assert ("a", 3) not in doc.lines and ("a", -1) not in doc.lines and doc.lines.get(("a", 9)) is None
    assert doc.lines[("a", True)] == 3  # as a dict of paths: True == 1
    assert isinstance(doc.lines, LineMap) and len(doc.lines) == len(dict(doc.lines)) == 6


def test_an_alias_reports_at_its_own_path_with_the_anchored_lines(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\n"
                    "threads:\n"
                    "  - name: a\n"
                    "    program:\n"
                    "      - &step\n"
                    "        op: Add\n"
                    "        shape: [8,\n"
                    "                -8]\n"
                    "  - name: b\n"
                    "    program: [*step]\n")
    with pytest.raises(ScenarioError) as exc:
        load_scenario(path)
    msg = str(exc.value)
    assert f"{path}:8: threads[0].program[0].shape[1]: negative dimension -8" in msg
    assert f"{path}:8: threads[1].program[0].shape[1]: negative dimension -8" in msg


def test_refused_tags_are_reported_at_every_alias():
    with pytest.raises(ScenarioError) as exc:
        read_yaml("a: &x [1, !secret 2]\nb: *x\nc:\n  - *x\n", "s.yaml")
    assert str(exc.value).splitlines()[1:] == [
        "  s.yaml:1: a[1]: the tag !secret is not allowed: only YAML's standard tags (strings, numbers, "
        "booleans, null, lists, mappings) are allowed",
        "  s.yaml:1: b[1]: the tag !secret is not allowed: only YAML's standard tags (strings, numbers, "
        "booleans, null, lists, mappings) are allowed",
        "  s.yaml:1: c[0][1]: the tag !secret is not allowed: only YAML's standard tags (strings, numbers, "
        "booleans, null, lists, mappings) are allowed"]


def test_env_values_stay_as_written_through_aliases_and_merges():
    text = "v: &v 010\ne: &e {B: 1.50}\nenv: {A: *v, C: true, D: '07', E: 0x1F}\n"
    data, _ = read_yaml(text, "s.yaml")
    assert data["env"] == {"A": "010", "C": "true", "D": "07", "E": "0x1F"} and data["v"] == 8
    data, _ = read_yaml(text.replace("env: {", "env: {<<: *e, "), "s.yaml")  # merge keys: PyYAML constructs
    assert data["env"] == {"B": "1.50", "A": "010", "C": "true", "D": "07", "E": "0x1F"}
    data, _ = read_yaml("e: &e {A: 010}\nenv: *e\n", "s.yaml")
    assert data["env"] == {"A": "010"} and data["e"] is data["env"]


@pytest.mark.parametrize("text", [
    "base: &b {x: 1, y: [1, 2]}\nz: {<<: *b, y: 3}\nw: {<<: [*b, {q: 1}], x: 0}\n",
    "x: !!binary aGVsbG8=\n",
    "x: {=: 1}\n",
    "2024-01-01: x\n",
])
def test_documents_left_to_pyyaml_read_as_safe_load_reads_them(text):
    assert not read_document(text).built
    assert typed(read_yaml(text, "s.yaml")[0]) == typed(yaml.safe_load(text))


@pytest.mark.parametrize("text, match", [
    ("a: *nothing\n", "s.yaml:1:4: YAML syntax error: found undefined alias 'nothing'"),
    ("a: 1\n---\nb: 2\n", "s.yaml:2:1: YAML syntax error: expected a single document in the stream but found "
                          "another document"),
    ("a: &x 1\nb: &x 2\n", "s.yaml:2:4: YAML syntax error: found duplicate anchor 'x'; first occurrence second "
                           "occurrence"),
    ("x: !!int abc\n", None),
    ("x: {<<: 1}\n", "s.yaml: YAML error: while constructing a mapping"),
    ("!foo k: v\n", "s.yaml: YAML error: could not determine a constructor for the tag '!foo'"),
    ("", "s.yaml: the scenario is empty"),
    ("a: &x [*x]\n", "s.yaml:1: the alias \\*x is inside the collection &x it refers to"),
])
def test_errors_pyyaml_reports(text, match):
    if match is None:  # PyYAML's constructor raises a bare ValueError for an integer it cannot read; opsim
        with pytest.raises(ValueError):  # refuses it with the line
            yaml.load(text, Loader=LOADER)  # noqa: S506 - a safe loader
        with pytest.raises(ScenarioError, match=r"s\.yaml:1: 'abc' cannot be read as !!int"):
            read_yaml(text, "s.yaml")
        return
    with pytest.raises(ScenarioError, match=match):
        read_yaml(text, "s.yaml")


def test_limits_come_before_composer_errors_and_problems():
    deep = "[" * 70 + "]" * 70
    with pytest.raises(LimitError, match="nested 65 deep"):
        check_yaml_events(f"a: *undefined\nb: !foo 1\nc: {deep}\n")
    with pytest.raises(ScenarioError, match="s.yaml:3: collections nested 65 deep"):
        read_yaml(f"a: *undefined\nb: !foo 1\nc: {deep}\n", "s.yaml")
    check_yaml_events("a: *undefined\nb: !foo 1\n---\nc: 1\n")  # not limits: reported when the scenario is read


def test_each_distinct_scalar_is_one_object():
    doc = read_document("a: [1000, 1000, '1000']\nb: 1000\n")
    assert doc.data == {"a": [1000, 1000, "1000"], "b": 1000}
    assert doc.data["a"][0] is doc.data["b"]


def test_alias_bombs_are_refused_before_anything_is_expanded():
    """Aliases of nearly a million values each, in collections still open: the limit is known only when they
    close, and nothing (data, lines or problems) is expanded before (this would take minutes and gigabytes)."""
    base = "a: &a [" + ", ".join(["!foo 1"] * 999) + "]\nb: &b [" + ", ".join(["*a"] * 950) + "]\n"
    nested = "c: " + "".join("[*b, " for _ in range(40)) + "1" + "]" * 40 + "\n"
    with pytest.raises(LimitError, match="values once aliases are expanded"):
        check_yaml_events(base + nested)
    with pytest.raises(ScenarioError, match="s.yaml:3: more than 1000000 values"):
        read_yaml(base + nested, "s.yaml")


def test_lists_are_bounded_at_the_value_past_the_limit(monkeypatch):
    """The values limit holds at the same value and line whether a list is read without a frame (plain
    scalars only) or with one: a list counts itself and its values, and a finished inner list adds to it."""
    monkeypatch.setattr(yaml_reader, "MAX_NODES", 50)
    with pytest.raises(LimitError) as exc:
        check_yaml_events("- 1\n" * 50)
    assert exc.value.line == 50 and "more than 50 values" in str(exc.value)
    assert len(read_document("- 1\n" * 49).data) == 49
    with pytest.raises(LimitError) as exc:  # 1 + 30 + [1] (2) = 33 before line 32; the 18th value after is the 51st
        check_yaml_events("- 1\n" * 30 + "- [1]\n" + "- 1\n" * 20)
    assert exc.value.line == 31 + 18
    with pytest.raises(LimitError) as exc:  # a finished list of 40 adds 41 to the 11 before: reported at its end
        check_yaml_events("- 1\n" * 10 + "- [" + "1, " * 39 + "1\n   ]\n")
    assert exc.value.line == 12
