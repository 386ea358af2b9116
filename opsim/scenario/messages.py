"""Scenario error messages: field paths, the collector of "file:line: path: message" entries, and the wording
of JSON-schema violations (shared by the scenario loader and the sweep-file checks)."""
from __future__ import annotations

import difflib
from typing import Any, Iterable, Mapping

from opsim.errors import shown
from opsim.scenario.schema import STEP_KEYS, validator
from opsim.yamlio.messages import Path_, _Errors, format_path  # noqa: F401  (the scenario's modules import them here)

def _suggest(word: Any, choices: Iterable[str]) -> str:
    word = str(word) if not isinstance(word, str) else word
    if len(word) > 200:  # difflib's cost grows with the product of the lengths
        return ""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


# ---- schema errors -----------------------------------------------------------------------------------

def _schema_errors(data: Any, errors: _Errors, skip: set[Path_] = frozenset()) -> None:
    """Report schema violations, except at `skip` (paths already reported)."""
    from jsonschema.exceptions import best_match  # lazy: keeps jsonschema out of importing opsim.scenario.messages
    for err in validator().iter_errors(data):
        if tuple(err.absolute_path) not in skip:
            _report(err, errors, best_match)


def _allowed_props(schema: Mapping[str, Any]) -> list[str]:
    return list((schema.get("properties") or {}).keys())


def _report(err: Any, errors: _Errors, best_match: Any) -> None:
    path = tuple(err.absolute_path)
    kind = err.validator
    inst = err.instance
    if kind == "additionalProperties" and isinstance(inst, dict):
        allowed = _allowed_props(err.schema)
        for k in inst:
            if k not in allowed:
                errors.add(path + (k,), f"unknown field {shown(k)}{_suggest(k, allowed)}; allowed fields: "
                                        f"{', '.join(allowed)}")
        return
    if kind == "anyOf" and isinstance(err.schema.get("anyOf"), list) and \
            all(set(s) == {"required"} for s in err.schema["anyOf"]):
        keys = list(inst) if isinstance(inst, dict) else []
        hint = "".join(_suggest(k, STEP_KEYS) for k in keys[:1])
        errors.add(path, f"a program step needs one of the keys {', '.join(STEP_KEYS)}; got "
                         f"{', '.join(map(str, keys)) or 'nothing'}{hint}")
        return
    if kind in ("oneOf", "anyOf") and err.context:
        sub = _negative_dim(err) or best_match(err.context)
        if sub is not None:
            _report(sub, errors, best_match)
            return
    if kind == "required":
        missing = [k for k in err.validator_value if not isinstance(inst, dict) or k not in inst]
        for k in missing:
            errors.add(path, f"missing required field {k!r}")
        return
    if kind == "enum":
        allowed = err.validator_value
        errors.add(path, f"{shown(inst)} is not allowed{_suggest(inst, map(str, allowed))}; use one of: "
                         f"{', '.join(map(str, allowed))}")
        return
    if kind == "type":
        want = err.validator_value
        want = " or ".join(want) if isinstance(want, list) else want
        errors.add(path, f"expected {_article(want)}, got {_describe(inst)}")
        return
    if kind == "minimum" and path and (isinstance(path[-1], int)) and any(
            p in ("shape", "shapes", "shape_choices") for p in path if isinstance(p, str)):
        errors.add(path, f"negative dimension {inst}; every dimension must be >= 0")
        return
    if kind in ("minimum", "maximum"):
        errors.add(path, f"{shown(inst)} is out of range; the value must be {'>=' if kind == 'minimum' else '<='} "
                         f"{err.validator_value}")
        return
    if kind == "pattern":
        errors.add(path, f"{shown(inst)} is not a valid name; use letters, digits, '_', '.' or '-' and start with a "
                         "letter or '_'")
        return
    if kind == "const":
        errors.add(path, f"must be {err.validator_value!r}, got {shown(inst)}")
        return
    if kind == "minItems":
        errors.add(path, f"needs at least {err.validator_value} item(s), got {len(inst)}")
        return
    if kind == "maxItems":
        errors.add(path, f"has {len(inst)} items; at most {err.validator_value} are allowed")
        return
    errors.add(path, shown(err.message, 300, quote=False))


def _article(t: str) -> str:
    return {"object": "a mapping", "array": "a list", "string": "a string", "integer": "an integer",
            "number": "a number", "boolean": "true or false"}.get(t, t)


def _describe(v: Any) -> str:
    if isinstance(v, bool):
        return f"boolean {v}"
    if isinstance(v, dict):
        return "a mapping"
    if isinstance(v, list):
        return "a list"
    if v is None:
        return "nothing (null)"
    return f"{type(v).__name__} {shown(v)}"


def _negative_dim(err: Any) -> Any:
    """The first "negative dimension" error among the alternatives of a oneOf/anyOf error (any depth)."""
    for sub in err.context or ():
        path = tuple(sub.absolute_path)
        if sub.validator == "minimum" and path and isinstance(path[-1], int) and isinstance(sub.instance, int) \
                and sub.instance < 0 and any(p in ("shape", "shapes", "shape_choices") for p in path):
            return sub
        found = _negative_dim(sub)
        if found is not None:
            return found
    return None


__all__ = ["format_path", "MAX_ERRORS"]
