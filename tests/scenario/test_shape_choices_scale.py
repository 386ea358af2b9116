"""`shape_choices` of any length validate in linear, small work: each choice is checked in plain Python, the
schema only sees a choice that the plain check does not accept (so its error is the schema's own)."""
from __future__ import annotations

import jsonschema
import pytest
from hypothesis import given, settings, strategies as st

from opsim.errors import ScenarioError
from opsim.scenario.loader import load_scenario
from opsim.scenario.schema import SHAPE_CHOICE, validator

DIMS = st.one_of(st.integers(-3, 5), st.just(1 << 40), st.just((1 << 40) + 1), st.booleans(), st.floats(0, 4),
                 st.text(max_size=2), st.none())
SHAPES = st.lists(DIMS, max_size=10)
ITEMS = st.one_of(SHAPES, st.lists(SHAPES, max_size=3), st.lists(st.one_of(SHAPES, DIMS), max_size=3), DIMS,
                  st.dictionaries(st.text(max_size=2), SHAPES, max_size=2))


def _errors(v, instance):
    return sorted((tuple(e.absolute_path), e.message) for e in v.iter_errors(instance))


@settings(max_examples=300, deadline=None)
@given(st.lists(ITEMS, min_size=1, max_size=4))
def test_the_plain_check_accepts_and_refuses_exactly_what_the_schema_does(choices):
    """The same errors, at the same paths, as the schema's own `items: SHAPE_CHOICE` gives."""
    plain = jsonschema.validators.extend(
        jsonschema.Draft202012Validator,
        type_checker=jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
            "integer", lambda _c, x: isinstance(x, int) and not isinstance(x, bool)))
    want = _errors(plain({"type": "array", "minItems": 1, "items": SHAPE_CHOICE}), choices)
    got = _errors(type(validator())({"type": "array", "minItems": 1, "shapeChoiceItems": SHAPE_CHOICE}), choices)
    assert got == want


def _scenario(tmp_path, choices: str):
    p = tmp_path / "s.yaml"
    p.write_text("name: s\nthreads:\n  - name: a\n    program:\n      - op: Add\n        dtype: float16\n"
                 f"        shape_choices: {choices}\n")
    return p


def test_valid_choices_never_reach_the_schema_one_by_one(tmp_path, monkeypatch):
    """5,000 valid choices: the schema's `oneOf` is asked about none of them (it was asked 5,000 times, at
    ~0.2 ms each, so 200,000 choices took 40 s)."""
    calls = []
    cls = type(validator())
    one_of = cls.VALIDATORS["oneOf"]

    def counted(*args):
        calls.append(1)
        return one_of(*args)
    monkeypatch.setitem(cls.VALIDATORS, "oneOf", counted)
    choices = "[" + ", ".join(f"[{i % 7 + 1}, {i % 5 + 1}]" if i % 2 else f"[[{i % 3 + 1}], [1]]"
                              for i in range(5000)) + "]"
    cfg = load_scenario(_scenario(tmp_path, choices))
    assert len(cfg.threads[0].program[0].shape_sets) == 5000
    assert len(calls) < 10


@pytest.mark.parametrize("bad, message", [("[[2, 2], [2, -1]]", "shape_choices[1][1]: negative dimension -1"),
                                          ("[[2, 2], [2, true]]", "shape_choices[1][1]: expected an integer"),
                                          ("[[2, 2], x]", "shape_choices[1]: ")])
def test_a_bad_choice_among_many_is_named(tmp_path, bad, message):
    import re
    with pytest.raises(ScenarioError, match=re.escape(message)):
        load_scenario(_scenario(tmp_path, bad))
